"""A line changed over live to another board with its own zoo (Line.change_board, app/board_switch.py): by name, and
by a recipe only another board's folder holds (as a PLC names one). Boards inside at the change finish on the board
they were cut for, every board after is inspected by the new board's engine, a board's verdicts do not depend on
which engine inspected it, a change that cannot complete leaves the old board served, and a damaged installed board
is not started on."""
from __future__ import annotations

import io
import threading
from pathlib import Path

import numpy as np
import pytest

from inspector.app.board_package import install_board, pack_board
from inspector.app.board_switch import BoardOpener, BoardSwitch
from inspector.app.installed_boards import at_start, chosen_rules, next_board, startable
from inspector.app.line import Line, LineConfig
from inspector.app.recipes import NoRecipe, RecipeBook
from inspector.app.rules_watch import RulesWatcher
from inspector.app.run import line_profiles
from inspector.experts.zoo import Zoo
from inspector.ingest.synthetic import render_board
from inspector.results.records import BoardRecord
from inspector.routing.rules import load_rules

from .test_routing_rules import GOOD


def installed_board(demo, tmp_path: Path, name: str, recipe: str) -> Path:
    """The demo board under another recipe, packed with a copy of the demo zoo and installed as board `name`."""
    _root, zoo = demo
    src = tmp_path / f"src-{name}" / f"{name}.yaml"
    src.parent.mkdir()
    src.write_text(GOOD.replace("recipe: mini", f"recipe: {recipe}"), encoding="utf-8")
    out = io.BytesIO()
    pack_board(src, zoo.root, out)
    data = out.getvalue()
    install_board(io.BytesIO(data), len(data), tmp_path / "data" / "boards")
    return tmp_path / "data" / "boards" / name


@pytest.fixture
def line_of_two_boards(demo, tmp_path: Path):  # noqa: ANN201 - (line, switch, book, records, configured rule file)
    """A line on the configured demo board (recipe mini), with board b (recipe mini-b, its own copy of the zoo)
    installed beside it; its profiles measured into the demo's models folder."""
    root, zoo = demo
    configured = tmp_path / "cfg" / "mini.yaml"
    configured.parent.mkdir()
    configured.write_text(GOOD, encoding="utf-8")
    installed_board(demo, tmp_path, "b", "mini-b")
    rules = load_rules(configured)
    measured: list[str] = []

    def profiles(z: Zoo, r):  # noqa: ANN001, ANN202
        measured.append(str(z.root))
        return line_profiles(z, root / "models", lambda _m: None, "torch", r)

    records: list[BoardRecord] = []
    line = Line(rules, zoo, profiles(zoo, rules), LineConfig(device_mb=40), sinks=[records.append])
    watcher = RulesWatcher(line, configured)
    book = RecipeBook(watcher, [configured.parent])
    opener = BoardOpener(configured, lambda path, _r: Zoo.load(Path(path)), profiles)
    switch = BoardSwitch(book, tmp_path / "data", opener, (str(configured), str(zoo.root)))
    line.start()
    try:
        yield line, switch, book, records, configured, measured
    finally:
        line.stop()


def boards(n: int) -> list[np.ndarray]:
    rules = load_rules_text()
    rng = np.random.default_rng(11)
    return [render_board(rules, f"s{i}", rng, rates={"missing": 0.2, "shifted": 0.2}).image for i in range(n)]


def load_rules_text():  # noqa: ANN201 - the demo board's rule set, parsed
    from inspector.routing.rules import parse_rules

    return parse_rules(GOOD, "mini.yaml")


def verdicts(records: list[BoardRecord]) -> dict[str, list[tuple[str, str]]]:
    return {r.board_serial: [(p.ref, p.verdict) for p in r.parts] for r in records}


def test_a_recipe_of_an_installed_board_changes_the_whole_board_over_live_and_back(line_of_two_boards,
                                                                                   tmp_path: Path) -> None:
    """The PLC names recipe mini-b, which only installed board b's folder holds: the line changes over to b and its
    zoo between boards, while boards flow; each board is inspected whole by one board's engine with the verdicts a
    line on either gives; the choice is kept for the next start; mini brings the configured board back."""
    line, switch, book, records, configured, measured = line_of_two_boards
    images = boards(12)
    for i, image in enumerate(images):
        line.inspect(image, f"s{i}")
    assert line.drain(120)
    before = verdicts(records)
    assert {r.recipe for r in records} == {"mini"} and any(v != "pass" for vs in before.values() for _r, v in vs)
    records.clear()
    done_before = line.engine_stats().completed
    assert done_before == sum(len(parts) for parts in before.values())
    feeding = threading.Thread(target=lambda: [line.inspect(im, f"s{i}") for i, im in enumerate(images)])
    feeding.start()  # boards go in while the PLC changes over
    assert book.select("mini-b") is None  # as the station calls it: no reason, so it took
    feeding.join(120)
    for i, image in enumerate(images):
        line.inspect(image, f"s{i}")
    assert line.drain(120)
    assert len(records) == 24 and all(r.error is None for r in records)
    # the line's engine counts go on over the change (each board's engine counts its own)
    assert line.engine_stats().completed == done_before + sum(len(r.parts) for r in records)
    assert records[-1].recipe == "mini-b" and {r.recipe for r in records} <= {"mini", "mini-b"}
    for r in records:  # whichever board's engine inspected it, a board's parts get the verdicts they got before
        assert [(p.ref, p.verdict) for p in r.parts] == before[r.board_serial], r.board_serial
    board_b = tmp_path / "data" / "boards" / "b"
    assert Path(line.zoo.root).resolve() == (board_b / "zoo").resolve() and switch.serving() == "b"
    assert measured[-1] == str(board_b / "zoo")  # the new zoo's profiles were asked for (found measured)
    assert book.watcher.path == board_b / "board" / "b.yaml" and book.folders == [board_b / "board"]
    assert next_board(tmp_path / "data") == "b"  # the next start runs it too
    chosen, _said = at_start(tmp_path / "data", *switch.configured)
    assert chosen is not None and chosen.name == "b"
    with pytest.raises(NoRecipe, match=r"'nope'.*nor has another board of this line \(the configured board: mini\)"):
        book.changeover("nope")
    assert line.rules.recipe == "mini-b"
    assert book.select("mini") is None  # the configured board's recipe: back to it and its zoo
    assert line.rules.recipe == "mini" and switch.serving() is None and next_board(tmp_path / "data") is None
    assert Path(line.zoo.root).resolve() == Path(switch.configured[1]).resolve() and line.board_changes == 2
    records.clear()
    for i, image in enumerate(images[:4]):
        line.inspect(image, f"s{i}")
    assert line.drain(120) and [verdicts(records)[f"s{i}"] for i in range(4)] == [before[f"s{i}"] for i in range(4)]


def test_a_board_that_cannot_be_served_leaves_the_old_one_serving(line_of_two_boards, tmp_path: Path) -> None:
    """Profiles that cannot be had (a models folder the kiosk may not write) for board b: the change is refused
    naming why, the configured board's engine serves again and inspects; nothing is kept for the next start. A board
    not installed, or one a weights file of which is gone, is refused before anything stops."""
    line, switch, book, records, _configured, _measured = line_of_two_boards

    def refused(_zoo, _rules):  # noqa: ANN001, ANN202
        raise PermissionError(13, "Permission denied", "/var/lib/inspector/models/profiles")

    switch.opener = BoardOpener(switch.opener.rules, switch.opener.zoo, refused)
    with pytest.raises(ValueError, match=r"mini-b cannot be served \(PermissionError.*the line serves mini again"):
        switch.serve("b")
    assert line.rules.recipe == "mini" and switch.serving() is None and next_board(tmp_path / "data") is None
    assert line.board_changes == 0  # refused: no change counted
    assert book.select("mini-b") is not None  # the PLC hears the reason
    assert line.rules.recipe == "mini"
    line.inspect(boards(1)[0], "after")
    assert line.drain(60) and records[-1].board_serial == "after" and records[-1].error is None
    with pytest.raises(ValueError, match="no board zz is installed on this kiosk \\(installed: b\\)"):
        switch.serve("zz")
    zoo_b = Zoo.load(tmp_path / "data" / "boards" / "b" / "zoo")  # a weights file of b gone since its install
    zoo_b.path_of(sorted(zoo_b.entries)[0]).unlink()
    with pytest.raises(ValueError, match=r"board b cannot be served: weights file\(s\) .* gone from"):
        switch.serve("b")
    assert line.rules.recipe == "mini" and switch.serving() is None


def test_a_recipe_two_installed_boards_answer_to_is_refused_naming_both_unless_one_is_served(
        line_of_two_boards, demo, tmp_path: Path) -> None:
    """Board c answers to mini-b as board b does: a PLC naming mini-b is refused with both names (which board it
    means is not the line's to guess), the line serving what it served; served by name, b's own folder answers."""
    line, switch, book, _records, _configured, _measured = line_of_two_boards
    installed_board(demo, tmp_path, "c", "mini-b")
    refused = book.select("mini-b")
    assert refused is not None and "recipe 'mini-b' is served by board b (b.yaml) and board c (c.yaml)" in refused
    assert "board serve" in refused and line.rules.recipe == "mini" and switch.serving() is None
    switch.serve("c")
    assert book.select("mini-b") is None and switch.serving() == "c"  # the served board's own recipe: no doubt
    assert line.board_changes == 1


def test_an_installed_board_whose_files_were_damaged_is_not_started_on(demo, tmp_path: Path) -> None:
    """`startable`: the kiosk's start checks the chosen board first, so a board damaged on disk leaves the line on
    its configured board (the kiosk says why) instead of down."""
    board = installed_board(demo, tmp_path, "c", "mini-c")
    chosen = chosen_rules(tmp_path / "data", "c")
    assert startable(chosen) is None
    zoo = Zoo.load(board / "zoo")
    weights = zoo.path_of(sorted(zoo.entries)[0])
    weights.unlink()
    assert f"weights file(s) {weights.name} gone from" in str(startable(chosen)), startable(chosen)
    assert "install the board again" in str(startable(chosen))
    (board / "zoo" / "manifest.json").write_text("{", encoding="utf-8")
    assert startable(chosen) is not None
    (board / "board" / "c.yaml").write_text("recipe: [", encoding="utf-8")
    assert "c.yaml" in str(startable(chosen))


def test_an_installed_board_is_prepared_while_another_runs_and_says_what_its_first_changeover_profiles(
        line_of_two_boards, demo, tmp_path: Path) -> None:
    """`prepare_board`: what a changeover would spend making is made while the old board runs, nothing is timed then;
    the architectures this box never profiled are named (all of them for a box with no profile yet, none where the
    line's own profiles hold them)."""
    from inspector.app.run import prepare_board

    _line, switch, _book, _records, _configured, _measured = line_of_two_boards
    root, zoo = demo
    rules = load_rules_text()
    assert prepare_board(zoo, root / "models", lambda _m: None, "torch", rules) == []
    fresh = prepare_board(zoo, tmp_path / "new-box", lambda _m: None, "torch", rules)
    assert fresh == sorted({zoo.architecture(n).key for n in zoo.entries}) and len(fresh) == 2, fresh
    assert not (tmp_path / "new-box").exists()  # nothing measured, nothing written
    switch.opener = BoardOpener(switch.opener.rules, switch.opener.zoo,
                                switch.opener.profiles,
                                lambda z, r: prepare_board(z, root / "models", lambda _m: None, "torch", r))
    assert switch.prepare("b") == []


def test_an_installed_boards_profiles_are_measured_at_a_quiet_moment_on_the_emptied_line(
        line_of_two_boards, tmp_path: Path) -> None:
    """`board profile`: on a box that never profiled board b's architectures, they are measured while boards flow,
    on the line held empty for it (no board inside while measuring), and the line goes on serving its board; then
    nothing is left for b's changeover to measure."""
    from inspector.app.run import prepare_board

    line, switch, _book, records, _configured, _measured = line_of_two_boards
    box = tmp_path / "new-box"  # this box's profiles folder, empty
    inside: list[int] = []

    def profiles(z: Zoo, r):  # noqa: ANN001, ANN202
        inside.append(line.boards_in_flight)
        return line_profiles(z, box, lambda _m: None, "torch", r)

    switch.opener = BoardOpener(switch.opener.rules, switch.opener.zoo, profiles,
                                lambda z, r: prepare_board(z, box, lambda _m: None, "torch", r))
    images = boards(6)
    feeding = threading.Thread(target=lambda: [line.inspect(im, f"p{i}") for i, im in enumerate(images)])
    feeding.start()
    measured, held = switch.profile("b")
    feeding.join(120)
    assert len(measured) == 2 and held > 0 and inside == [0]  # measured on the emptied line
    assert switch.profile("b") == ([], 0.0)  # nothing left: nothing held
    assert line.drain(120) and len(records) == 6 and all(r.error is None for r in records)
    assert line.rules.recipe == "mini" and switch.serving() is None and line.board_changes == 0
    assert line.engine_stats().completed == sum(len(r.parts) for r in records)
    switch.serve("b")
    assert inside == [0, 0]  # its changeover asked for profiles and found them measured (none left to prepare)
    assert switch.opener.prepare(line.zoo, line.rules) == []


def test_a_board_cut_for_the_old_board_while_the_line_changes_is_cut_again_for_the_new_one(
        line_of_two_boards, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race a changeover must not lose: a board already past the door (cut under mini) when board b takes the
    line over is not handed to b's engine as mini's: it is cut again and inspected whole as b's."""
    line, switch, _book, records, _configured, _measured = line_of_two_boards
    cut, go = threading.Event(), threading.Event()
    identify = line._identify
    calls: list[str] = []

    def held_once(record, image, rules, *rest):  # noqa: ANN001, ANN202 - Line._identify, held on its first call
        calls.append(rules.recipe)
        if len(calls) == 1:
            cut.set()
            assert go.wait(60)
        return identify(record, image, rules, *rest)

    monkeypatch.setattr(line, "_identify", held_once)
    board = threading.Thread(target=line.inspect, args=(boards(1)[0], "raced"))
    board.start()
    assert cut.wait(60)  # cut under mini, not yet inside
    switch.serve("b")  # nothing inside: the change goes through at once
    go.set()
    board.join(60)
    assert line.drain(60)
    assert calls == ["mini", "mini-b"]  # cut again, under the board served now
    assert [(r.board_serial, r.recipe, r.error) for r in records] == [("raced", "mini-b", None)]
    assert len(records[0].parts) == len(load_rules_text().placements())
