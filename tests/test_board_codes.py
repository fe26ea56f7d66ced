"""A panel's boards' own serials: each board's DataMatrix read where the rule set puts it (ingest/board_codes.py), and
every unit stored, searched, handed on and rejected under its own."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.app.hermes_link import sub_boards
from inspector.app.line import LineConfig
from inspector.app.run import open_source, run_line
from inspector.app.service import ServiceConfig
from inspector.hermes.messages import SubBoard, SubBoardState
from inspector.ingest.board_codes import noread_unit, read_board_codes, unit_serials
from inspector.ingest.identity import CodeRead
from inspector.ingest.sources import SyntheticSource
from inspector.ingest.synthetic import render_board, unit_code_text
from inspector.plc.station import FailSafe, Station
from inspector.results.cfx import units_inspected
from inspector.results.records import BoardRecord, PartRecord
from inspector.results.store import Filters, ResultStore, sqlite_url
from inspector.routing.rules import parse_rules
from inspector.yamlio import ConfigError

from .test_routing_rules import PANEL

CODES = "panel:\n  boards: 2\n  codes:\n    at: {1: [60, 94], 2: [130, 94]}\n    size: 44\n    module_px: 2\n"
CODED = PANEL.replace("panel: {boards: 2}\n", CODES)


def test_each_boards_code_is_read_from_the_rule_set_and_a_wrong_one_named_at_its_line() -> None:
    """`codes:` places each board's code; a board the panel does not have, a region off the board, over a crop, a
    fiducial or another code, an unknown symbology or NOREAD policy: each refused at its line."""
    rules = parse_rules(CODED, "coded.yaml")
    codes = rules.panel.codes
    assert {k: (c.at, c.size, c.module_px, c.symbology, c.on_noread) for k, c in codes.items()} == {
        1: ((60, 94), 44, 2, "datamatrix", "flag"), 2: ((130, 94), 44, 2, "datamatrix", "flag")}
    assert rules.training_version == parse_rules(PANEL, "panel.yaml").training_version  # no expert retrains
    at = "at: {1: [60, 94], 2: [130, 94]}"
    for wrong, says in (((at, "at: {1: [60, 94], 3: [130, 94]}"), "at.3: is no board of the panel"),
                        ((at, "at: {1: [60, 94], 2: [190, 94]}"), "at.2: the code's region .* does not fit"),
                        ((at, "at: {1: [60, 94], 2: [120, 60]}"), "at.2: the code's region .* overlaps the crop of "
                                                                  "1-D1"),
                        ((at, "at: {1: [40, 94], 2: [130, 94]}"), "at.1: .* touches fiducial F1"),
                        ((at, "at: {1: [60, 94], 2: [90, 94]}"), "at.2: .* overlaps board 1's code's region"),
                        ((at, "at: {1: [60, 94], 2: 7}"), "at.2: must be .x, y."),
                        (("size: 44", "size: 44\n    symbology: aztec"), "symbology: must be one of"),
                        (("size: 44", "size: 44\n    on_noread: guess"), "on_noread: must be flag"),
                        (("size: 44", "size: 44\n    place: 1"), "place: unknown key")):
        with pytest.raises(ConfigError, match=rf"coded.yaml:\d+: panel.codes.*{says}"):
            parse_rules(CODED.replace(*wrong), "coded.yaml")
    serial = "serial_code:\n  at: [130, 94]\n  size: 44\n  module_px: 2\n"
    with pytest.raises(ConfigError, match=r"coded.yaml:\d+: panel.codes.at.2: .* overlaps the board's serial code"):
        parse_rules(CODED + serial, "coded.yaml")


def test_the_renderer_prints_each_boards_code_and_each_reads_back_through_the_registration() -> None:
    rules = parse_rules(CODED, "coded.yaml")
    board = render_board(rules, "P-77", np.random.default_rng(2))
    reads = read_board_codes(board.image, rules.panel.codes, None)
    assert {k: r.text for k, r in reads.items()} == {1: "P-77-1", 2: "P-77-2"} == {
        k: unit_code_text("P-77", k) for k in (1, 2)}
    shift = np.float32([[1, 0, 6], [0, 1, -3]])
    moved = cv2.warpAffine(board.image, shift, (200, 120), borderMode=cv2.BORDER_REPLICATE)
    assert {k: r.text for k, r in read_board_codes(moved, rules.panel.codes, shift).items()} == {
        1: "P-77-1", 2: "P-77-2"}
    assert read_board_codes(board.image, rules.panel.codes, None, skip=[2]).keys() == {1}  # an x-out is not read


def test_a_board_not_read_read_twice_or_contradicting_upstream_goes_by_its_noread_never_a_guess() -> None:
    """The one rule of unit serials: read codes are the boards' serials; a board the rule set gives no code keeps
    what the machine before said; NOREAD-<id>-<k> for an unread code, two boards reading one text (both), and a code
    that contradicts upstream; an x-out has none."""
    ok, bad = (lambda t: CodeRead(t)), CodeRead(None, "no datamatrix code decoded")
    got = unit_serials({1: ok("A"), 2: bad, 3: ok("C"), 4: ok("C"), 5: ok("E")}, "0123456789ab",
                       upstream={5: "X", 6: "F", 7: "G"}, skip=[7])
    assert got.serials == {1: "A", 2: "NOREAD-01234567-2", 3: "NOREAD-01234567-3", 4: "NOREAD-01234567-4",
                           5: "NOREAD-01234567-5", 6: "F"}
    assert got.unread[2] == "no datamatrix code decoded" and "boards 3, 4 read the same code 'C'" in got.unread[3]
    assert "upstream says 'X', the board's code reads 'E'" in got.unread[5] and got.mismatched == [5]
    assert noread_unit("0123456789ab", 2) == "NOREAD-01234567-2"
    both = unit_serials({1: ok("A")}, "0123456789ab", upstream={2: "A"})  # upstream's and a read one alike: both NOREAD
    assert sorted(both.unread) == [1, 2]


def _run(rules, demo, folder: Path, tmp_path: Path):  # noqa: ANN001, ANN202
    root, zoo = demo
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    service, _ = run_line(rules, zoo, root / "models", open_source(f"folder:{folder}", rules, 0, 0),
                          ServiceConfig(LineConfig(device_mb=40)), store, tmp_path, lambda _m: None)
    return service, store


def _photos(rules, folder: Path, n: int, smudged: dict[int, int]) -> list[str]:  # noqa: ANN001
    """`n` rendered panels written as files; panel i's board `smudged[i]` has its code painted over."""
    folder.mkdir()
    serials = []
    for i, frame in enumerate(SyntheticSource(rules, n, seed=6)):
        image = frame.image.copy()
        if i in smudged:
            x, y = rules.panel.codes[smudged[i]].at
            cv2.rectangle(image, (x - 14, y - 14), (x + 14, y + 14), (40, 90, 40), -1)  # solder mask over it
        cv2.imwrite(str(folder / f"{frame.serial}.png"), image)
        serials.append(frame.serial)
    return serials


def test_a_panel_line_stores_each_board_under_its_own_code_and_finds_the_panel_by_one(demo, tmp_path: Path) -> None:  # noqa: ANN001
    """Panels photographed whole: each board's code is read and kept with the panel, a board whose code is painted
    over goes by NOREAD-<id>-<k> and is counted, a search by a board's serial finds its panel, and the factory
    message names each unit by its own serial."""
    rules = parse_rules(CODED, str(tmp_path / "coded.yaml"))
    serials = _photos(rules, tmp_path / "panels", 4, {1: 2})
    service, store = _run(rules, demo, tmp_path / "panels", tmp_path)
    stored = {i.source.rpartition("/")[2][:-4]: i for i in store.inspections()}
    assert len(stored) == 4
    for i, serial in enumerate(serials):
        own = stored[serial].panel.serials
        if i == 1:
            assert own[1] == f"{serial}-1" and own[2] == f"NOREAD-{stored[serial].uuid[:8]}-2"
        else:
            assert own == {1: f"{serial}-1", 2: f"{serial}-2"}
    assert (service.line.stats.unit_serials_read, service.line.stats.unit_noreads) == (7, 1)
    assert [i.source for i in store.inspections(Filters(board=f"{serials[2]}-2"))] == [stored[serials[2]].source]
    record = BoardRecord(serials[0], rules.recipe, rules.version, stored[serials[0]].started_at,
                         stored[serials[0]].finished_at, parts=[PartRecord(p.ref, p.component_type, p.expert, None,
                                                                           p.verdict, p.defect_class, p.score)
                                                                for p in stored[serials[0]].parts],
                         panel_boards=2, panel_serials=stored[serials[0]].panel.serials)
    units = units_inspected(record)["MessageBody"]["InspectedUnits"]
    assert {u["UnitPositionNumber"]: u["UnitIdentifier"] for u in units} == {
        1: f"{serials[0]}-1", 2: f"{serials[0]}-2"}
    from prometheus_client import generate_latest

    from inspector.app.snapshot import snapshot
    from inspector.kiosk.metrics import line_registry

    text = generate_latest(line_registry(lambda: snapshot(service), "line-1", "aoi-1")).decode()
    assert 'inspector_unit_codes_total{line="line-1",result="read",station="aoi-1"} 7.0' in text
    assert 'inspector_unit_codes_total{line="line-1",result="noread",station="aoi-1"} 1.0' in text


def test_a_rule_set_that_refuses_a_boards_noread_fails_the_panel_as_one_board_level_error(demo, tmp_path: Path) -> None:  # noqa: ANN001
    rules = parse_rules(CODED.replace("module_px: 2\n", "module_px: 2\n    on_noread: refuse\n"),
                        str(tmp_path / "refusing.yaml"))
    _photos(rules, tmp_path / "panels", 2, {0: 1})
    service, store = _run(rules, demo, tmp_path / "panels", tmp_path)
    errors = [i.error for i in store.inspections() if i.error]
    assert len(errors) == 1 and errors[0].startswith("NOREAD on board 1 of the panel: no datamatrix code decoded")
    assert service.line.stats.noread_refused == 1


def test_a_boards_noread_rejects_that_board_where_the_line_rejects_noreads_and_the_panels_rejects_it_whole() -> None:
    """RejectBoards: a board whose own code did not read is marked with the failed ones where the fail-safe rejects
    a NOREAD (and not otherwise); the panel's own NOREAD rejects the panel whole (0)."""
    strict, lax = Station(FailSafe(reject_on_noread=True)), Station(FailSafe())
    assert strict.verdict("a", "a", "P", "pass", unread=[3]).reject_boards == 0b100
    assert strict.verdict("b", "b", "P", "fail", boards=[1], unread=[3]).reject_boards == 0b101
    assert strict.verdict("c", "c", "P", "fail", noread=True, boards=[1], unread=[3]).reject_boards == 0
    passed = lax.verdict("a", "a", "P", "pass", unread=[3])
    assert not passed.reject and passed.reject_boards == 0
    assert lax.verdict("b", "b", "P", "fail", boards=[1], unread=[3]).reject_boards == 0b1


def test_hermes_hands_each_board_on_with_the_code_read_here_and_keeps_upstreams_where_none_read() -> None:
    """SubBoard Bc: the board's own code read here; upstream's where this box read none (or a NOREAD)."""
    record = BoardRecord("P1", "mini", "v", *(2 * [None]), panel_boards=3,  # type: ignore[arg-type]
                         parts=[PartRecord("2-R1", "R1K", "cls", None, "fail", "missing", 0.9)],
                         panel_serials={1: "U-1", 2: "NOREAD-abcdef01-2"})
    upstream = (SubBoard(1, SubBoardState.GOOD, "U-1"), SubBoard(2, SubBoardState.GOOD, "UP-2"),
                SubBoard(3, SubBoardState.GOOD, "UP-3"))
    assert sub_boards(record, upstream) == (SubBoard(1, SubBoardState.GOOD, "U-1"),
                                            SubBoard(2, SubBoardState.FAILED, "UP-2"),
                                            SubBoard(3, SubBoardState.GOOD, "UP-3"))
    assert [sb.Bc for sb in sub_boards(record)] == ["U-1", None, None]


def test_the_identity_check_reads_each_boards_code_of_a_panel(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """`inspector accuracy --identity-boards N --identity-only` reads every code a panel carries (each board's own
    beside the panel's), each against the text printed there; a rule set with no code to read is refused."""
    from inspector.app.accuracy import CONDITIONS
    from inspector.app.identity_check import check_identity
    from inspector.cli import main

    rules_file = tmp_path / "coded.yaml"
    rules_file.write_text(CODED)
    assert main(["accuracy", "--rules", str(rules_file), "--identity-boards", "5", "--identity-only",
                 "--conditions", "clean,gain-0.6"]) == 0
    table = capsys.readouterr().out
    assert "condition       boards   codes    read     rate  NOREAD  misread" in table
    for name in ("clean", "gain-0.6"):
        assert f"{name:<14}       5      10      10   1.0000       0        0" in table
    with pytest.raises(ValueError, match="no serial code .* and no code of a panel's boards"):
        check_identity(parse_rules(PANEL, "panel.yaml"), CONDITIONS["clean"], "clean", 1)
    # a camera the line corrects is read corrected, as the line reads it (its raw twin is not), a small panel too
    # (its synthetic target sized to it)
    from inspector.routing.rules import load_rules

    board_a = load_rules(Path(__file__).resolve().parents[1] / "routing_rules" / "board_a.yaml")
    assert check_identity(board_a, CONDITIONS["real-lens"], "real-lens", 2).corrected
    assert not check_identity(board_a, CONDITIONS["real-lens"], "real-lens-raw", 2, correct=False).corrected
    small = check_identity(parse_rules(CODED, "coded.yaml"), CONDITIONS["real-lens"], "real-lens", 2)
    assert small.corrected and small.codes == 4 and small.misread == 0  # its 9x6 target was refused here
