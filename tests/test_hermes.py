"""IPC-HERMES-9852: the messages on the wire, the lane's state machine over real sockets, and a three-machine lane
on loopback (a real upstream machine, the box running its line, a real downstream machine)."""
from __future__ import annotations

import socket
from pathlib import Path

import pytest
from sqlalchemy import text

from inspector.app.hermes_link import UPSTREAM_FAILED, HermesConfig, HermesLink, sub_boards
from inspector.app.line import LineConfig
from inspector.app.run import open_source, run_line
from inspector.app.service import ServiceConfig
from inspector.hermes.lane import Giver, Taker
from inspector.hermes.messages import (
    BoardAvailable,
    BoardQuality,
    CheckAlive,
    CheckAliveType,
    Framer,
    HermesError,
    Notification,
    NotificationCode,
    ServiceDescription,
    StartTransport,
    SubBoard,
    SubBoardState,
    decode,
    encode,
)
from inspector.hermes.peer import BoardPlan, DownstreamPeer, UpstreamPeer
from inspector.hermes.states import ProtocolError, State, after
from inspector.ingest.sources import SyntheticSource
from inspector.results.store import ResultStore, sqlite_url
from inspector.routing.rules import parse_rules

from .test_board_gate import CODE
from .test_genicam import _wait
from .test_routing_rules import GOOD


def test_messages_round_trip_and_bad_ones_are_named() -> None:
    board = BoardAvailable("6f1c7a52-0b1e-4c55-9d2a-3b8e3f1f2a10", "printer-3", BoardQuality.FAILED,
                           ProductTypeId="ctrl-v2", TopBarcode="SN0001", Length=160.0, Width=100.5)
    raw = encode(board)
    assert raw.startswith(b'<Hermes Timestamp="') and b'FailedBoard="2"' in raw and b'Width="100.5"' in raw
    assert decode(raw) == board
    sd = decode(encode(ServiceDescription("aoi-1", 2, features=("FeatureCheckAliveResponse", "FeatureBoardForecast"))))
    assert isinstance(sd, ServiceDescription) and sd.LaneId == 2 and "FeatureBoardForecast" in sd.features
    # a newer peer's attribute is kept, not refused
    newer = decode(raw.replace(b"<BoardAvailable ", b'<BoardAvailable Route="7" '))
    assert newer.extra == {"Route": "7"} and newer.BoardId == board.BoardId
    # two messages cut anywhere on the stream come out whole, in order
    stream = encode(CheckAlive(CheckAliveType.PING, "1")) + raw
    framer = Framer()
    got = framer.feed(stream[:37]) + framer.feed(stream[37:150]) + framer.feed(stream[150:])
    assert [m.tag for m in got] == ["CheckAlive", "BoardAvailable"]
    for bad, says in ((b"<Hermes><BoardAvailable BoardId='x'/></Hermes>", "BoardAvailable without FailedBoard"),
                      (b"<Hermes><BoardAvailable BoardId='x' FailedBoard='7'/></Hermes>", "FailedBoard='7'"),
                      (b"<Hermes><Teleport/></Hermes>", "unknown Hermes message <Teleport>"),
                      (b"<Other/>", "not a Hermes message"), (b"<Hermes><Board", "not XML"),
                      (b'<!DOCTYPE x [<!ENTITY a "a">]><Hermes/>', "no DOCTYPE")):
        with pytest.raises(HermesError, match=says):
            decode(bad)
    with pytest.raises(HermesError, match="without </Hermes>"):
        Framer().feed(b"<Hermes>" + b" " * 70000)


def test_a_panels_sub_boards_round_trip_and_bad_ones_are_named() -> None:
    """SubBoards is BoardAvailable's child element: each board of a panel with its position, state and barcode."""
    panel = BoardAvailable("6f1c7a52-0b1e-4c55-9d2a-3b8e3f1f2a10", "aoi-1", BoardQuality.FAILED, sub_boards=(
        SubBoard(1, SubBoardState.GOOD), SubBoard(2, SubBoardState.FAILED, "PCB-2"), SubBoard(3, SubBoardState.SKIP)))
    raw = encode(panel)
    assert b'<SubBoards><SubBoard Pos="1" St="1" /><SubBoard Pos="2" Bc="PCB-2" St="2" />' in raw
    assert decode(raw) == panel and decode(encode(BoardAvailable("b", "aoi-1"))).sub_boards == ()
    head = b"<Hermes><BoardAvailable BoardId='x' FailedBoard='1'><SubBoards>"
    for bad, says in ((b"<SubBoard St='1'/>", "needs Pos"), (b"<SubBoard Pos='1' St='9'/>", "St 0..4"),
                      (b"<SubBoard Pos='0' St='1'/>", "positions count from 1")):
        with pytest.raises(HermesError, match=says):
            decode(head + bad + b"</SubBoards></BoardAvailable></Hermes>")


def test_a_panel_goes_on_with_each_boards_own_state_and_keeps_what_upstream_said() -> None:
    """Each board of a panel: failed where its own result failed or upstream had failed it, missing and skip (an
    x-out) as upstream said, good otherwise, its barcode kept; upstream's SubBoards on a board that is no panel here
    go on as they came, and a board-level error fails every board."""
    from .test_results import panel

    record = panel("P1", {"2-C1": "fail"}, boards=4)
    upstream = (SubBoard(1, SubBoardState.GOOD, "B1"), SubBoard(3, SubBoardState.FAILED),
                SubBoard(4, SubBoardState.SKIP), SubBoard(7, SubBoardState.MISSING))
    assert sub_boards(record, upstream) == (
        SubBoard(1, SubBoardState.GOOD, "B1"), SubBoard(2, SubBoardState.FAILED), SubBoard(3, SubBoardState.FAILED),
        SubBoard(4, SubBoardState.SKIP), SubBoard(7, SubBoardState.MISSING))
    assert sub_boards(record) == tuple(SubBoard(k, SubBoardState.FAILED if k == 2 else SubBoardState.GOOD)
                                       for k in range(1, 5))
    record.panel_skipped = [3]  # an x-out the box read on its bad-mark pad: skip, whatever upstream thought of it
    assert sub_boards(record, upstream)[2] == SubBoard(3, SubBoardState.SKIP)
    assert [sb.St for sb in sub_boards(record)] == [SubBoardState.GOOD, SubBoardState.FAILED, SubBoardState.SKIP,
                                                    SubBoardState.GOOD]
    record.panel_skipped = []
    record.parts, record.error = [], "registration failed"
    assert {sb.St for sb in sub_boards(record)} == {SubBoardState.FAILED}
    from .test_results import board

    assert sub_boards(board("B1"), upstream) == upstream and sub_boards(board("B1")) == ()


def test_the_state_machine_walks_a_handover_and_refuses_what_the_standard_does_not_allow() -> None:
    s = State.SOCKET_CONNECTED
    s = after(s, "ServiceDescription", "taker", "taker", sent=True)
    s = after(s, "ServiceDescription", "giver", "taker", sent=False)
    assert s is State.NOT_AVAILABLE_NOT_READY
    for tag, sender, want in (("MachineReady", "taker", State.MACHINE_READY),
                              ("BoardAvailable", "giver", State.AVAILABLE_AND_READY),
                              ("StartTransport", "taker", State.TRANSPORTING),
                              ("TransportFinished", "giver", State.TRANSPORT_FINISHED),
                              ("StopTransport", "taker", State.NOT_AVAILABLE_NOT_READY)):
        s = after(s, tag, sender, "taker", sent=sender == "taker")
        assert s is want, tag
    with pytest.raises(ProtocolError, match="StartTransport in state NotAvailableNotReady"):
        after(s, "StartTransport", "taker", "taker", sent=True)
    with pytest.raises(ProtocolError, match="comes from the giver"):
        after(s, "BoardAvailable", "taker", "giver", sent=False)


def test_a_peer_that_breaks_the_protocol_is_told_why_and_the_lane_closes(tmp_path: Path) -> None:
    giver = Giver("127.0.0.1", 0, "box").start()
    try:
        with socket.create_connection(giver.address, timeout=5) as raw:  # StartTransport before anything else
            raw.sendall(encode(StartTransport("6f1c7a52-0b1e-4c55-9d2a-3b8e3f1f2a10")))
            got = Framer().feed(raw.recv(65536))
            assert isinstance(got[0], Notification) and got[0].NotificationCode == NotificationCode.PROTOCOL_ERROR
            assert "StartTransport in state SocketConnected" in got[0].Description
            assert raw.recv(100) == b""  # closed
        taker = Taker(*giver.address, "next").start()
        assert taker.connected.wait(5)
        with socket.create_connection(giver.address, timeout=5) as second:  # one taker per lane
            got = Framer().feed(second.recv(65536))
            assert got[0].NotificationCode == NotificationCode.CONNECTION_REFUSED and second.recv(100) == b""
        assert giver.refused_connections == 1
        taker.stop()
    finally:
        giver.stop()


def test_a_board_offered_when_the_connection_drops_is_offered_again_and_checkalive_is_answered() -> None:
    giver = Giver("127.0.0.1", 0, "box").start()
    board = BoardAvailable("0d3f5a4e-8c1b-4f0e-9a2b-1c2d3e4f5a6b", "box", BoardQuality.GOOD, TopBarcode="B1")
    try:
        with socket.create_connection(giver.address, timeout=5) as raw:
            framer = Framer()
            raw.sendall(encode(ServiceDescription("half-a-machine", 1)))
            assert isinstance(framer.feed(raw.recv(65536))[0], ServiceDescription)
            raw.sendall(encode(CheckAlive(CheckAliveType.PING, "42")))
            pong = framer.feed(raw.recv(65536))[0]
            assert pong.Type == CheckAliveType.PONG and pong.Id == "42"
            giver.give(board)
            offered = framer.feed(raw.recv(65536))[0]
            assert offered == board  # offered, then the connection is lost before the handover
        taker = Taker(*giver.address, "next").start()
        assert _wait(lambda: len(taker.taken) == 1)
        assert taker.taken[0].board.BoardId == board.BoardId and giver.waiting == 0
        taker.stop()
    finally:
        giver.stop()


def _coded_rules():  # noqa: ANN202
    return parse_rules(GOOD + CODE, "coded.yaml")


def test_three_machines_on_a_lane_boards_identities_in_equal_out_and_failed_board_is_the_stored_verdict(
        demo, tmp_path: Path) -> None:
    """Upstream hands in 24 boards (every 6th already failed), the box inspects the others from its source, and
    downstream takes all 24 in order with the BoardId and barcode they came in with and FailedBoard = the verdict
    in the database. One board's barcode from upstream disagrees with its own code: flagged, not inspected."""
    root, zoo = demo
    rules = _coded_rules()
    n, seed = 24, 11
    imaged = [i for i in range(n) if (i + 1) % 6]
    serials = iter(f"{rules.recipe.upper()}-{seed}-{k:05d}" for k in range(len(imaged)))
    barcodes = [next(serials) if i in imaged else f"UPFAIL-{i}" for i in range(n)]
    barcodes[2] = "SOMEONE-ELSES"  # the board's own code says otherwise
    up = UpstreamPeer(("127.0.0.1", 0), BoardPlan(n, failed_every=6, barcodes=tuple(barcodes), seed=3)).start()
    link = HermesLink(HermesConfig(upstream="{}:{}".format(*up.address), downstream="127.0.0.1:0", machine_id="aoi-1",
                                   boards=n))
    down = DownstreamPeer(link.giver.address).start()
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    said: list[str] = []
    service, _ = run_line(rules, zoo, root / "models", SyntheticSource(rules, len(imaged), seed=seed),
                          ServiceConfig(LineConfig(device_mb=40)), store, tmp_path, said.append, hermes=link)
    try:
        assert _wait(lambda: len(down.taken) == n, 30), (len(down.taken), said)
        ins = [(b.BoardId, b.TopBarcode) for b in up.boards]
        outs = [(h.board.BoardId, h.board.TopBarcode) for h in down.taken]
        assert outs == ins  # every board, in order, with its identity
        with store.engine.connect() as c:
            rows = {r.board_id: r for r in c.execute(text(
                "SELECT board_id, board_serial, serial_source, verdict, error FROM inspections"))}
        assert len(rows) == n
        for h in down.taken:
            row = rows[h.board.BoardId]
            assert h.board.FailedBoard == (BoardQuality.GOOD if row.verdict == "pass" else BoardQuality.FAILED)
            assert row.board_serial == h.board.TopBarcode and row.serial_source == "upstream"
        failed_upstream = [rows[b.BoardId] for b in up.boards if b.FailedBoard == BoardQuality.FAILED]
        assert len(failed_upstream) == 4 and all(r.error == UPSTREAM_FAILED for r in failed_upstream)
        mismatch = rows[up.boards[2].BoardId]
        assert mismatch.error.startswith("identity mismatch: upstream says 'SOMEONE-ELSES', the board's code reads")
        assert service.line.stats.identity_mismatches == 1
        assert link.counters.passed_uninspected == 4 and link.counters.handed_on == n
        inspected = [r for r in rows.values() if r.error is None]
        assert len(inspected) == n - 5 and {r.verdict for r in inspected} <= {"pass", "fail"}
    finally:
        up.stop()
        down.stop()


def test_the_machine_after_the_box_gets_each_panels_boards_as_the_database_keeps_them(demo, tmp_path: Path) -> None:
    """A live line on a panel's rule set hands each panel on with SubBoards that say, board by board, what the
    stored result says (one rule: results/units.py)."""
    from .test_routing_rules import PANEL

    root, zoo = demo
    rules = parse_rules(PANEL, "panel.yaml")
    link = HermesLink(HermesConfig(downstream="127.0.0.1:0", machine_id="aoi-1"))
    down = DownstreamPeer(link.giver.address).start()
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    try:
        run_line(rules, zoo, root / "models", open_source("synthetic", rules, 6, 3, defect_rate=0.4),
                 ServiceConfig(LineConfig(device_mb=40)), store, tmp_path, lambda _m: None, hermes=link)
        assert _wait(lambda: len(down.taken) == 6, 30)
        stored = {i.board_id: i.panel for i in store.inspections()}
        for h in down.taken:
            failed = stored[h.board.BoardId].failed
            assert h.board.sub_boards == tuple(
                SubBoard(k, SubBoardState.FAILED if k in failed else SubBoardState.GOOD) for k in (1, 2))
            assert h.board.FailedBoard == (BoardQuality.FAILED if failed else BoardQuality.GOOD)
        assert len({h.board.sub_boards for h in down.taken}) > 1  # panels whose failed boards differ
    finally:
        down.stop()


def test_a_panels_x_out_from_upstream_is_not_inspected_and_goes_on_as_upstream_marked_it(demo, tmp_path: Path) -> None:
    """The machine before the box marks board 2 of each panel skip (an x-out): the box inspects board 1 only (no
    part of board 2 in the result, the record naming it skipped), and hands the panel on with board 2 still skip and
    board 1 as its own result says."""
    from .test_routing_rules import PANEL

    root, zoo = demo
    rules = parse_rules(PANEL, "panel.yaml")
    plan = BoardPlan(4, sub_boards=(SubBoard(1, SubBoardState.GOOD), SubBoard(2, SubBoardState.SKIP, "XOUT")), seed=5)
    up = UpstreamPeer(("127.0.0.1", 0), plan).start()
    link = HermesLink(HermesConfig(upstream="{}:{}".format(*up.address), downstream="127.0.0.1:0", boards=4))
    down = DownstreamPeer(link.giver.address).start()
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    records: list = []
    try:
        service, _ = run_line(rules, zoo, root / "models", open_source("synthetic", rules, 4, 3, defect_rate=0.4),
                              ServiceConfig(LineConfig(device_mb=40)), store, tmp_path, lambda _m: None, hermes=link,
                              published=[records.append])
        assert _wait(lambda: len(down.taken) == 4, 30)
        stored = {i.board_id: i for i in store.inspections()}
        assert len(records) == 4 and all(r.panel_skipped == [2] for r in records)
        for h in down.taken:
            board = stored[h.board.BoardId]
            assert sorted(p.ref for p in board.parts) == ["1-D1", "1-R1"]  # board 2's part was not inspected
            assert board.panel.skipped == [2]  # and the database says why it has none
            one = SubBoardState.FAILED if board.panel.failed == [1] else SubBoardState.GOOD
            assert h.board.sub_boards == (SubBoard(1, one), SubBoard(2, SubBoardState.SKIP, "XOUT"))
    finally:
        up.stop()
        down.stop()


def test_a_panels_boards_go_on_with_their_own_codes_and_one_contradicting_upstream_is_noread(
        demo, tmp_path: Path) -> None:  # noqa: ANN001
    """Each board of a panel carries its own code: board 2's is read and handed on as its SubBoard barcode; board 1's
    upstream barcode is contradicted by the code printed on it, so board 1 goes by its NOREAD (counted as an
    identity mismatch) and goes on with what upstream said, never a NOREAD of ours."""
    from .test_board_codes import CODED

    root, zoo = demo
    rules = parse_rules(CODED, "coded.yaml")
    plan = BoardPlan(3, sub_boards=(SubBoard(1, SubBoardState.GOOD, "UP-1"), SubBoard(2, SubBoardState.GOOD)),
                     seed=8)
    up = UpstreamPeer(("127.0.0.1", 0), plan).start()
    link = HermesLink(HermesConfig(upstream="{}:{}".format(*up.address), downstream="127.0.0.1:0", boards=3))
    down = DownstreamPeer(link.giver.address).start()
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    try:
        service, _ = run_line(rules, zoo, root / "models", open_source("synthetic", rules, 3, 3),
                              ServiceConfig(LineConfig(device_mb=40)), store, tmp_path, lambda _m: None, hermes=link)
        assert _wait(lambda: len(down.taken) == 3, 30)
        stored = {i.board_id: i for i in store.inspections()}
        assert service.line.stats.identity_mismatches == 3 and service.line.stats.unit_noreads == 3
        for h in down.taken:
            own = stored[h.board.BoardId].panel.serials
            assert own[1] == f"NOREAD-{stored[h.board.BoardId].uuid[:8]}-1"
            assert own[2].startswith("MINI-") and own[2].endswith("-2")
            assert [(sb.Pos, sb.Bc) for sb in h.board.sub_boards] == [(1, "UP-1"), (2, own[2])]
    finally:
        up.stop()
        down.stop()


def test_a_board_of_another_product_changes_the_line_over_first_and_one_of_no_recipe_goes_on_failed(
        demo, tmp_path: Path) -> None:
    """`--hermes-follow-product`: the machine before the box hands in boards of products mini, mini-b (a recipe of
    the same rule folder) and nope (none): the line changes over before the first board of each product it has a
    recipe for, each board is stored under its product's recipe, the board of no recipe is not inspected and goes on
    failed, and each changeover is in the audit trail as the upstream machine's."""
    from inspector.access.audit import AuditTrail
    from inspector.routing.rules import load_rules

    root, zoo = demo
    folder = tmp_path / "rules"
    folder.mkdir()
    (folder / "mini.yaml").write_text(GOOD, encoding="utf-8")
    (folder / "mini-b.yaml").write_text(GOOD.replace("recipe: mini", "recipe: mini-b"), encoding="utf-8")
    rules = load_rules(folder / "mini.yaml")
    products = ("mini", "mini", "mini-b", "mini-b", "nope", "mini")
    up = UpstreamPeer(("127.0.0.1", 0), BoardPlan(len(products), products=products, seed=5)).start()
    link = HermesLink(HermesConfig(upstream="{}:{}".format(*up.address), downstream="127.0.0.1:0", machine_id="aoi-1",
                                   boards=len(products), follow_product=True))
    down = DownstreamPeer(link.giver.address).start()
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    said: list[str] = []
    try:
        service, _ = run_line(rules, zoo, root / "models", SyntheticSource(rules, len(products), seed=2),
                              ServiceConfig(LineConfig(device_mb=40)), store, tmp_path, said.append, hermes=link)
        assert _wait(lambda: len(down.taken) == len(products), 30), (len(down.taken), said)
        stored = {i.board_id: i for i in store.inspections()}
        got = [(stored[b.BoardId].recipe, stored[b.BoardId].error) for b in up.boards]
        assert [r for r, _e in got] == ["mini", "mini", "mini-b", "mini-b", "mini-b", "mini"], got
        assert [e is None for _r, e in got] == [True, True, True, True, False, True], got
        assert got[4][1].startswith("not inspected: no recipe of this line serves product nope (no rule set for "
                                    "recipe 'nope'"), got[4][1]
        assert [h.board.FailedBoard == BoardQuality.FAILED for h in down.taken][4]
        assert service.products.counters.changeovers == 2 and service.products.counters.refused == 1
        trail = [(e.actor, e.subject) for e in reversed(AuditTrail(store.engine).events(kind="rules.changeover"))]
        assert [a for a, _s in trail] == ["Hermes upstream", "Hermes upstream"], trail
    finally:
        up.stop()
        down.stop()
