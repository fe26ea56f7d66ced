"""A backup of the results database that a plant can restore: taken while the kiosk writes, checked before it counts.

The database holds what cannot be made again: every board's verdicts, the operators' reviews, the users and the
audit trail. SQLite is copied with its own online backup API (a consistent copy page by page while the writer goes
on), then the copy is opened and checked: `PRAGMA integrity_check`, the boards it holds, and the audit trail's hash
chain verified, so a backup that cannot be restored says so the day it is taken. PostgreSQL is dumped with
`pg_dump --format=custom`, the tool the server ships (its version must be the server's or newer), and the dump is
read back with `pg_restore --list`. A restore checks the file the same way before it touches anything, and never
overwrites a database without being told (`replace`): the one replaced is kept beside it.

Crops, the expert zoo, rule sets and the config are files: docs/pages/plant-it/backups.md says which to copy.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import time
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url


class BackupFailed(RuntimeError):
    """A backup or restore that did not happen, or a file that is not a restorable backup (says what to do)."""


@dataclass(frozen=True)
class Backup:
    path: Path
    nbytes: int
    boards: int | None  # stored boards in the copy (None: a PostgreSQL dump, counted only by restoring it)
    audit_rows: int | None
    audit_intact: bool | None
    seconds: float

    def line(self) -> str:
        held = "" if self.boards is None else (
            f", {self.boards} boards, audit trail {self.audit_rows} rows "
            + ("intact" if self.audit_intact else "BROKEN (see inspector audit verify)"))
        return f"backup {self.path} ({self.nbytes / 2**20:.1f} MiB{held}) in {self.seconds:.1f} s, checked"


def _stamp() -> str:
    return datetime.now().strftime("%Y%m%d-%H%M%S")


def is_sqlite(url: str) -> bool:
    """A box's own SQLite file, not a plant's database server."""
    return make_url(url).get_backend_name() == "sqlite"


def _sqlite_file(url: str) -> Path:
    database = make_url(url).database
    if not database or database == ":memory:":
        raise BackupFailed(f"{url} is not a SQLite file")
    return Path(database)


def check_sqlite(path: Path) -> tuple[int, int, bool]:
    """(boards, audit rows, audit intact) of a SQLite results file; BackupFailed when it is damaged or not one."""
    from ..access.audit import AuditTrail

    try:
        with closing(sqlite3.connect(_read_only(path), uri=True)) as con:
            verdict = con.execute("PRAGMA integrity_check").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise BackupFailed(f"{path} is not a SQLite database ({exc})") from None
    if verdict != "ok":
        raise BackupFailed(f"{path} is damaged (integrity_check: {verdict}); take or pick another backup")
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as con:
            boards = con.execute(text("SELECT count(*) FROM inspections")).scalar_one()
        trail = AuditTrail(engine).verify()
    except Exception as exc:  # noqa: BLE001 - any failure here means: not this product's results database
        raise BackupFailed(f"{path} is not an inspector results database ({type(exc).__name__}: {exc})") from None
    finally:
        engine.dispose()
    return int(boards), trail.rows, trail.intact


def _read_only(path: Path) -> str:
    """A read-only SQLite URI of `path` (percent-encoded: a name with `?` or `#` stays one file)."""
    return path.resolve().as_uri() + "?mode=ro"


def _sqlite_copy(source: Path, target: Path) -> None:
    """The online backup: consistent while another process writes (SQLite retries the pages it changed)."""
    with closing(sqlite3.connect(_read_only(source), uri=True)) as src, closing(sqlite3.connect(target)) as dst:
        src.backup(dst, pages=1024, sleep=0.01)


def backup_sqlite(url: str, out_dir: Path) -> Backup:
    source = _sqlite_file(url)
    if not source.is_file():
        raise BackupFailed(f"no results database at {source}; nothing to back up (check --db or --data)")
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{source.stem}-{_stamp()}.sqlite"
    t0 = time.perf_counter()
    partial = target.with_suffix(".partial")
    try:
        _sqlite_copy(source, partial)
        boards, rows, intact = check_sqlite(partial)
    except BaseException:
        partial.unlink(missing_ok=True)  # a copy that failed its check leaves nothing that looks like a backup
        raise
    partial.rename(target)  # only a checked copy carries the backup's name
    return Backup(target, target.stat().st_size, boards, rows, intact, time.perf_counter() - t0)


def _pg_tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BackupFailed(f"{name} is not installed: install PostgreSQL's client tools of the server's version "
                           "(Debian: apt install postgresql-client)")
    return found


def _pg_target(url: str) -> tuple[str, dict[str, str]]:
    """(a libpq connection string without the password, the environment carrying it): no password on a command
    line, where every user of the box could read it."""
    u = make_url(url)
    env = dict(os.environ)
    if u.password:
        env["PGPASSWORD"] = u.password
    plain = u.set(drivername="postgresql", password=None)
    return plain.render_as_string(hide_password=False), env


def _run(cmd: list[str], env: dict[str, str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise BackupFailed(f"{what} failed: {done.stderr.strip() or done.stdout.strip()}")


def backup_postgres(url: str, out_dir: Path) -> Backup:
    target_url, env = _pg_target(url)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = make_url(url).database or "postgres"
    target = out_dir / f"{name}-{_stamp()}.pgdump"
    partial = target.with_suffix(".partial")
    t0 = time.perf_counter()
    try:
        _run([_pg_tool("pg_dump"), "--format=custom", "--no-owner", f"--file={partial}", f"--dbname={target_url}"],
             env, "pg_dump")
        _run([_pg_tool("pg_restore"), "--list", str(partial)], env, "reading the dump back (pg_restore --list)")
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.rename(target)
    return Backup(target, target.stat().st_size, None, None, None, time.perf_counter() - t0)


def backup(url: str, out_dir: Path, keep: int = 0) -> tuple[Backup, list[Path]]:
    """The results database at `url` backed up into `out_dir`, checked; then, with `keep`, the older backups of the
    same database there deleted but the newest `keep` (the new one among them). (the backup, the ones deleted)"""
    made = backup_sqlite(url, out_dir) if is_sqlite(url) else backup_postgres(url, out_dir)
    if keep < 1:
        return made, []
    stem = made.path.name.rsplit("-", 2)[0]  # NAME-YYYYmmdd-HHMMSS.suffix: the database's name
    same = sorted(out_dir.glob(f"{stem}-[0-9]*{made.path.suffix}"), key=lambda p: p.name, reverse=True)
    gone = [p for p in same[keep:] if p != made.path]
    for old in gone:
        old.unlink()
    return made, gone


def restore(path: Path, url: str, replace: bool = False) -> str:
    """The backup `path` made the database at `url`; what was done, in a line. A database there is replaced only
    with `replace` (a SQLite file is kept beside it as `<name>.before-restore-<time>`)."""
    if not path.is_file():
        raise BackupFailed(f"no backup file {path}")
    if is_sqlite(url):
        boards, rows, intact = check_sqlite(path)
        target = _sqlite_file(url)
        kept = ""
        if target.exists():
            if not replace:
                raise BackupFailed(f"{target} exists: stop the kiosk and the dashboard, then restore with --replace "
                                   "(the file there is kept beside it)")
            aside = target.with_name(f"{target.name}.before-restore-{_stamp()}")
            target.rename(aside)
            kept = f"; the database it replaced is {aside}"
        target.parent.mkdir(parents=True, exist_ok=True)
        _sqlite_copy(path, target)
        trail = "intact" if intact else "BROKEN"
        return f"restored {target} from {path}: {boards} boards, audit trail {rows} rows {trail}{kept}"
    target_url, env = _pg_target(url)
    _run([_pg_tool("pg_restore"), "--list", str(path)], env, f"reading {path} (pg_restore --list)")
    cmd = [_pg_tool("pg_restore"), "--no-owner", "--exit-on-error", f"--dbname={target_url}", str(path)]
    if replace:
        cmd[1:1] = ["--clean", "--if-exists"]
    _run(cmd, env, "pg_restore" + ("" if replace else " (into a database that holds tables: add --replace)"))
    return f"restored {make_url(url).render_as_string(hide_password=True)} from {path}"
