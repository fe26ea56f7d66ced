"""`inspector db backup` and `db restore` (results/backup.py): a real SQLite file backed up while another process
writes boards into it, a real PostgreSQL database dumped and restored with its own tools, and a damaged backup
refused before anything is touched."""
from __future__ import annotations

import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

from sqlalchemy import text

from inspector.results.backup import check_sqlite
from inspector.results.store import ResultStore, sqlite_url

from .people import ADMIN, PASSWORD, book
from .services import Postgres
from .test_results import board

REPO = Path(__file__).resolve().parents[1]
WRITER = """
import sys, time
from inspector.results.store import ResultStore
from tests.test_results import board
store = ResultStore(sys.argv[1])
print("writing", flush=True)
for i in range(100000):  # stopped by the test once the backup is taken
    store.write([board(f"W{i:04d}", i)])
    time.sleep(0.005)
"""


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inspector.cli", "db", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=300)


def boards_in(url: str) -> int:
    store = ResultStore(url)
    try:
        with store.engine.connect() as c:
            return int(c.execute(text("SELECT count(*) FROM inspections")).scalar_one())
    finally:
        store.close()


def test_a_sqlite_backup_taken_while_boards_are_written_is_whole_and_restores(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "results.sqlite")
    store, users = book(url)
    users.add(ADMIN, "olga", "operator", PASSWORD)  # an audit row: the copy's hash chain is checked
    store.write([board("B0001")])
    store.close()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, url], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "writing"
        done = cli("backup", "--to", str(tmp_path / "backups"), "--db", url)
        assert writer.poll() is None, "the writer stopped before the backup was taken: nothing ran beside it"
    finally:
        writer.kill()
        writer.wait(120)
    assert done.returncode == 0, done.stderr
    (copy,) = (tmp_path / "backups").glob("results-*.sqlite")
    boards, rows, intact = check_sqlite(copy)
    assert boards >= 1 and rows >= 1 and intact  # a consistent moment of a database being written
    assert f"{boards} boards" in done.stdout and "intact" in done.stdout

    target = sqlite_url(tmp_path / "restored" / "results.sqlite")
    assert cli("restore", str(copy), "--db", target).returncode == 0
    assert boards_in(target) == boards
    again = cli("restore", str(copy), "--db", target)  # a database there is never replaced unasked
    assert again.returncode == 1 and "--replace" in again.stderr
    replaced = cli("restore", str(copy), "--db", target, "--replace")
    assert replaced.returncode == 0 and "before-restore" in replaced.stdout
    assert len(list((tmp_path / "restored").glob("results.sqlite.before-restore-*"))) == 1


def test_a_damaged_backup_is_refused_and_the_database_left_as_it_was(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "results.sqlite")
    store, _users = book(url)
    store.write([board("B0001"), board("B0002", 1)])
    store.close()
    bad = tmp_path / "results-broken.sqlite"
    bad.write_bytes((tmp_path / "results.sqlite").read_bytes()[:4096] + b"\0garbage" * 512)
    done = cli("restore", str(bad), "--db", url, "--replace")
    assert done.returncode == 1 and str(bad) in done.stderr
    assert boards_in(url) == 2 and not list(tmp_path.glob("*.before-restore-*"))
    gone = cli("backup", "--to", str(tmp_path / "b"), "--db", sqlite_url(tmp_path / "none.sqlite"))
    assert gone.returncode == 1 and "nothing to back up" in gone.stderr


def test_a_postgresql_database_is_dumped_and_restored_with_its_own_tools(postgres: Postgres, tmp_path: Path) -> None:
    url = postgres.create_db("b" + uuid.uuid4().hex[:10])
    store, users = book(url)
    users.add(ADMIN, "olga", "operator", PASSWORD)
    store.write([board(f"P{i}", i) for i in range(5)])
    store.close()
    skipped = cli("backup", "--local-only", "--to", str(tmp_path), "--db", url)  # the daily unit on a box
    assert skipped.returncode == 0 and "nothing done" in skipped.stdout and not list(tmp_path.glob("*.pgdump"))
    done = cli("backup", "--to", str(tmp_path), "--db", url)
    assert done.returncode == 0, done.stderr
    (dump,) = tmp_path.glob("*.pgdump")
    empty = postgres.create_db("e" + uuid.uuid4().hex[:10], upgraded=False)
    assert cli("restore", str(dump), "--db", empty).returncode == 0
    assert boards_in(empty) == 5
    refused = cli("restore", str(dump), "--db", url)  # its tables are there: replaced only when asked
    assert refused.returncode == 1 and "--replace" in refused.stderr
    assert cli("restore", str(dump), "--db", url, "--replace").returncode == 0
    assert boards_in(url) == 5


def test_a_file_that_is_not_a_results_database_is_named(tmp_path: Path) -> None:
    other = tmp_path / "results.sqlite"
    with sqlite3.connect(other) as c:
        c.execute("CREATE TABLE t (x)")
    done = cli("restore", str(other), "--db", sqlite_url(tmp_path / "new.sqlite"))
    assert done.returncode == 1 and "not an inspector results database" in done.stderr


def test_keep_deletes_the_databases_older_backups_but_the_newest(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "results.sqlite")
    store, _users = book(url)
    store.close()
    folder = tmp_path / "backups"
    folder.mkdir()
    older = [folder / f"results-2026010{d}-020000.sqlite" for d in (1, 2, 3)]
    others = [folder / "results-notes.sqlite", folder / "plant-20260101-020000.sqlite"]  # not this database's
    for p in older + others:
        p.write_bytes(b"")
    done = cli("backup", "--to", str(folder), "--db", url, "--keep", "2")
    assert done.returncode == 0 and "2 older deleted (--keep 2)" in done.stdout, done.stdout + done.stderr
    assert len(list(folder.glob("results-2*.sqlite"))) == 2  # the new one and the newest before it
    assert older[2].exists() and not older[0].exists() and not older[1].exists()
    assert all(p.exists() for p in others)
