"""A plant's shared results database on a real PostgreSQL server: lines kept apart, roles with least rights, the
schema changed only by `inspector db upgrade`, and boxes of two releases running on it at once."""
from __future__ import annotations

import csv
import io
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from inspector.cli import main
from inspector.results.errors import SchemaNotReady
from inspector.results.export import export_csv
from inspector.results.records import BoardRecord, PartRecord
from inspector.results.review_boxes import ReviewBox
from inspector.results.reviews import ReviewRequest, record_review, review_rates
from inspector.results.revisions import current_revision, head_revision, read_state, upgrade
from inspector.results.scope import PLANT, Scope
from inspector.results.store import Filters, ResultStore, StoreUnavailable, open_engine

from .test_results import T0

ROLES = Path(__file__).resolve().parents[1] / "installer" / "postgres-roles.sql"


def line_board(line: str, station: str, serial: str, minutes: int, fail: bool = False) -> BoardRecord:
    at = T0 + timedelta(minutes=minutes)
    parts = [PartRecord("R1", "R0402", "cls-R0402", "ab" * 32, "pass", "ok", 0.99),
             PartRecord("C1", "C0603", "cls-C0603", "cd" * 32, "fail" if fail else "pass",
                        "missing" if fail else "ok", 0.9)]
    return BoardRecord(serial, "board_a", "v1", at, at + timedelta(seconds=1), line=line, station=station,
                       parts=parts)


def test_every_read_is_about_one_line_unless_the_plant_is_asked_for(store: ResultStore, tmp_path: Path,
                                                                     capsys) -> None:  # noqa: ANN001
    """Two lines (and a second station of one) write to one database; each box's reads, rates and exports see its
    own boards, newest first; --all-lines sees them all."""
    boards = [line_board("line-1", "aoi-1", "L1-A", 0), line_board("line-2", "aoi-1", "L2-A", 1, fail=True),
              line_board("line-1", "aoi-2", "L1S2-A", 2, fail=True), line_board("line-1", "aoi-1", "L1-B", 3),
              line_board("line-2", "aoi-1", "L2-B", 4)]
    store.write(boards)
    l1, l2 = Scope("line-1", "aoi-1"), Scope("line-2", "aoi-1")
    assert store.latest(l1).board_serial == "L1-B" and store.latest(l2).board_serial == "L2-B"
    assert store.latest().board_serial == "L2-B"  # the plant's newest
    assert store.latest(Scope("line-1")).board_serial == "L1-B"  # every station of line 1
    assert [i.board_serial for i, _ in store.recent_parts(l2)] == ["L2-A"]
    assert store.recent_parts(l1) == []
    assert [i.board_serial for i, _ in store.recent_parts(Scope("line-1"))] == ["L1S2-A"]
    assert [(i.board_serial, p.ref) for i, p in store.component_rows(Filters(scope=l1), newest=3)] == \
        [("L1-B", "C1"), ("L1-B", "R1"), ("L1-A", "C1")]
    assert store.count(l1) == (2, 4) and store.count(PLANT) == (5, 10)
    assert store.last_id(l1) < store.last_id()
    record_review(store, ReviewRequest(boards[1].inspection_id, "C1", "false_call"))
    assert review_rates(store, l2)["C0603"].false_calls == 1 and review_rates(store, l2)["C0603"].parts == 2
    assert review_rates(store, l1)["C0603"].false_calls == 0 and review_rates(store, l1)["C0603"].parts == 2
    assert review_rates(store, PLANT)["C0603"].parts == 5
    # over a window of the line's last boards: L2-B only, whose part nobody reviewed
    last = review_rates(store, l2, boards=1)["C0603"]
    assert (last.parts, last.flagged, last.false_calls) == (1, 0, 0)
    out = tmp_path / "l2.csv"
    assert main(["export", "--csv", str(out), "--db", store.url, "--line", "line-2"]) == 0
    assert {r["board_serial"] for r in csv.DictReader(io.StringIO(out.read_text()))} == {"L2-A", "L2-B"}
    assert "of line line-2, station aoi-1 exported" in capsys.readouterr().err
    assert main(["export", "--csv", str(out), "--db", store.url, "--all-lines"]) == 0
    assert len({r["board_serial"] for r in csv.DictReader(io.StringIO(out.read_text()))}) == 5


@pytest.fixture
def plant_db(postgres):  # noqa: ANN001, ANN201 - the session's server
    """An empty database with the installer's three roles."""
    name = "plant" + uuid.uuid4().hex[:8]
    postgres.create_db(name, upgraded=False)
    postgres.psql(name, "-c", "DROP ROLE IF EXISTS inspector_owner, inspector_writer, inspector_reader")
    postgres.psql(name, "-f", str(ROLES))
    yield name
    postgres.psql("postgres", "-c", f"DROP DATABASE {name} WITH (FORCE)")
    postgres.psql("postgres", "-c", "DROP ROLE inspector_owner, inspector_writer, inspector_reader")


def test_the_schema_changes_only_by_db_upgrade_and_each_role_does_only_its_part(postgres, plant_db: str,
                                                                              capsys) -> None:  # noqa: ANN001
    owner, writer, reader = (postgres.url_as(f"inspector_{r}", plant_db) for r in ("owner", "writer", "reader"))
    # a box on an empty shared database: told what to run, and nothing made
    kiosk = ResultStore(writer, connect=False)
    with pytest.raises(SchemaNotReady, match="has no schema yet.*run `inspector db upgrade`"):
        kiosk.ready()
    assert current_revision(kiosk.engine) is None
    assert main(["db", "status", "--db", writer]) == 1
    assert "cannot run on it yet: run `inspector db upgrade`" in capsys.readouterr().out
    # a box's role cannot do the deploy step
    with pytest.raises(Exception, match="permission denied"):
        upgrade(open_engine(writer))
    # the previous revision first, as a plant that ran the previous release has it
    engine = open_engine(owner)
    upgrade(engine, "0005")
    assert main(["db", "status", "--db", reader]) == 1  # this release needs 0007
    assert "schema revision 0005" in capsys.readouterr().out
    # the previous release's code runs on it (its boxes keep storing); this release's needs 0007 (users, the audit
    # trail) and says so instead of running without them
    with open_engine(writer).begin() as c:  # what a box of the previous release writes
        c.execute(text("INSERT INTO inspections (uuid, started_at, finished_at, line, station, board_serial, recipe, "
                       "ruleset_version, verdict, source) VALUES ('u-0005', :t, :t, 'line-1', 'aoi-1', "
                       "'ON-0005', 'r', 'v', 'pass', 's')"), {"t": T0})
    with pytest.raises(SchemaNotReady, match="run `inspector db upgrade`"):
        ResultStore(writer).ready()
    assert main(["db", "upgrade", "--db", owner]) == 0
    assert f"schema 0005 -> {head_revision()}" in capsys.readouterr().out
    kiosk = ResultStore(writer)
    kiosk.write([line_board("line-1", "aoi-1", "ON-HEAD", 1)])
    dashboard = ResultStore(reader)
    assert [i.board_serial for i in dashboard.inspections()] == ["ON-0005", "ON-HEAD"]
    state = read_state(engine)
    assert (state.revision, state.runnable, state.behind) == (head_revision(), True, False)
    # the reader cannot write, the writer cannot change the schema
    with pytest.raises(StoreUnavailable, match="permission denied"):
        dashboard.write([line_board("line-1", "aoi-1", "NOT-STORED", 2)])
    with pytest.raises(Exception, match="permission denied|must be owner"):
        with kiosk.engine.begin() as c:
            c.execute(text("ALTER TABLE inspections ADD COLUMN x integer"))
    # the audit trail is append-only for the boxes' role: it appends, it cannot edit or delete
    from inspector.access.audit import AuditTrail, Change
    from inspector.access.identity import Identity

    AuditTrail(kiosk.engine, "line-1", "aoi-1").record(Identity("erin", "engineer", "t"), Change("review", "x"))
    for statement in ("UPDATE audit_events SET actor = 'mallory'", "DELETE FROM audit_events"):
        with pytest.raises(Exception, match="permission denied"):
            with kiosk.engine.begin() as c:
                c.execute(text(statement))
    assert AuditTrail(dashboard.engine).verify().intact
    # a box's retention deletes with the writer's rights
    assert kiosk.prune(T0 + timedelta(days=1), Scope("line-1", "aoi-1")) == 2
    for s in (kiosk, dashboard):
        s.close()
    engine.dispose()


def test_a_release_is_served_only_as_published(store: ResultStore) -> None:
    """The plant's release of an expert version: found by its hash, published once, and refused when its bytes
    no longer hash to it (a damaged row is never installed)."""
    from inspector.results.releases import ReleaseError, fetch, find, publish, releases

    data = b"weights " * 1000
    first = publish(store, "cls-R0402", data, "qa", "retrained on line 2's reviews")
    assert publish(store, "cls-R0402", data, "someone else") == first  # the same bytes: the same release
    sha = first.weights_sha256
    assert find(store, "cls-R0402", sha[:8]).published_by == "qa" and fetch(store, "cls-R0402", sha)[1] == data
    assert [r.weights_sha256 for r in releases(store, "cls-R0402")] == [sha]
    with pytest.raises(ReleaseError, match="no release 00000000 of cls-R0402; publish it first"):
        find(store, "cls-R0402", "00000000")
    with store.engine.begin() as c:
        c.execute(text("UPDATE expert_releases SET weights = :w"), {"w": data[:-1] + b"!"})
    with pytest.raises(ReleaseError, match=f"release {sha[:12]} of cls-R0402 is damaged"):
        fetch(store, "cls-R0402", sha)


def test_a_worse_rate_is_one_chance_would_seldom_give() -> None:
    from inspector.app.rollout import Judged, one_sided_p, worse

    assert one_sided_p(1, 100, 1, 100) == pytest.approx(0.5)
    assert one_sided_p(1, 100, 10, 100) < 0.01 < one_sided_p(1, 100, 4, 100)
    assert one_sided_p(0, 0, 5, 10) == 1.0  # nothing to compare with: no evidence
    before, after = Judged(50, 100, 2, 1, 0), Judged(50, 100, 2, 1, 6)
    assert worse(before, before, 0.01) is None
    assert worse(before, after, 0.01).startswith("escape rate rose from 0.00% (0/100) to 6.00% (6/100)")


def test_db_bench_fills_only_an_empty_database_and_times_one_lines_reads(postgres, capsys) -> None:  # noqa: ANN001
    url = postgres.create_db("bench" + uuid.uuid4().hex[:8])
    assert main(["db", "bench", "--db", url, "--parts", "20000", "--lines", "4", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "filled" in out and "208 boards, 19968 parts of 4 lines" in out and "reads of line line-" in out
    for read in ("latest board of a line stopped", "latest board of the line", "history page", "history count",
                 "history search by a board's serial", "history search by a panel board's own serial",
                 "recent defects", "review rates", "plant status"):
        assert f"| {read}" in out, out
    assert main(["db", "bench", "--db", url, "--parts", "20000"]) == 1  # never into a database that holds boards
    assert "holds 258 boards: db bench fills only an empty database" in capsys.readouterr().err
    assert main(["db", "bench", "--db", url, "--reuse", "--repeats", "1"]) == 0


def test_a_dashboard_reads_a_newer_kiosks_rows_leaving_out_what_it_does_not_know() -> None:
    """Boxes are upgraded one at a time: a kiosk of the next release may send a column this dashboard lacks."""
    from inspector.app.kiosk_results import PartView, _board

    doc = {"id": 1, "uuid": "u", "started_at": "2026-11-26T10:00:00+00:00", "finished_at": "2026-11-26T10:00:01+00:00",
           "line": "line-1", "station": "aoi-1", "board_serial": "B1", "serial_source": "code", "recipe": "r",
           "ruleset_version": "v", "verdict": "pass", "source": "", "error": None, "reg_transform": None,
           "reg_residual_px": None, "reg_fiducials": None, "operator_note": "a newer column",
           "parts": [{"id": 2, "ref": "R1", "component_type": "R0402", "expert": "cls-R0402", "weights_sha256": None,
                      "verdict": "pass", "defect_class": "ok", "score": 0.9, "lighting": "a newer column"}]}
    board = _board(doc)
    assert board.board_serial == "B1" and board.parts == [PartView(2, "R1", "R0402", "cls-R0402", None, "pass", "ok",
                                                                   0.9)]


def test_this_release_stores_boards_on_a_plant_database_a_revision_behind_and_their_board_ids_once_upgraded(
        postgres, tmp_path: Path) -> None:  # noqa: ANN001
    """0008 only adds the Hermes BoardId: boxes of this release keep storing on a database still at 0007 (without
    it), and store it once `inspector db upgrade` has run; reads and exports never ask for the column, and a search by
    BoardId there is refused, saying what to do."""
    url = postgres.create_db(f"behind_{uuid.uuid4().hex[:8]}", upgraded=False)
    upgrade(open_engine(url), "0007")
    first = line_board("line-1", "aoi-1", "HB-1", 0)
    first.board_id = "7e0d4f8a-3c2b-4a1e-9f6d-5b4c3a2e1d0f"
    box = ResultStore(url)
    assert box.write([first]) == 1 and [i.board_serial for i in box.inspections()] == ["HB-1"]
    out = io.StringIO()
    assert export_csv(box, out) == 2  # the export reads no BoardId there: its column is empty, not an error
    assert {r["board_id"] for r in csv.DictReader(io.StringIO(out.getvalue()))} == {""}
    with pytest.raises(ValueError, match="holds no Hermes BoardIds.*inspector db upgrade"):
        box.inspections(Filters(board_id=first.board_id))
    made = tmp_path / "by-id.csv"
    assert main(["export", "--db", url, "--csv", str(made), "--board-id", first.board_id]) != 0
    assert not made.exists()  # refused before the file was made
    assert main(["db", "upgrade", "--db", url]) == 0
    second = line_board("line-1", "aoi-1", "HB-2", 1)
    second.board_id = "0b9c8d7e-6f5a-4b3c-8d2e-1f0a9b8c7d6e"
    fresh = ResultStore(url)
    assert fresh.write([second]) == 1
    with fresh.engine.connect() as c:
        ids = dict(c.execute(text("SELECT board_serial, board_id FROM inspections")).all())
    assert ids == {"HB-1": None, "HB-2": second.board_id}
    assert sorted(i.board_serial for i in fresh.inspections()) == ["HB-1", "HB-2"]
    assert [i.board_serial for i in fresh.inspections(Filters(board_id=second.board_id))] == ["HB-2"]


def test_this_release_stores_panels_on_a_plant_database_at_0008_and_their_boards_once_upgraded(postgres) -> None:  # noqa: ANN001
    """0009 only adds a panel's boards: a box of this release stores a panel on a database still at 0008 as one
    board (its verdict, its parts; which of its boards failed is not kept there), reads and exports never ask for the
    columns, and once `inspector db upgrade` has run the next panel keeps its boards."""
    from .test_results import panel

    url = postgres.create_db(f"panel_{uuid.uuid4().hex[:8]}", upgraded=False)
    upgrade(open_engine(url), "0008")
    box = ResultStore(url)
    assert box.write([panel("P1", {"2-C1": "fail"})]) == 1
    assert [(i.board_serial, i.verdict, i.panel) for i in box.inspections()] == [("P1", "fail", None)]
    out = io.StringIO()
    assert export_csv(box, out) == 7
    assert {(r["panel_boards"], r["panel_position"]) for r in csv.DictReader(io.StringIO(out.getvalue()))} == {("", "")}
    assert main(["db", "upgrade", "--db", url]) == 0
    fresh = ResultStore(url)
    assert fresh.write([panel("P2", {"1-R1": "fail"}, minutes=1)]) == 1
    assert {i.board_serial: i.panel and i.panel.failed for i in fresh.inspections()} == {"P1": None, "P2": [1]}


def test_this_release_keeps_a_panels_boards_at_0009_and_their_own_serials_once_upgraded(postgres) -> None:  # noqa: ANN001
    """0010 only adds the boards' own serials: on a database still at 0009 a panel keeps its boards and verdicts,
    its boards' serials are not kept, a search by one finds nothing (never a query the schema refuses), and after
    `inspector db upgrade` the next panel is found by its boards' serials."""
    from .test_results import panel

    url = postgres.create_db(f"units_{uuid.uuid4().hex[:8]}", upgraded=False)
    upgrade(open_engine(url), "0009")
    box = ResultStore(url)
    first = panel("P1", {"2-C1": "fail"})
    first.panel_serials = {1: "U-1", 2: "U-2", 3: "U-3"}
    assert box.write([first]) == 1
    stored = box.inspections()[0].panel
    assert (stored.failed, stored.serials) == ([2], {})
    assert box.inspections(Filters(board="U-2")) == []
    out = io.StringIO()
    export_csv(box, out)
    assert {r["unit_serial"] for r in csv.DictReader(io.StringIO(out.getvalue()))} == {"P1"}
    assert main(["db", "upgrade", "--db", url]) == 0
    fresh = ResultStore(url)
    second = panel("P2", {}, minutes=1)
    second.panel_serials = {1: "U-4", 2: "U-5", 3: "U-6"}
    assert fresh.write([second]) == 1
    assert [i.board_serial for i in fresh.inspections(Filters(board="U-5"))] == ["P2"]
    assert {i.board_serial: i.panel.serials for i in fresh.inspections()} == {"P1": {}, "P2": second.panel_serials}


def test_this_release_stores_parts_on_a_plant_database_at_0010_and_their_approved_makes_once_upgraded(
        postgres) -> None:  # noqa: ANN001
    """0011 only adds the approved make a part was compared with: on a database still at 0010 the board is stored
    whole without it (every read, the export and the newest-defects list run, never a query the schema refuses),
    and after `inspector db upgrade` the next board keeps it."""
    from .test_results import board

    url = postgres.create_db(f"makes_{uuid.uuid4().hex[:8]}", upgraded=False)
    upgrade(open_engine(url), "0010")
    box = ResultStore(url)
    first = board("M1", defect="missing")
    first.parts[0].alternate = "R1__second.png"
    assert box.write([first]) == 1
    assert [p.approved_make for p in box.inspections()[0].parts] == [None, None]
    assert [p.approved_make for p in box.latest().parts] == [None, None]
    assert [(p.ref, p.approved_make) for _i, p in box.recent_parts()] == [("D1", None)]
    out = io.StringIO()
    assert export_csv(box, out) == 2
    assert {r["alternate"] for r in csv.DictReader(io.StringIO(out.getvalue()))} == {""}
    assert main(["db", "upgrade", "--db", url]) == 0
    fresh = ResultStore(url)
    second = board("M2", minutes=1)
    second.parts[0].alternate = "R1__second.png"
    assert fresh.write([second]) == 1
    assert {i.board_serial: [p.approved_make for p in i.parts] for i in fresh.inspections()} == {
        "M1": [None, None], "M2": ["R1__second.png", None]}


def test_a_plant_database_before_0012_refuses_a_reviewers_box_saying_how_and_keeps_reviews_without_one(
        postgres, tmp_path: Path) -> None:  # noqa: ANN001
    """0012 only adds the box a reviewer drew: on a database still at 0011 a review without a box is stored as
    before, one with a box is refused naming `inspector db upgrade` (never dropped silently, nothing stored), the
    dataset export reads the reviews, and after the upgrade the box goes in."""
    from inspector.results.dataset import export_dataset
    from inspector.results.reviews import ReviewRefused
    from inspector.routing.rules import load_rules

    from .test_results import board

    url = postgres.create_db(f"boxes_{uuid.uuid4().hex[:8]}", upgraded=False)
    upgrade(open_engine(url), "0011")
    box = ResultStore(url)
    assert box.write([board("B1", defect="polarity")]) == 1
    (insp,) = box.inspections()
    with pytest.raises(ReviewRefused, match="schema before 0012.*inspector db upgrade"):
        record_review(box, ReviewRequest(insp.uuid, "D1", "confirmed", None, "qa", boxes=(ReviewBox((1, 1, 9, 7)),)))
    assert box.reviews_of([insp.uuid]) == {}
    record_review(box, ReviewRequest(insp.uuid, "D1", "confirmed", None, "qa"))
    assert box.reviews_of([insp.uuid])[(insp.uuid, "D1")].drawn_boxes == ()
    rules = load_rules(Path(__file__).resolve().parents[1] / "routing_rules" / "board_a.yaml")
    report = export_dataset(box, tmp_path / "dataset", [rules])
    assert report.skipped and all("crop" in s["reason"] for s in report.skipped)  # read; no crop kept here
    assert main(["db", "upgrade", "--db", url]) == 0
    fresh = ResultStore(url)
    record_review(fresh, ReviewRequest(insp.uuid, "D1", "confirmed", None, "qa", boxes=(ReviewBox((1, 1, 9, 7)),)))
    assert fresh.reviews_of([insp.uuid])[(insp.uuid, "D1")].drawn_boxes == (ReviewBox((1, 1, 9, 7)),)


def test_a_plant_database_at_0012_keeps_one_box_a_review_and_asks_for_the_upgrade_before_several(
        postgres, tmp_path: Path) -> None:  # noqa: ANN001
    """0013 adds a review's several boxes and their classes: on a database still at 0012 one box of the review's
    class is stored as before, several (or a box of its own class) are refused naming `inspector db upgrade` with
    nothing stored and the review before kept whole; after the upgrade they go in, the first also where a release
    before 0013 reads it."""
    from sqlalchemy import text

    from inspector.results.reviews import ReviewRefused

    from .test_results import board

    url = postgres.create_db(f"boxes13_{uuid.uuid4().hex[:8]}", upgraded=False)
    upgrade(open_engine(url), "0012")
    box = ResultStore(url)
    assert box.write([board("B1", defect="polarity")]) == 1
    (insp,) = box.inspections()
    one = (ReviewBox((1, 1, 9, 7)),)
    record_review(box, ReviewRequest(insp.uuid, "D1", "confirmed", None, "qa", boxes=one))
    assert box.reviews_of([insp.uuid])[(insp.uuid, "D1")].drawn_boxes == one
    two = (*one, ReviewBox((12, 2, 20, 8), "missing"))
    for boxes in (two, (ReviewBox((1, 1, 9, 7), "missing"),)):
        with pytest.raises(ReviewRefused, match="schema before 0013.*inspector db upgrade"):
            record_review(box, ReviewRequest(insp.uuid, "D1", "confirmed", "missing", "qa", boxes=boxes))
        assert box.reviews_of([insp.uuid])[(insp.uuid, "D1")].drawn_boxes == one  # the review before, whole
    assert main(["db", "upgrade", "--db", url]) == 0
    fresh = ResultStore(url)
    record_review(fresh, ReviewRequest(insp.uuid, "D1", "confirmed", "missing", "qa", boxes=two))
    assert fresh.reviews_of([insp.uuid])[(insp.uuid, "D1")].drawn_boxes == two
    with fresh.engine.connect() as c:
        assert tuple(c.execute(text("SELECT box_x0, box_y0, box_x1, box_y1 FROM reviews")).one()) == (1, 1, 9, 7)
