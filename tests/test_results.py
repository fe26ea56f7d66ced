"""The results room against real databases: SQLite file and a PostgreSQL server."""
from __future__ import annotations

import csv
import io
import json
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from inspector.results.export import COLUMNS, export_csv
from inspector.results.records import BoardRecord, PartRecord
from inspector.results.store import Filters, ResultStore, StoreUnavailable, current_revision, head_revision, sqlite_url
from inspector.results.writer import ResultWriter

from .services import Postgres

T0 = datetime(2026, 11, 22, 8, 0, tzinfo=timezone.utc)


def board(serial: str, minutes: int = 0, defect: str | None = None) -> BoardRecord:
    parts = [PartRecord("R1", "R0402", "cls-R0402", "ab" * 32, "pass", "ok", 0.99),
             PartRecord("D1", "D-SOD123", "det-polarity", "cd" * 32, "fail" if defect else "pass", defect or "ok",
                        0.8, box=(1.0, 2.0, 11.0, 8.0))]
    at = T0 + timedelta(minutes=minutes)
    return BoardRecord(serial, "board_a", "e7eba0041ecb", at, at + timedelta(seconds=2), parts=parts)


def test_migrations_create_the_schema_at_head(store: ResultStore) -> None:
    assert current_revision(store.engine) == head_revision() == "0013"
    tables = set(inspect(store.engine).get_table_names())
    assert {"inspections", "component_results", "alembic_version"} <= tables


def test_a_database_of_the_first_schema_is_upgraded_keeping_its_boards(tmp_path: Path) -> None:
    from inspector.results.revisions import upgrade
    from inspector.results.store import open_engine

    url = sqlite_url(tmp_path / "old.sqlite")
    engine = open_engine(url)
    upgrade(engine, "0001")
    with engine.begin() as c:
        c.execute(text("INSERT INTO inspections (started_at, finished_at, line, station, board_serial, recipe, "
                       "ruleset_version, verdict, source) VALUES ('2026-11-01 08:00:00', '2026-11-01 08:00:01', "
                       "'line-1', 'aoi-1', 'OLD1', 'board_a', 'abc', 'pass', '')"))
    engine.dispose()
    store = ResultStore(url)  # opening migrates to head
    assert current_revision(store.engine) == head_revision() == "0013"
    (old,) = store.inspections()
    assert old.board_serial == "OLD1" and old.error is None and old.reg_residual_px is None
    store.write([registered("NEW1")])
    assert [i.board_serial for i in store.inspections()] == ["OLD1", "NEW1"]


def registered(serial: str, error: str | None = None) -> BoardRecord:
    """A board as the line stores it after registration, or with a board-level error and no parts."""
    if error:
        return BoardRecord(serial, "board_a", "e7eba0041ecb", T0, T0, error=error)
    b = board(serial)
    b.transform, b.residual_px = (1.001, -0.017, 3.25, 0.017, 1.001, -2.5), 0.043
    b.fiducials = {"F1": (33.2, 50.6), "F2": (612.0, 27.9)}
    return b


def test_registration_and_board_level_errors_round_trip(store: ResultStore) -> None:
    reason = "registration failed: fiducial F2 not found (best match 0.21 of 0.55 needed)"
    store.write([registered("R1"), registered("E1", error=reason)])
    r1, e1 = store.inspections()
    assert json.loads(r1.reg_transform) == [1.001, -0.017, 3.25, 0.017, 1.001, -2.5]
    assert r1.reg_residual_px == pytest.approx(0.043) and json.loads(r1.reg_fiducials)["F1"] == [33.2, 50.6]
    assert (e1.verdict, e1.error, e1.parts) == ("error", reason, [])
    again = BoardRecord.from_json(json.loads(json.dumps(registered("R2").to_json())))  # the spool's round trip
    assert again.transform == registered("R2").transform and again.fiducials["F2"] == (612.0, 27.9)
    bare = BoardRecord.from_json(json.loads(json.dumps(registered("E2", error=reason).to_json())))
    assert bare.verdict == "error" and bare.error == reason
    panel = registered("P1")
    panel.panel_boards = 2
    data = json.loads(json.dumps(panel.to_json()))
    assert BoardRecord.from_json(data).panel_boards == 2
    data["later_field"], data["parts"][0]["later_part_field"] = 1, "x"  # a spool a later release wrote
    later = BoardRecord.from_json(data)
    assert later.board_serial == "P1" and later.parts == panel.parts and later.panel_boards == 2
    only_errors = io.StringIO()
    assert export_csv(store, only_errors, Filters(verdict="error")) == 1


def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    s = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    with s.engine.connect() as c:
        assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"


def test_boards_and_parts_round_trip_with_filters(store: ResultStore) -> None:
    store.write([board("B1", 0), board("B2", 10, defect="polarity"), board("B3", 20)])
    assert store.count() == (3, 6)
    rows = store.inspections()
    assert [r.board_serial for r in rows] == ["B1", "B2", "B3"]
    assert [r.verdict for r in rows] == ["pass", "fail", "pass"]
    d1 = rows[1].parts[1]
    assert (d1.ref, d1.defect_class, d1.box_x1, d1.weights_sha256) == ("D1", "polarity", 11.0, "cd" * 32)
    assert [r.board_serial for r in store.inspections(Filters(since=T0 + timedelta(minutes=5)))] == ["B2", "B3"]
    assert [r.board_serial for r in store.inspections(Filters(board="B3"))] == ["B3"]


def test_csv_has_one_row_per_component_result(store: ResultStore) -> None:
    store.write([board("B1"), board("B2", 5, defect="shifted")])
    out = io.StringIO()
    assert export_csv(store, out) == 4
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert list(rows[0]) == list(COLUMNS)
    assert [(r["board_serial"], r["ref"], r["verdict"]) for r in rows] == [
        ("B1", "R1", "pass"), ("B1", "D1", "pass"), ("B2", "R1", "pass"), ("B2", "D1", "fail")]
    assert rows[3]["defect_class"] == "shifted" and rows[3]["board_verdict"] == "fail"
    failed = io.StringIO()
    assert export_csv(store, failed, Filters(verdict="fail")) == 1


def test_a_boards_hermes_board_id_is_in_its_export_and_its_api_answer_and_finds_it(store: ResultStore,
                                                                                    tmp_path: Path) -> None:
    """The BoardId a Hermes lane gave a board is what the plant's MES knows it by: the CSV carries it in its last
    column (sheets that read columns by position keep theirs), the kiosk's API with the board, and both find a board
    by it. A board off a Hermes lane has none."""
    from inspector.kiosk.results_api import ResultsApi
    from inspector.results.scope import PLANT

    on_lane = board("H1")
    on_lane.board_id = "7e0d4f8a-3c2b-4a1e-9f6d-5b4c3a2e1d0f"
    store.write([on_lane, board("B2", 5, defect="shifted")])
    out = io.StringIO()
    assert export_csv(store, out) == 4
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert COLUMNS.index("board_id") == 28 and [r["board_id"] for r in rows] == [on_lane.board_id] * 2 + [""] * 2
    found = io.StringIO()
    assert export_csv(store, found, Filters(board_id=on_lane.board_id)) == 2
    assert {r["board_serial"] for r in csv.DictReader(io.StringIO(found.getvalue()))} == {"H1"}
    api = ResultsApi(store, PLANT, tmp_path)
    assert api.get("latest", "")["board"]["board_id"] is None  # B2, the newest, came from no Hermes lane
    assert api.get("rows", f"board_id={on_lane.board_id}&verdict=fail")["rows"] == []  # H1 failed nothing
    assert {b["board_id"] for b, _p in api.get("rows", f"board_id={on_lane.board_id}")["rows"]} == {on_lane.board_id}
    assert api.get("defects", "")["rows"][0][0]["board_id"] is None


def test_the_review_queue_is_the_flagged_parts_nobody_has_reviewed_in_a_search_an_export_and_the_api(
        store: ResultStore, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """`reviewed`: parts an operator reviewed, or not yet; with verdict fail, not yet is the review queue. The same
    filter selects the history's rows, the CSV (`inspector export --reviewed`) and the kiosk's rows and count."""
    from inspector.cli import main
    from inspector.kiosk.results_api import ResultsApi
    from inspector.results.reviews import ReviewRequest, record_review
    from inspector.results.scope import PLANT

    store.write([board("B1", defect="polarity"), board("B2", 5, defect="missing"), board("B3", 9)])
    first = next(i for i in store.inspections() if i.board_serial == "B1")
    record_review(store, ReviewRequest(first.uuid, "D1", "false_call", None, "qa"))
    queue = Filters(verdict="fail", reviewed=False)
    assert [(i.board_serial, p.ref) for i, p in store.component_rows(queue)] == [("B2", "D1")]
    assert [(i.board_serial, p.ref) for i, p in store.component_rows(Filters(reviewed=True))] == [("B1", "D1")]
    assert store.count_components(Filters(reviewed=False)) == 5 and store.count_components(queue, cap=10) == 1
    api = ResultsApi(store, PLANT, tmp_path)
    assert [(b["board_serial"], p["ref"]) for b, p in api.get("rows", "verdict=fail&reviewed=no")["rows"]] == [
        ("B2", "D1")]
    assert api.get("count", "reviewed=yes")["count"] == 1
    with pytest.raises(ValueError, match="reviewed is yes or no, not 'maybe'"):
        api.get("rows", "reviewed=maybe")
    assert api.get("rows", "reviewed=no")["reviewed"] == "no" and api.get("count", "")["reviewed"] is None
    from inspector.app.kiosk_results import KioskResults

    assert KioskResults._query(queue) == {"verdict": "fail", "reviewed": "no"}
    # a dashboard attached to a kiosk of a release before the filter (which answers every row, not echoing it) says
    # so rather than show every row as the queue; the kiosk's answers stand in for the older release's here
    older = KioskResults("https://aoi-1:9108", "token")
    older._get = lambda path, query=None: {"rows": [], "count": 0}  # type: ignore[method-assign]
    with pytest.raises(ValueError, match="runs a release that cannot search by review"):
        older.count_components(queue)
    assert older.count_components(Filters(verdict="fail")) == 0 and list(older.component_rows(Filters())) == []
    with pytest.raises(ValueError, match="runs a release that cannot search by review"):  # its CSV would be every row
        older.export_csv(io.StringIO(), queue)
    out = tmp_path / "queue.csv"
    assert main(["export", "--csv", str(out), "--verdict", "fail", "--reviewed", "no", "--db", store.url]) == 0
    assert [(r["board_serial"], r["ref"]) for r in csv.DictReader(out.open())] == [("B2", "D1")]
    capsys.readouterr()


def panel(serial: str, failing: dict[str, str], boards: int = 3, minutes: int = 0) -> BoardRecord:
    """A panel of `boards` boards, each with R1 and C1, and a fiducial on its frame; `failing`: ref -> verdict."""
    refs = [f"{k}-{r}" for k in range(1, boards + 1) for r in ("R1", "C1")] + ["FID1"]
    parts = [PartRecord(r, "R0402", "cls-R0402", None, failing.get(r, "pass"),
                        "missing" if failing.get(r) == "fail" else "ok", 0.9) for r in refs]
    at = T0 + timedelta(minutes=minutes)
    return BoardRecord(serial, "panel_a", "e7eba0041ecb", at, at + timedelta(seconds=2), parts=parts,
                       panel_boards=boards)


def test_a_panels_boards_each_have_their_verdict_in_the_database_its_export_and_its_api_answer(
        store: ResultStore, tmp_path: Path) -> None:
    """A panel is one inspection; which of its boards did not pass is stored with it (the one rule of
    results/units.py, so the database, the CSV, the API and the factory messages agree), each part's CSV row says
    its board, and a board that is not a panel has none of it."""
    from inspector.kiosk.results_api import ResultsApi
    from inspector.results.scope import PLANT

    store.write([panel("P1", {"2-C1": "fail", "3-R1": "error"}), panel("P2", {}, minutes=1),
                 panel("P3", {"FID1": "fail"}, minutes=2), board("B4", 3, defect="shifted")])
    found = {i.board_serial: i.panel for i in store.inspections()}
    assert found["B4"] is None
    assert (found["P1"].boards, found["P1"].failed, found["P1"].describe()) == (3, [2, 3], "boards 2, 3 of 3 failed")
    assert (found["P2"].failed, found["P2"].describe()) == ([], "")
    assert (found["P3"].failed, found["P3"].describe()) == ([0], "the panel's frame failed")
    out = io.StringIO()
    assert export_csv(store, out, Filters(board="P1")) == 7
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert COLUMNS[29:33] == ("panel_boards", "panel_position", "panel_failed", "panel_skipped")
    assert [(r["ref"], r["panel_position"]) for r in rows] == [
        ("1-R1", "1"), ("1-C1", "1"), ("2-R1", "2"), ("2-C1", "2"), ("3-R1", "3"), ("3-C1", "3"), ("FID1", "0")]
    assert {(r["panel_boards"], r["panel_failed"], r["panel_skipped"]) for r in rows} == {("3", "2;3", "")}
    plain = io.StringIO()
    export_csv(store, plain, Filters(board="B4"))
    assert {(r["panel_boards"], r["panel_position"], r["panel_failed"], r["panel_skipped"])
            for r in csv.DictReader(io.StringIO(plain.getvalue()))} == {("", "", "", "")}
    api = ResultsApi(store, PLANT, tmp_path)
    answered = {b["board_serial"]: (b["panel_boards"], b["panel_failed"]) for b, _p in api.get("rows", "")["rows"]}
    assert answered == {"P1": (3, "2;3"), "P2": (3, ""), "P3": (3, "0"), "B4": (None, None)}


def test_a_panel_whose_whole_board_failed_names_every_board_and_exports_its_board_row(store: ResultStore) -> None:
    """A board-level error (registration failed) leaves a panel without parts: every board of it failed."""
    failed = panel("P9", {})
    failed.parts, failed.error = [], "registration failed: 1 of 3 fiducials found"
    x_out = panel("P10", {}, minutes=1)  # board 2 an x-out the machine before marked: not inspected, not failed
    x_out.parts, x_out.error, x_out.panel_skipped = [], failed.error, [2]
    store.write([failed, x_out])
    assert {i.board_serial: i.panel.failed for i in store.inspections()} == {"P9": [1, 2, 3], "P10": [1, 3]}
    ten = store.inspections(Filters(board="P10"))[0].panel
    assert ten.skipped == [2] and ten.describe() == "boards 1, 3 of 3 failed; x-out 2 not inspected"
    out = io.StringIO()
    assert export_csv(store, out, Filters(board="P9")) == 1
    row = next(csv.DictReader(io.StringIO(out.getvalue())))
    assert (row["ref"], row["panel_boards"], row["panel_position"], row["panel_failed"], row["panel_skipped"]) == (
        "", "3", "", "1;2;3", "")
    out = io.StringIO()
    assert export_csv(store, out, Filters(board="P10")) == 1
    assert next(csv.DictReader(io.StringIO(out.getvalue())))["panel_skipped"] == "2"


def test_a_unit_export_has_a_row_per_board_a_panels_each_with_its_verdict_and_its_x_outs_named(
        store: ResultStore, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """`inspector export --units`: one row per unit for an MES: a board that is no panel is one, a panel's boards
    each with their own verdict (the same rule as everywhere), its frame where it has parts, an x-out named; part
    filters are refused, not applied to half a unit."""
    from inspector.cli import main
    from inspector.results.unit_export import UNIT_COLUMNS, export_units_csv

    x_out = panel("P5", {"1-R1": "fail"}, minutes=1)
    x_out.parts = [p for p in x_out.parts if not p.ref.startswith("3-")]
    x_out.panel_skipped = [3]
    store.write([panel("P1", {"2-C1": "fail"}), x_out, board("B4", 3, defect="shifted")])
    out = io.StringIO()
    assert export_units_csv(store, out) == 9
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert list(rows[0]) == list(UNIT_COLUMNS)
    got = [(r["board_serial"], r["position"], r["unit_verdict"], r["parts"], r["parts_flagged"]) for r in rows]
    assert got == [("P1", "0", "pass", "1", "0"), ("P1", "1", "pass", "2", "0"), ("P1", "2", "fail", "2", "1"),
                   ("P1", "3", "pass", "2", "0"),
                   ("P5", "0", "pass", "1", "0"), ("P5", "1", "fail", "2", "1"), ("P5", "2", "pass", "2", "0"),
                   ("P5", "3", "x-out", "0", "0"),
                   ("B4", "1", "fail", "2", "1")]
    assert {r["board_verdict"] for r in rows if r["board_serial"] == "P1"} == {"fail"}
    assert {r["panel_boards"] for r in rows} == {"3", ""}
    made = tmp_path / "units.csv"
    assert main(["export", "--db", store.url, "--csv", str(made), "--units", "--board", "P5"]) == 0
    assert len(made.read_text().splitlines()) == 1 + 4
    assert "4 units (boards, a panel's each)" in capsys.readouterr().err
    refused = tmp_path / "refused.csv"
    assert main(["export", "--db", store.url, "--csv", str(refused), "--units", "--component", "R0402"]) == 2
    assert "--units judges each board by all its parts" in capsys.readouterr().err and not refused.exists()


def test_writer_batches_and_acknowledges(tmp_path: Path) -> None:
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    acked: list[str] = []
    writer = ResultWriter(store, tmp_path / "spool.jsonl", batch=4, on_written=lambda b: acked.append(b.board_serial))
    writer.start()
    for i in range(10):
        writer.put(board(f"B{i}", i))
    status = writer.close()
    assert status.written == 10 and status.spooled == 0 and store.count() == (10, 20)
    assert acked == [f"B{i}" for i in range(10)]


def test_unreachable_database_spools_then_catches_up_in_order(postgres: Postgres, tmp_path: Path) -> None:
    url = postgres.create_db("spool" + uuid.uuid4().hex[:8])
    store = ResultStore(url)
    spool = tmp_path / "spool.jsonl"
    writer = ResultWriter(store, spool, batch=2, max_wait_s=0.05, retry_s=0.1)
    writer.start()
    writer.put(board("B0"))
    with store.engine.begin() as c:  # the DBA renames the table away: every write fails now
        c.execute(text("ALTER TABLE component_results RENAME TO component_results_moved"))
    for i in range(1, 5):
        writer.put(board(f"B{i}", i))
    deadline = time.monotonic() + 10
    while writer.status().spooled < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    status = writer.status()
    assert status.spooled == 4 and "failed" in (status.last_error or "")
    assert spool.is_file()
    with store.engine.begin() as c:
        c.execute(text("ALTER TABLE component_results_moved RENAME TO component_results"))
    final = writer.close()
    assert final.spooled == 0 and not spool.exists()
    assert [r.board_serial for r in store.inspections()] == ["B0", "B1", "B2", "B3", "B4"]


def test_spool_left_by_a_crash_is_replayed_on_start(tmp_path: Path) -> None:
    import json

    spool = tmp_path / "spool.jsonl"
    spool.write_text(json.dumps(board("OLD").to_json()) + "\n")
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    writer = ResultWriter(store, spool, retry_s=0.05)
    assert writer.status().spooled == 1
    writer.start()
    writer.put(board("NEW", 1))
    writer.close()
    assert [r.board_serial for r in store.inspections()] == ["OLD", "NEW"]


def test_unreachable_database_at_open_says_which(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match="cannot open the results database"):
        ResultStore("postgresql+psycopg2://nobody@127.0.0.1:9/none")


@pytest.fixture
def small_disk(tmp_path: Path):
    """A real 1 MiB filesystem (tmpfs) that the test can fill; needs root, as on the CI machine."""
    import subprocess

    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode:
        pytest.skip(f"cannot mount a small filesystem here: {r.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(folder: Path) -> Path:
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


def test_full_disk_keeps_results_in_memory_tells_why_and_writes_them_once_space_returns(small_disk: Path) -> None:
    store = ResultStore(sqlite_url(small_disk / "r.sqlite"))
    writer = ResultWriter(store, small_disk / "spool.jsonl", batch=4, max_wait_s=0.05, retry_s=0.1)
    writer.start()
    writer.put(board("B0"))
    deadline = time.monotonic() + 10
    while writer.status().written < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    filler = fill(small_disk)
    for i in range(1, 6):
        writer.put(board(f"B{i}", i))
    deadline = time.monotonic() + 10
    while "cannot spool" not in (writer.status().last_error or "") and time.monotonic() < deadline:
        time.sleep(0.05)
    status = writer.status()
    assert status.written == 1 and "No space left" in (status.last_error or ""), status
    filler.unlink()
    final = writer.close()
    assert final.written == 6 and final.pending == 0 and final.spooled == 0
    assert [r.board_serial for r in store.inspections()] == [f"B{i}" for i in range(6)]


def test_crops_of_flagged_parts_are_kept_and_a_full_disk_only_costs_the_picture(tmp_path: Path,
                                                                                small_disk: Path) -> None:
    import numpy as np

    from inspector.results.crops import CropKeeper

    keeper = CropKeeper(tmp_path / "crops", min_free_mb=0)  # this box's free space is not under test here
    b = board("SN/1", defect="polarity")
    b.crops = {"R1": np.zeros((8, 8, 3), np.uint8), "D1": np.full((8, 8, 3), 200, np.uint8)}
    keeper(b)
    assert b.parts[0].crop_path is None  # passed: not kept
    kept = Path(b.parts[1].crop_path)
    assert kept.is_file() and kept.name == "D1.png" and b.crops == {}
    assert kept.parent.name == f"SN_1-{b.inspection_id[:8]}"  # one folder per inspection, never shared

    full = CropKeeper(small_disk / "crops", min_free_mb=0)  # no floor: the write itself meets ENOSPC
    fill(small_disk)
    b2 = board("B2", defect="missing")
    b2.crops = {"D1": np.random.default_rng(0).integers(0, 255, (256, 256, 3), dtype=np.uint8)}
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    writer = ResultWriter(store, tmp_path / "spool.jsonl", prepare=full)
    writer.start()
    writer.put(b2)
    writer.close()
    assert full.failed == 1 and "No space left" in full.last_error
    [stored] = store.inspections()
    assert stored.board_serial == "B2" and stored.parts[1].crop_path is None
    # with a floor, crops stop before the disk is full: skipped, counted and said, the result stored all the same
    floored = CropKeeper(small_disk / "crops", min_free_mb=64)
    b3 = board("B3", defect="missing")
    b3.crops = dict(b2.crops) if b2.crops else {"D1": np.zeros((8, 8, 3), np.uint8)}
    floored(b3)
    assert floored.skipped_low_disk == 1 and floored.failed == 0 and "below the floor of 64 MiB" in floored.low_disk
    assert b3.parts[1].crop_path is None


def test_a_panels_boards_own_serials_are_stored_searched_and_exported_per_unit(store: ResultStore,
                                                                                tmp_path: Path) -> None:
    """Each board's own serial (its code's, or NOREAD-<id>-<k>) is kept with the panel (schema 0010): a search by a
    board's serial finds its panel and no other (a serial that is part of another, or has LIKE's wildcards, does
    not), the CSV says each part's unit serial, the unit export each unit's, the API answers them, and the factory
    message names each unit by its own."""
    from inspector.kiosk.results_api import ResultsApi
    from inspector.results.cfx import units_inspected
    from inspector.results.scope import PLANT
    from inspector.results.unit_export import export_units_csv

    coded = panel("P1", {"2-C1": "fail"})
    coded.panel_serials = {1: "SN-1", 2: "SN-1%_2", 3: "NOREAD-abcdef01-3"}
    other = panel("P2", {}, minutes=1)
    other.panel_serials = {1: "SN-10", 2: "SN-11", 3: "SN-12"}
    store.write([coded, other, board("B3", 2)])
    assert {i.board_serial: i.panel.serials for i in store.inspections() if i.panel} == {
        "P1": {1: "SN-1", 2: "SN-1%_2", 3: "NOREAD-abcdef01-3"}, "P2": {1: "SN-10", 2: "SN-11", 3: "SN-12"}}
    found = {serial: [i.board_serial for i in store.inspections(Filters(board=serial))]
             for serial in ("SN-1", "SN-1%_2", "SN-11", "SN-", "P2", "B3", "SN-1%")}
    assert found == {"SN-1": ["P1"], "SN-1%_2": ["P1"], "SN-11": ["P2"], "SN-": [], "P2": ["P2"], "B3": ["B3"],
                     "SN-1%": []}
    out = io.StringIO()
    export_csv(store, out, Filters(board="SN-1"))
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert COLUMNS.index("unit_serial") == 33
    assert [(r["ref"], r["unit_serial"]) for r in rows] == [
        ("1-R1", "SN-1"), ("1-C1", "SN-1"), ("2-R1", "SN-1%_2"), ("2-C1", "SN-1%_2"), ("3-R1", "NOREAD-abcdef01-3"),
        ("3-C1", "NOREAD-abcdef01-3"), ("FID1", "P1")]
    plain = io.StringIO()
    export_csv(store, plain, Filters(board="B3"))
    assert {r["unit_serial"] for r in csv.DictReader(io.StringIO(plain.getvalue()))} == {"B3"}
    units = io.StringIO()
    export_units_csv(store, units)
    assert [(r["board_serial"], r["position"], r["unit_serial"], r["unit_verdict"])
            for r in csv.DictReader(io.StringIO(units.getvalue()))] == [
        ("P1", "0", "P1", "pass"), ("P1", "1", "SN-1", "pass"), ("P1", "2", "SN-1%_2", "fail"),
        ("P1", "3", "NOREAD-abcdef01-3", "pass"), ("P2", "0", "P2", "pass"), ("P2", "1", "SN-10", "pass"),
        ("P2", "2", "SN-11", "pass"), ("P2", "3", "SN-12", "pass"), ("B3", "1", "B3", "pass")]
    api = ResultsApi(store, PLANT, tmp_path)
    answered = {b["board_serial"]: b["panel_serials"] for b, _p in api.get("rows", "")["rows"]}
    assert answered["P2"] == {"1": "SN-10", "2": "SN-11", "3": "SN-12"} and answered["B3"] is None
    message = units_inspected(coded)["MessageBody"]["InspectedUnits"]
    assert [(u["UnitPositionNumber"], u["UnitIdentifier"]) for u in message] == [
        (0, "P1"), (1, "SN-1"), (2, "SN-1%_2"), (3, "NOREAD-abcdef01-3")]
    with store.engine.connect() as c:  # the search's index: a row per board's own serial, pruned with its panel
        assert c.execute(text("SELECT count(*) FROM unit_serials")).scalar() == 6
        store.prune(T0 + timedelta(seconds=30), PLANT)  # P1 only
        assert c.execute(text("SELECT count(*) FROM unit_serials")).scalar() == 3
    assert store.inspections(Filters(board="SN-1")) == [] and len(store.inspections(Filters(board="SN-11"))) == 1


def test_the_approved_make_a_part_was_compared_with_is_stored_exported_answered_and_sent(store: ResultStore,
                                                                                          tmp_path: Path) -> None:
    """A part compared with an approved alternate's window (`inspector board approve`) keeps which (schema 0011):
    traceability of a second source's parts. The database, the spool's round trip, the CSV's last column, the kiosk's
    API, the dashboard's view of it and the factory message all say it; a part compared with its golden board, none."""
    from inspector.app.kiosk_results import _board
    from inspector.kiosk.results_api import ResultsApi
    from inspector.results.cfx import units_inspected
    from inspector.results.scope import PLANT

    second = board("S2", defect="shifted")
    second.parts[0].alternate = "R1__murata.png"
    spooled = BoardRecord.from_json(json.loads(json.dumps(second.to_json())))
    assert spooled.alternates == {"R1": "R1__murata.png"} == second.alternates and board("S1").alternates == {}
    store.write([board("S1"), spooled])
    assert [[p.approved_make for p in i.parts] for i in store.inspections()] == [[None, None],
                                                                               ["R1__murata.png", None]]
    assert [p.approved_make for _i, p in store.component_rows(newest=4)] == [None, "R1__murata.png", None, None]
    assert [p.approved_make for p in store.latest().parts] == ["R1__murata.png", None]
    assert [p.approved_make for _i, p in store.recent_parts()] == [None]  # S2's failed D1: its golden board's
    out = io.StringIO()
    export_csv(store, out)
    assert COLUMNS[-3:] == ("alternate", "review_box", "part_number")  # each new column after the ones before it
    assert [(r["board_serial"], r["ref"], r["alternate"]) for r in csv.DictReader(io.StringIO(out.getvalue()))] == [
        ("S1", "R1", ""), ("S1", "D1", ""), ("S2", "R1", "R1__murata.png"), ("S2", "D1", "")]
    api = ResultsApi(store, PLANT, tmp_path)
    latest = api.get("latest", "")["board"]
    assert [p["alternate"] for p in latest["parts"]] == ["R1__murata.png", None]
    assert [p.approved_make for p in _board(json.loads(json.dumps(latest))).parts] == ["R1__murata.png", None]
    inspections = units_inspected(second)["MessageBody"]["InspectedUnits"][0]["Inspections"]
    assert [i["Comments"] for i in inspections] == ["compared with the approved make R1__murata.png", None]



def test_the_export_names_each_parts_part_number_from_the_rule_set_it_was_inspected_under(store: ResultStore) -> None:
    """Boards inspected under two versions of a rule set, the second with `part_numbers:` (board import --bom): each
    row says the part number its board's rules gave the place, none under the first (nor for a part it names none
    for), with a spreadsheet's formula start defused."""
    from inspector.results.rule_texts import version_of

    plain = "recipe: board_a\n"
    bought = plain + "part_numbers:\n  R1: RC0402FR-071KL\n  D1: '-1N4148'\n"
    texts = {version_of(t): ("board_a", t) for t in (plain, bought)}
    old, new = board("S1"), board("S2", 1)
    old.ruleset_version, new.ruleset_version = version_of(plain), version_of(bought)
    store.write([old, new], texts.get)
    out = io.StringIO()
    export_csv(store, out)
    assert [(r["board_serial"], r["ref"], r["part_number"]) for r in csv.DictReader(io.StringIO(out.getvalue()))] == [
        ("S1", "R1", ""), ("S1", "D1", ""), ("S2", "R1", "RC0402FR-071KL"), ("S2", "D1", "'-1N4148")]


def test_the_kiosk_answers_each_parts_part_number_and_a_versions_table(store: ResultStore, tmp_path: Path) -> None:
    """The kiosk's API says the part number of each part it answers (under its board's rule set), and a version's
    whole table; the dashboard reads that table through either reader alike, a kiosk of a release before part numbers
    giving none rather than an error, and a version whose text is not stored yet is asked again later."""
    from inspector.app.kiosk_results import KioskResults
    from inspector.endpoint import EndpointError
    from inspector.kiosk.http import HttpError
    from inspector.kiosk.results_api import ResultsApi
    from inspector.results.rule_texts import version_of
    from inspector.results.scope import PLANT

    plain = "recipe: board_a\n"
    bought = plain + "part_numbers:\n  R1: RC0402FR-071KL\n"
    old, new = board("S1"), board("S2", 1, defect="missing")
    old.ruleset_version, new.ruleset_version = version_of(plain), version_of(bought)
    store.write([old, new], {version_of(t): ("board_a", t) for t in (plain, bought)}.get)
    assert store.part_numbers(version_of(bought)) == {"R1": "RC0402FR-071KL"}
    later = bought + "  D1: 1N4148WS\n"
    assert store.part_numbers(version_of(plain)) == {} == store.part_numbers(version_of(later))
    third = board("S3", 2)
    third.ruleset_version = version_of(later)
    store.write([third], {version_of(later): ("board_a", later)}.get)  # its text arrives with its first board
    assert store.part_numbers(version_of(later)) == {"R1": "RC0402FR-071KL", "D1": "1N4148WS"}
    api = ResultsApi(store, PLANT, tmp_path)
    rows = api.get("rows", "newest=6")["rows"]
    assert [(b["board_serial"], p["ref"], p["part_number"]) for b, p in rows] == [
        ("S3", "D1", "1N4148WS"), ("S3", "R1", "RC0402FR-071KL"), ("S2", "D1", None), ("S2", "R1", "RC0402FR-071KL"),
        ("S1", "D1", None), ("S1", "R1", None)]
    assert [p["part_number"] for p in api.get("latest", "")["board"]["parts"]] == ["RC0402FR-071KL", "1N4148WS"]
    asked = api.get(f"boards/{new.inspection_id}", "")["board"]
    assert [p["part_number"] for p in asked["parts"]] == ["RC0402FR-071KL", None]
    assert [(p["ref"], p["part_number"]) for _b, p in api.get("defects", "")["rows"]] == [("D1", None)]
    assert api.get(f"part-numbers/{version_of(bought)}", "") == {"version": version_of(bought), "stored": True,
                                                                   "part_numbers": {"R1": "RC0402FR-071KL"}}
    assert api.get("part-numbers/0123456789ab", "") == {"version": "0123456789ab", "part_numbers": {},
                                                         "stored": False}
    with pytest.raises(HttpError, match="ask for /results/part-numbers/<rule-set version>"):
        api.get("part-numbers", "")

    def over_http(path: str, query: object = None) -> dict:  # the kiosk's answer, as its server turns it to JSON
        try:
            return json.loads(json.dumps(api.get(path, "")))
        except HttpError as exc:
            raise EndpointError(f"http://aoi-1/results/{path}", exc.code, str(exc)) from None

    asked: list[str] = []
    remote = KioskResults("http://aoi-1:9108", "token")
    remote._get = lambda path, query=None: asked.append(path) or over_http(path, query)  # type: ignore[method-assign]
    assert remote.part_numbers(version_of(bought)) == store.part_numbers(version_of(bought))
    assert remote.part_numbers(version_of(bought)) == {"R1": "RC0402FR-071KL"} and len(asked) == 1  # kept: a hash
    # a version whose text is stored is asked once even where it names none (a search asks it row by row)
    assert remote.part_numbers(version_of(plain)) == {} == remote.part_numbers(version_of(plain)) and len(asked) == 2
    # a version the kiosk keeps no text of yet (a spooled board's) is asked again, and kept once stored
    pending = bought + "  C1: GRM155R71C104KA88D\n"
    assert remote.part_numbers(version_of(pending)) == {} == remote.part_numbers(version_of(pending))
    assert len(asked) == 4
    fourth = board("S4", 3)
    fourth.ruleset_version = version_of(pending)
    store.write([fourth], {version_of(pending): ("board_a", pending)}.get)
    assert remote.part_numbers(version_of(pending))["C1"] == "GRM155R71C104KA88D" and len(asked) == 5
    assert remote.part_numbers(version_of(pending))["C1"] == "GRM155R71C104KA88D" and len(asked) == 5

    def before_part_numbers(path: str, query: object = None) -> dict:
        if path.startswith("part-numbers"):
            raise EndpointError(f"http://aoi-1/results/{path}", 404, "no results route /results/part-numbers")
        return over_http(path, query)

    older = KioskResults("http://aoi-1:9108", "token")
    older._get = before_part_numbers  # type: ignore[method-assign]
    assert older.part_numbers(version_of(bought)) == {} == older.part_numbers(version_of(plain))
    refused = KioskResults("http://aoi-1:9108", "token")
    refused._get = lambda path, query=None: (_ for _ in ()).throw(  # type: ignore[method-assign]
        EndpointError(f"http://aoi-1/results/{path}", 401, "the token is wrong"))
    with pytest.raises(EndpointError, match="the token is wrong"):  # only a missing route means an older kiosk
        refused.part_numbers(version_of(bought))
