"""Nothing lost, nothing stored twice: the results room under replays, torn spools, refused rows, offsets."""
from __future__ import annotations

import csv
import io
import json
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from inspector.results.credentials import database_url
from inspector.results.export import export_csv
from inspector.results.records import BoardRecord
from inspector.results.revisions import read_state
from inspector.results.schema import Base
from inspector.results.scope import Scope
from inspector.results.spool import Spool
from inspector.results.store import Filters, ResultStore, SchemaTooNew, parse_when, sqlite_url
from inspector.results.writer import ResultWriter

from .faults import record
from .test_results import board


def wait_for(check, timeout: float = 15.0):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not check():
        time.sleep(0.05)
    return check()


def test_a_board_written_twice_is_stored_once(store: ResultStore) -> None:
    b = board("B1")
    assert store.write([b]) == 1
    assert store.write([b, board("B2", 1)]) == 1  # a commit re-sent after its acknowledgement was lost
    assert store.write([b, b]) == 0
    assert [i.board_serial for i in store.inspections()] == ["B1", "B2"]
    assert store.inspections()[0].uuid == b.inspection_id


def test_the_models_match_the_migrations(store: ResultStore) -> None:
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    assert diff == []


def test_a_spool_replayed_after_a_crash_stores_each_board_once(tmp_path: Path) -> None:
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    boards = [board(f"B{i}", i) for i in range(5)]
    store.write(boards[:3])  # stored, then the crash came before the spool's position moved on
    spool = Spool(tmp_path / "spool.jsonl")
    spool.append(boards)
    writer = ResultWriter(store, tmp_path / "spool.jsonl", batch=2, retry_s=0.05)
    writer.start()
    status = writer.close()
    assert (status.written, status.duplicates, status.spooled) == (2, 3, 0)
    assert [i.board_serial for i in store.inspections()] == [f"B{i}" for i in range(5)]
    record("spool replayed over boards already stored (3 of 5)", 1, [f"B{i}" for i in range(5)], store)
    assert not (tmp_path / "spool.jsonl").exists()


def test_a_torn_spool_line_goes_to_the_dead_letters_and_the_rest_is_stored(tmp_path: Path) -> None:
    path = tmp_path / "spool.jsonl"
    lines = [json.dumps(board(f"B{i}", i).to_json()) for i in range(3)]
    # a power cut mid-append: half a line, then the next start appends behind it
    path.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])
    spool = Spool(path)
    spool.append([board("B2", 2)])
    path.open("ab").write(b"\xff\xfe not json\n")
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    writer = ResultWriter(store, path, retry_s=0.05)
    writer.start()
    status = writer.close()
    assert [i.board_serial for i in store.inspections()] == ["B0", "B2"]
    dead = [json.loads(ln) for ln in (tmp_path / "dead-letter.jsonl").read_text().splitlines()]
    assert len(dead) == 2 == status.dead_letters and all("unreadable spool line" in d["reason"] for d in dead)
    assert dead[0]["raw"] == lines[1][: len(lines[1]) // 2] and "raw_base64" in dead[1]


def test_the_spool_reads_from_its_position_not_from_the_start(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool.jsonl")
    spool.append([board(f"B{i}", i) for i in range(5)])
    first = spool.peek(2)
    spool.consume(first)
    again = Spool(tmp_path / "spool.jsonl")  # after a restart: the position survived
    assert len(again) == 3 and [e.board.board_serial for e in again.peek(10)] == ["B2", "B3", "B4"]


def test_a_row_the_database_refuses_is_set_aside_and_the_rest_is_stored(postgres, tmp_path: Path) -> None:
    store = ResultStore(postgres.create_db("rej" + uuid.uuid4().hex[:8]))
    writer = ResultWriter(store, tmp_path / "spool.jsonl", batch=8, retry_s=0.05)
    writer.start()
    bad = board("X" * 300, 1)  # longer than the column: PostgreSQL refuses it, and would forever
    for b in (board("B0"), bad, board("B2", 2)):
        writer.put(b)
    status = writer.close()
    assert [i.board_serial for i in store.inspections()] == ["B0", "B2"]
    (dead,) = store.dead_letters()
    assert dead.uuid == bad.inspection_id and "too long" in dead.reason
    record("row refused by PostgreSQL (1 set aside, not lost)", 1, ["B0", "B2"], store)
    assert BoardRecord.from_json(json.loads(dead.payload)).board_serial == bad.board_serial
    assert status.dead_letters == 1 and status.spooled == 0


def test_a_database_missing_at_start_is_caught_up_when_it_appears(tmp_path: Path) -> None:
    where = tmp_path / "not-yet"
    store = ResultStore(sqlite_url(where / "r.sqlite"), connect=False)  # its folder does not exist yet
    writer = ResultWriter(store, tmp_path / "spool.jsonl", batch=2, retry_s=0.05)
    writer.start()
    for i in range(4):
        writer.put(board(f"B{i}", i))
    assert wait_for(lambda: writer.status().spooled == 4), writer.status()
    assert "cannot open the results database" in writer.status().last_error
    where.mkdir()
    assert wait_for(lambda: writer.status().spooled == 0 and writer.status().written == 4), writer.status()
    writer.close()
    assert [i.board_serial for i in store.inspections()] == ["B0", "B1", "B2", "B3"]


def test_a_newer_schema_names_both_revisions(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "r.sqlite")
    ResultStore(url).close()
    s = ResultStore(url)
    with s.engine.begin() as c:
        c.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    with pytest.raises(SchemaTooNew, match="revision 0099, which this release does not know .*up to 0013"):
        ResultStore(url)
    # a newer release's additive revision, recorded by its `db upgrade`: this release keeps running on it
    with s.engine.begin() as c:
        c.execute(text("UPDATE schema_record SET revision = '0099', runs_with = '0005', release = '9.9'"))
    ResultStore(url).write([board("ON-0099", 0)])
    assert "a newer release (9.9) upgraded it; its code runs with releases from revision 0005; this release runs " \
           "on it" in read_state(s.engine).describe()
    # ... but not on a contracting one (runs only with its own release's code)
    with s.engine.begin() as c:
        c.execute(text("UPDATE schema_record SET runs_with = '0099'"))
    with pytest.raises(SchemaTooNew, match="runs only with releases from revision 0099: upgrade this box"):
        ResultStore(url)


def test_time_filters_accept_offsets_and_times_come_back_in_utc(store: ResultStore) -> None:
    at = datetime(2026, 11, 23, 10, 0, tzinfo=timezone.utc)
    b = BoardRecord("T1", "board_a", "v1", at, at + timedelta(seconds=1))
    store.write([b])
    (got,) = store.inspections(Filters(since=parse_when("2026-11-23T11:00+02:00")))  # = 09:00Z
    assert got.started_at == at and got.started_at.utcoffset() == timedelta(0)
    assert store.inspections(Filters(since=parse_when("2026-11-23T10:00:01Z"))) == []
    out = io.StringIO()
    export_csv(store, out)
    row = next(csv.DictReader(io.StringIO(out.getvalue())))
    assert row["started_at"] == "2026-11-23T10:00:00+00:00" and row["inspection_id"] == b.inspection_id


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised(tmp_path: Path) -> None:
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    store.write([board("=HYPERLINK(\"http://x\")"), board("-1+2", 1), board("@SUM(A1)", 2)])
    out = io.StringIO()
    export_csv(store, out)
    serials = [r["board_serial"] for r in csv.DictReader(io.StringIO(out.getvalue()))]
    assert set(serials) == {"'=HYPERLINK(\"http://x\")", "'-1+2", "'@SUM(A1)"}


def test_a_database_password_never_comes_from_the_command_line(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    with pytest.raises(ValueError, match="INSPECTOR_DB_URL"):
        database_url("postgresql+psycopg2://inspector:SECRET@db/inspection", "sqlite://")
    assert database_url("postgresql+psycopg2://inspector@db/inspection", "d") == "postgresql+psycopg2://inspector@db/inspection"
    monkeypatch.setenv("INSPECTOR_DB_URL", "postgresql+psycopg2://u:pw@h/db")
    assert database_url(None, "d") == "postgresql+psycopg2://u:pw@h/db"
    monkeypatch.delenv("INSPECTOR_DB_URL")
    (tmp_path / "db-url").write_text("postgresql+psycopg2://u:cred@h/db\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    assert database_url(None, "d") == "postgresql+psycopg2://u:cred@h/db"


def test_db_prune_deletes_what_is_older_than_the_retention(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """Of its own line only: a plant's shared database holds other lines' boards, pruned by their own boxes (or
    by a plant-wide prune asked for with --all-lines)."""
    import os

    from inspector.cli import main

    data = tmp_path / "data"
    data.mkdir()
    store = ResultStore(sqlite_url(data / "results.sqlite"))
    now = datetime.now(timezone.utc)
    old, new = now - timedelta(days=40), now - timedelta(days=2)
    store.write([BoardRecord("OLD", "a", "v", old, old), board("NEW", 0),
                 BoardRecord("OTHER-LINE", "a", "v", old, old, line="line-2"),
                 BoardRecord("OTHER-STATION", "a", "v", old, old, station="aoi-2")])
    with store.engine.begin() as c:
        c.execute(text("UPDATE inspections SET started_at = :t WHERE board_serial = 'NEW'"),
                  {"t": new.replace(tzinfo=None)})
    for day in (old, new):
        (data / "crops" / day.strftime("%Y-%m-%d") / "B-1").mkdir(parents=True)
    archive = tmp_path / "inbox" / "inspected"
    archive.mkdir(parents=True)
    for name, when in (("old.png", old), ("new.png", new)):
        (archive / name).write_bytes(b"x")
        os.utime(archive / name, (when.timestamp(), when.timestamp()))
    assert main(["db", "prune", "--retain-days", "30", "--data", str(data), "--archive", str(archive)]) == 0
    assert "1 boards (line line-1, station aoi-1), 1 day(s) of crops, 1 archived image(s)" in capsys.readouterr().out
    assert [i.board_serial for i in store.inspections()] == ["NEW", "OTHER-LINE", "OTHER-STATION"]
    assert store.count() == (3, 2) and store.count(Scope("line-2", "aoi-1")) == (1, 0)
    assert main(["db", "prune", "--retain-days", "30", "--data", str(data), "--station", "aoi-2"]) == 0
    assert [i.board_serial for i in store.inspections()] == ["NEW", "OTHER-LINE"]
    assert main(["db", "prune", "--retain-days", "30", "--data", str(data), "--all-lines"]) == 0
    assert "1 boards (every line)" in capsys.readouterr().out
    assert [i.board_serial for i in store.inspections()] == ["NEW"] and store.count() == (1, 2)
    assert [p.name for p in (data / "crops").iterdir()] == [new.strftime("%Y-%m-%d")]
    assert [p.name for p in archive.iterdir()] == ["new.png"]
