"""The dashboard's New board tab driven in a real Qt event loop: import a KiCad board, register a golden photo (on
its outline, then on points picked by clicking the photo and the CAD drawing), teach with a progress bar, read the
validation table, make it the line's board (recorded in the audit trail)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
pytest.importorskip("PySide6")
pytestmark = pytest.mark.usefixtures("collect_in_the_gui_thread")  # conftest.py

import cv2  # noqa: E402
import numpy as np  # noqa: E402
from PySide6.QtCore import QPoint, Qt  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402

from inspector.access.identity import Identity  # noqa: E402
from inspector.app.controller import LineController, LineSetup  # noqa: E402
from inspector.app.line import LineConfig  # noqa: E402
from inspector.app.service import ServiceConfig  # noqa: E402
from inspector.ingest.synthetic import render_board  # noqa: E402
from inspector.routing.rules import load_rules  # noqa: E402
from ui.backend import LocalBackend  # noqa: E402
from ui.tabs.new_board import NewBoardTab  # noqa: E402

from .test_board_teach import kicad_board, photo_of  # noqa: E402
from .test_routing_rules import GOOD  # noqa: E402

ENGINEER = Identity("erin", "engineer", "the GUI tests")


def click(picture, x: float, y: float) -> None:  # noqa: ANN001 - a ClickPicture
    """A left click on `picture` at (x, y) of the image it shows."""
    QTest.mouseClick(picture, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     QPoint(round(x * picture.scale), round(y * picture.scale)))


def pressed(qtbot, panel, button, row: int, reason: str) -> str:  # noqa: ANN001 - pytest-qt, a BoardsPanel, its button
    """The boards panel's `button` pressed on table row `row`, confirmed with `reason` as a person would, waited
    for: what the panel says then."""
    from .test_gui import confirm_with

    panel.table.selectRow(row)
    assert button.isEnabled()
    confirm_with(reason)
    button.click()
    qtbot.waitUntil(lambda: not panel.busy, timeout=300_000)
    return panel.status.text()


def new_board_tab(qtbot, tmp_path: Path) -> NewBoardTab:  # noqa: ANN001 - pytest-qt's fixture
    """A New board tab on a line with no board yet, an engineer signed in."""
    setup = LineSetup(source="synthetic", boards=0, service=ServiceConfig(LineConfig(device_mb=40)))
    backend = LocalBackend(LineController(tmp_path / "models", tmp_path / "data"), setup)
    backend.identity = ENGINEER
    tab = NewBoardTab(backend, tmp_path / "boards")
    qtbot.addWidget(tab)
    return tab


def test_a_golden_photo_from_the_line_camera_needs_a_running_camera_and_says_what_it_was_taken_with(
        qtbot, tmp_path: Path) -> None:  # noqa: ANN001
    """Without a running camera the tab says what to do; a photo taken (here: through the kiosk, test_plc) is listed
    with the settings it says."""
    from inspector.camera.photo_settings import TakenWith, save_photo

    tab = new_board_tab(qtbot, tmp_path)
    assert tab.camera_btn.isEnabled()
    tab.camera_btn.click()
    qtbot.waitUntil(lambda: not tab.busy, timeout=10_000)
    assert "start the line on a camera first" in tab.status.text() and tab.photos.count() == 0
    taken = TakenWith.now({"ExposureTime": 900.0}, {"serial": "EMU-1", "model": "Emulation"})
    path = save_photo(tmp_path / "golden-01.png", np.zeros((20, 30, 3), np.uint8), taken)
    tab._photo_taken((path, taken))
    assert tab.golden() == [path]
    assert "taken by camera EMU-1 (Emulation) at ExposureTime 900 (teaching asks" in tab.status.text()
    assert tab.photos.item(0).toolTip() == "taken by camera EMU-1 (Emulation) at ExposureTime 900"
    plain = tmp_path / "phone.png"
    cv2.imwrite(str(plain), np.zeros((20, 30, 3), np.uint8))
    tab.add_photos([plain])  # a photo from elsewhere says none
    assert "says no camera settings" in tab.photos.item(1).toolTip()


def imported_tab(qtbot, tmp_path: Path, cad: Path, **fields: Path) -> NewBoardTab:  # noqa: ANN001
    """A New board tab that has imported `cad` at 10 px/mm, with its other fields (`gerber=`, `bom=`) filled in."""
    tab = new_board_tab(qtbot, tmp_path)
    tab.cad.setText(str(cad))
    for name, path in fields.items():
        getattr(tab, name).setText(str(path))
    tab.scale.setValue(10.0)
    tab.import_btn.click()
    qtbot.waitUntil(lambda: tab.rules_path is not None, timeout=30_000)
    return tab


def test_the_new_board_tab_takes_a_board_from_its_cad_to_the_line(qtbot, tmp_path: Path) -> None:
    (tmp_path / "b.kicad_pcb").write_text(kicad_board(), encoding="utf-8")
    first = tmp_path / "first.yaml"
    first.write_text(GOOD, encoding="utf-8")
    setup = LineSetup(rules_path=first, source="synthetic", boards=0,
                      service=ServiceConfig(LineConfig(device_mb=40)))
    backend = LocalBackend(LineController(tmp_path / "models", tmp_path / "data"), setup)
    backend.identity = ENGINEER
    tab = NewBoardTab(backend, tmp_path / "boards")
    qtbot.addWidget(tab)
    tab.show()
    assert not tab.teach_btn.isEnabled() and not tab.activate_btn.isEnabled()

    tab.cad.setText(str(tmp_path / "nothing.kicad_pcb"))
    tab.import_btn.click()
    assert "nothing.kicad_pcb does not exist" in tab.status.text()
    tab.cad.setText(str(tmp_path / "b.kicad_pcb"))
    tab.scale.setValue(10.0)
    tab.import_btn.click()
    qtbot.waitUntil(lambda: tab.rules_path is not None, timeout=30_000)
    rules = load_rules(tab.rules_path)
    assert "11 inspected" in tab.summary.text() and tab.board.pixmap() is not None

    golden = render_board(rules, "g0", np.random.default_rng(3), rates={}).image
    photo, m = photo_of(golden, 12.0, 1.5, 0.02, (150, 120))
    cv2.imwrite(str(tmp_path / "golden.png"), photo)
    tab.add_photos([tmp_path / "golden.png"])
    tab.register_btn.click()
    qtbot.waitUntil(lambda: "registered on its outline" in tab.registration.text(), timeout=30_000)
    assert not tab.photo.pixmap().isNull()

    # points picked by hand: a spot on the photo, then the same spot on the CAD drawing, three times
    for bx, by in ((40, 40), (360, 50), (200, 260)):
        px, py = cv2.perspectiveTransform(np.float64([[[bx, by]]]), m)[0, 0]
        click(tab.photo, px, py)
        click(tab.board, bx, by)
    assert len(tab.points) == 3 and tab.save_points_btn.isEnabled()
    tab.save_points_btn.click()
    assert (tab.rules_path.parent / "b.points.yaml").is_file()
    qtbot.waitUntil(lambda: "registered on its points" in tab.registration.text(), timeout=30_000)

    tab.epochs.setValue(1)
    tab.teach_btn.click()
    qtbot.waitUntil(lambda: tab.taught is not None or tab.status.styleSheet() != "", timeout=600_000)
    assert tab.taught is not None, tab.status.text()
    assert tab.bar.value() == 100 and tab.table.rowCount() == len(rules.components) + 1
    assert "presence check" in tab.status.text()  # served beside the experts, said with the table
    assert "defects called by kind: " in tab.status.text() and "missing" in tab.status.text()
    assert tab.activate_btn.isEnabled()
    tab.activate_btn.click()
    assert backend.setup.rules_path == tab.taught.plan.out
    assert "next start" in tab.status.text()
    events = backend.audit().events(kind="rules.activate")
    assert len(events) == 1 and events[0].actor == "erin", list(backend.controller.log)[-5:]

    # a board known good whose parts the experts flag (turned, shifted, bridged ones made, and every type's
    # threshold served high, as a strict teaching's would be): planned, then served
    from inspector.experts.zoo import Zoo, set_operating_point

    strict = Zoo.load(tab.taught.zoo)
    for name in [n for n in strict.entries if n.startswith("cls-")]:
        strict = set_operating_point(strict, name, 30.0)
    panel = tab.tune_panel
    assert panel.board == (tab.taught.plan.out, tab.taught.zoo) and not panel.plan_btn.isEnabled()
    forced = {"R1": "rotated", "R2": "shifted", "R3": "bridge", "C1": "rotated", "C2": "shifted", "C3": "bridge"}
    odd = render_board(rules, "odd", np.random.default_rng(5), rates={}, forced=forced).image
    cv2.imwrite(str(tmp_path / "odd.png"), photo_of(odd, 12.0, 1.5, 0.02, (150, 120))[0])  # where the points are
    panel.add_photos([tmp_path / "odd.png"])
    panel.most_lost.setValue(100.0)
    panel.plan_btn.click()
    qtbot.waitUntil(lambda: panel.tune is not None or panel.status.styleSheet() != "", timeout=120_000)
    assert panel.tune is not None, panel.status.text()
    moved = {t.expert: t.after for t in panel.tune.types if t.changed}
    assert moved and panel.table.rowCount() >= len(panel.tune.types), panel.status.text()
    assert panel.serve_btn.isEnabled()
    assert "after the plan" in panel.status.text()
    planned_left = len(panel.tune.left)
    panel.serve_btn.click()
    qtbot.waitUntil(lambda: "Checked again" in panel.status.text() and not panel.busy, timeout=120_000)
    served = Zoo.load(tab.taught.zoo).entries
    assert all(served[e].spec["good_margin"] == pytest.approx(v) for e, v in moved.items())
    assert f"flagged on the good boards: {planned_left}," in panel.status.text()  # the line's second look
    events = backend.audit().events(kind="expert.threshold")
    assert {e.subject for e in events} == set(moved) and all(e.actor == "erin" for e in events)

    # a revision of the board (R6 and C6 fitted now, R5 left off, C2 moved): imported, then made a revision of the
    # taught board from the photo selected, a board of the revision (the first listed is not), its changes in the
    # table; made the line's board while the line runs the taught board, it is changed over to from the next board
    from dataclasses import replace

    from .test_board_teach import revision_board

    taught_out, zoo = tab.taught.plan.out, tab.taught.zoo
    backend.setup = replace(backend.setup, interval_s=0.2)
    backend.start()
    qtbot.waitUntil(lambda: backend.controller.phase == "running", timeout=300_000)
    (tmp_path / "r.kicad_pcb").write_text(revision_board(), encoding="utf-8")
    tab.cad.setText(str(tmp_path / "r.kicad_pcb"))
    tab.import_btn.click()
    qtbot.waitUntil(lambda: tab.rules_path is not None and tab.rules_path.stem == "r", timeout=30_000)
    assert not tab.activate_btn.isEnabled() and tab.revise_btn.isEnabled()
    revised_board = render_board(load_rules(tab.rules_path), "r0", np.random.default_rng(7), rates={}).image
    cv2.imwrite(str(tmp_path / "rev.png"), photo_of(revised_board, 12.0, 1.5, 0.02, (150, 120))[0])  # the points'
    tab.photos.clear()
    tab.add_photos([tmp_path / "odd.png", tmp_path / "rev.png"])
    tab.photos.setCurrentRow(1)
    tab.revise(taught_out, zoo)
    qtbot.waitUntil(lambda: tab.ready is not None or tab.status.styleSheet() != "", timeout=120_000)
    assert tab.ready == (tab.rules_path.with_name("r.taught.yaml"), zoo), tab.status.text()
    changes = {tab.table.item(r, 0).text(): tab.table.item(r, 1).text() for r in range(tab.table.rowCount())}
    assert changes == {"C2": "moved", "C6": "fitted now", "R5": "no longer inspected", "R6": "fitted now"}
    assert tab.table.horizontalHeaderItem(1).text() == "Change" and "golden windows from the photo: C2, C6, R6" \
        in tab.status.text()
    tab.activate_btn.click()
    assert backend.setup.rules_path == tab.ready[0] and "next board on" in tab.status.text(), tab.status.text()
    assert Path(backend.controller.service.line.rules.source) == tab.ready[0]
    assert len(backend.audit().events(kind="rules.activate")) == 2
    # the taught board with a zoo of its own (a copy elsewhere): the running line changes over to it and its zoo
    import shutil

    own = tmp_path / "own-zoo"
    shutil.copytree(zoo, own)
    tab.ready = (taught_out, own)
    tab._enable()
    tab.activate_btn.click()
    assert "changed over live" in tab.status.text(), tab.status.text()
    assert Path(backend.controller.service.line.zoo.root) == own
    assert Path(backend.controller.service.line.rules.source) == taught_out
    assert len(backend.audit().events(kind="rules.activate")) == 3
    backend.stop()
    qtbot.waitUntil(lambda: backend.controller.phase == "stopped", timeout=120_000)
    _revised_on_the_kiosk(qtbot, tmp_path, taught_out, zoo)


def _revised_on_the_kiosk(qtbot, tmp_path: Path, taught: Path, zoo_root: Path) -> None:  # noqa: ANN001
    """A dashboard attached to the kiosk of the taught board: the revision imported there, the newest board the
    kiosk's line inspected (a board of the revision), the kiosk revises its board and the line is changed over."""
    import shutil
    import threading

    from inspector.app.board_switch import BoardOpener
    from inspector.app.run import line_profiles, open_source
    from inspector.app.service import LineService
    from inspector.experts.zoo import Zoo
    from inspector.kiosk.service import Kiosk, KioskConfig
    from inspector.results.store import ResultStore, sqlite_url
    from ui.attached import AttachedBackend

    from .people import PASSWORD, person
    from .services import free_port

    data, drop = tmp_path / "kiosk", tmp_path / "drop"
    data.mkdir()
    drop.mkdir()
    db = sqlite_url(data / "results.sqlite")
    rules, zoo = load_rules(taught), Zoo.load(zoo_root)
    service = LineService(rules, zoo, line_profiles(zoo, tmp_path / "models", lambda _m: None),
                          ServiceConfig(LineConfig(device_mb=40)), ResultStore(db), data,
                          open_source(f"watch:{drop}", rules, 0, 1))
    person(db, "kim", "engineer")
    port = free_port()
    opener = BoardOpener(taught, lambda path, _r: Zoo.load(Path(path)),
                         lambda z, _r: line_profiles(z, tmp_path / "models", lambda _m: None))
    kiosk = Kiosk(service, KioskConfig(listen=f"127.0.0.1:{port}", token="t0ken-" + "k" * 30), data_dir=data,
                  rules_path=str(taught), opener=opener)
    serving = threading.Thread(target=kiosk.serve, daemon=True)
    serving.start()
    backend = AttachedBackend(f"http://127.0.0.1:{port}", None, poll_s=0.2)
    try:
        backend.sign_in("kim", PASSWORD)
        tab = NewBoardTab(backend, tmp_path / "laptop")
        qtbot.addWidget(tab)
        assert tab.revise_btn.text() == "Revise the line's board"
        tab.cad.setText(str(tmp_path / "r.kicad_pcb"))
        tab.scale.setValue(10.0)
        tab.import_btn.click()
        qtbot.waitUntil(lambda: tab.rules_path is not None, timeout=30_000)
        assert tab.revise_btn.isEnabled() and not tab.activate_btn.isEnabled()
        shutil.copy(tmp_path / "rev.png", drop / "rev.png")  # the line inspects a board of the revision
        qtbot.waitUntil(lambda: service.last_board is not None, timeout=120_000)
        tab.revise_btn.click()  # no photo listed: the newest board the line inspected
        qtbot.waitUntil(lambda: tab.ready is not None or tab.status.styleSheet() != "", timeout=120_000)
        assert isinstance(tab.ready, str) and tab.ready.startswith("r-"), tab.status.text()
        changes = {tab.table.item(r, 0).text(): tab.table.item(r, 1).text() for r in range(tab.table.rowCount())}
        assert changes == {"C2": "moved", "C6": "fitted now", "R5": "no longer inspected", "R6": "fitted now"}
        assert "not served" in tab.status.text() and service.line.rules.version == rules.version
        assert tab.activate_btn.isEnabled()
        tab.activate_btn.click()
        assert "from its next board on" in tab.status.text(), tab.status.text()
        assert Path(service.line.rules.source).name == tab.ready + ".yaml"
        assert {p.ref for _c, p in service.line.rules.placements()} == \
            {p.ref for _c, p in load_rules(tab.rules_path).placements()}
        # a board taught at this dashboard (its own zoo): installed on the kiosk, its line changed over to it live
        from inspector.app.installed_boards import next_board

        tab.ready = (taught, zoo_root)
        tab._enable()
        assert tab.activate_btn.isEnabled()
        tab.activate_btn.click()
        qtbot.waitUntil(lambda: not tab.busy, timeout=120_000)
        said = tab.status.text()
        assert "installed on the kiosk" in said and "served from the next board on" in said, said
        name = next_board(data)  # and its next start runs it
        assert name is not None and name.startswith("b-")
        board = data / "boards" / name
        assert (board / "zoo" / "manifest.json").is_file()
        assert Path(service.line.zoo.root).resolve() == (board / "zoo").resolve()
        assert Path(service.line.rules.source).resolve() == (board / "board" / taught.name).resolve()
        # the kiosk's boards on the Routing rules tab: the configured board served again from there, then the
        # installed one removed
        from ui.tabs.boards_panel import CONFIGURED
        from ui.tabs.rules import RulesTab

        from .test_gui import confirm_with

        rules_tab = RulesTab(backend)
        qtbot.addWidget(rules_tab)
        panel = rules_tab.boards
        assert panel is not None
        rules_tab.refresh({})
        listed = {panel.table.item(r, 0).text(): panel.table.item(r, 4).text() for r in range(panel.table.rowCount())}
        assert listed == {CONFIGURED: "", name: "served, next start"}, listed
        panel.table.selectRow(1)
        assert not panel.serve_btn.isEnabled() and not panel.remove_btn.isEnabled()  # served: neither
        said = pressed(qtbot, panel, panel.serve_btn, 0, "back to the taught board")
        assert "the configured board served from the next board on" in said, said
        assert Path(service.line.zoo.root).resolve() == Path(zoo_root).resolve() and next_board(data) is None
        panel.table.selectRow(1)
        assert panel.remove_btn.isEnabled() and panel.profile_btn.isEnabled()
        confirm_with("between lots")
        panel.profile_btn.click()  # its architectures are the demo's, profiled: nothing measured, the line not held
        qtbot.waitUntil(lambda: not panel.busy, timeout=120_000)
        assert f"board {name}: the kiosk's box has a profile of each" in panel.status.text(), panel.status.text()
        confirm_with("taught again elsewhere")
        panel.remove_btn.click()
        qtbot.waitUntil(lambda: not panel.busy, timeout=60_000)
        assert f"board {name} removed" in panel.status.text() and not board.exists(), panel.status.text()
        assert panel.table.rowCount() == 1
        # its package carried to the line (`board install --out`) installed from the panel, not served
        from inspector.app.board_package import pack_board

        with open(tmp_path / "carried.tar", "wb") as f:
            pack_board(taught, zoo_root, f, "carried")
        confirm_with("carried on a stick")
        panel.install(tmp_path / "carried.tar")
        qtbot.waitUntil(lambda: not panel.busy, timeout=120_000)
        assert "board carried (" in panel.status.text() and "installed on the kiosk, not served" in \
            panel.status.text(), panel.status.text()
        assert (data / "boards" / "carried" / "zoo" / "manifest.json").is_file() and panel.table.rowCount() == 2
        assert Path(service.line.zoo.root).resolve() == Path(zoo_root).resolve()  # the line serves its board still
    finally:
        backend.close()
        kiosk.stop("test done")
        serving.join(60)


def test_the_new_board_tab_imports_an_odb_job_folder_and_the_step_asked_for(qtbot, tmp_path: Path) -> None:
    """An ODB++ job is a folder: the tab takes it. Its board and its panel both place parts, so the import asks which
    (naming both), and with the panel's step it imports the panel as one board of every copy."""
    from .test_board_odbpp import PANEL, write_job

    job = write_job(tmp_path, {"steps/panel/stephdr": PANEL})
    tab = new_board_tab(qtbot, tmp_path)
    tab.cad.setText(str(job))
    tab.scale.setValue(8.0)
    tab.import_btn.click()
    qtbot.waitUntil(lambda: not tab.busy and "placed in 2 steps" in tab.status.text(), timeout=30_000)
    assert "panel (3 boards of pcb)" in tab.status.text() and tab.rules_path is None
    tab.step.setText("panel")
    tab.import_btn.click()
    qtbot.waitUntil(lambda: tab.rules_path is not None, timeout=30_000)
    assert tab.rules_path == tmp_path / "boards" / "board-panel" / "board-panel.yaml"
    assert "21 parts" in tab.summary.text() and load_rules(tab.rules_path).recipe == "board-panel"


def test_a_tray_photo_lists_every_board_and_teaches_on_each_when_asked(qtbot, tmp_path: Path) -> None:
    """A golden photo of a tray (three touching boards found by their marks): Register draws and lists every board,
    says that a tray can teach on each, and with “Every board of a photo” checked, teaching takes all three as
    golden boards (unchecked, it takes the first registered board of each photo)."""
    from .test_board_teach import import_with_marks
    from .test_mark_search import tray

    (tmp_path / "cad").mkdir()
    rules = load_rules(import_with_marks(tmp_path / "cad"))
    tab = new_board_tab(qtbot, tmp_path)
    tab.cad.setText(str(tmp_path / "cad" / "f.kicad_pcb"))
    tab.scale.setValue(10.0)
    tab.import_btn.click()
    qtbot.waitUntil(lambda: tab.rules_path is not None, timeout=30_000)
    assert "4 fiducials" in tab.summary.text()

    board = render_board(rules, "g", np.random.default_rng(0), rates={}).image
    photo, _ = tray(board, (0, 400, 800), 12.0, 0.65)
    cv2.imwrite(str(tmp_path / "tray.png"), photo)
    tab.add_photos([tmp_path / "tray.png"])
    tab.register_btn.click()
    qtbot.waitUntil(lambda: not tab.busy and tab.registration.text() != "", timeout=60_000)
    said = tab.registration.text()
    assert "3 of 3 boards registered" in said, said
    assert said.count("on its marks (4 of its 4 fiducials, edges agree 0.") == 3, said
    assert "Every board of a photo" in said

    tab.every_board.setChecked(True)
    tab.epochs.setValue(1)
    tab.teach_btn.click()
    qtbot.waitUntil(lambda: tab.taught is not None or tab.status.styleSheet() != "", timeout=600_000)
    assert tab.taught is not None, tab.status.text()
    assert [g["board"] for g in tab.taught.goldens] == [0, 1, 2]


def test_the_new_board_tab_imports_the_bottom_side_and_a_centroid_file_with_its_profile(qtbot, tmp_path: Path) -> None:
    """The side chosen is the side imported (the board seen from below, said in the summary's notes), and a
    centroid file is read with the profile given: a KiCad file of bottom parts only, its x negated as told."""
    from .test_bottom_side import BOARD

    (tmp_path / "b.brd").write_text(BOARD, encoding="utf-8")
    tab = new_board_tab(qtbot, tmp_path)
    tab.cad.setText(str(tmp_path / "b.brd"))
    tab.scale.setValue(20.0)
    tab.side.setCurrentText("bottom")
    tab.import_btn.click()
    qtbot.waitUntil(lambda: tab.rules_path is not None, timeout=30_000)
    assert "3 parts, 2 inspected" in tab.summary.text() and "note: the bottom side as its camera sees it" in \
        tab.summary.text()
    assert {p.ref for _c, p in load_rules(tab.rules_path).placements()} == {"Q2", "Q3"}

    (tmp_path / "b.pos").write_text("## Unit = mm, Angle = deg.\n# Ref  Val  Package  PosX  PosY  Rot  Side\n"
                                    "C1  1u  C_0603_1608Metric  -12.0  -8.0  0.0  bottom\n"
                                    "C2  1u  C_0603_1608Metric  -20.0  -8.0  90.0  bottom\n", encoding="utf-8")
    (tmp_path / "kicad.yaml").write_text("bottom_x: negated\n", encoding="utf-8")
    tab.cad.setText(str(tmp_path / "b.pos"))
    tab.profile.setText(str(tmp_path / "kicad.yaml"))
    tab.import_btn.click()
    qtbot.waitUntil(lambda: not tab.busy and "b.pos:" in tab.summary.text(), timeout=30_000)
    placed = {p.ref: p for _c, p in load_rules(tab.rules_path).placements()}
    # told negated: C1 at x 12 mm, C2 at 20 mm on the board; seen from below C2 is the left of the two
    assert set(placed) == {"C1", "C2"} and placed["C2"].x < placed["C1"].x
    tab.side.setCurrentText("top")
    tab.import_btn.click()
    qtbot.waitUntil(lambda: not tab.busy and "nothing to teach" in tab.status.text(), timeout=30_000)
    assert "no part is inspected from the top side" in tab.status.text()


def test_the_new_board_tab_imports_a_centroid_file_with_its_gerbers(qtbot, tmp_path: Path) -> None:
    """A placement file with the Gerbers beside it: the parts wear the Gerbers' pads (the summary's notes say so,
    the rule set draws them); Gerbers given with a board file are refused, with what to do."""
    cad = Path(__file__).parent / "cad"
    tab = imported_tab(qtbot, tmp_path, cad / "bodies-kicad9-pos.csv", gerber=cad / "bodies-kicad9-gerbers.zip")
    assert "pads from the Gerbers by the parts the Gerbers name" in tab.summary.text()
    rules = load_rules(tab.rules_path)
    assert {p.ref for _c, p in rules.placements()} >= {"U1", "U2", "J1", "J2", "D1"}
    assert "pads:" in tab.rules_path.read_text()
    tab.cad.setText(str(cad / "bodies-kicad9.kicad_pcb"))
    tab.import_btn.click()
    qtbot.waitUntil(lambda: not tab.busy and "leave the Gerbers out" in tab.status.text(), timeout=30_000)
    # a Gerber X3 set's folder imports alone; one without component layers asks for its placement file
    import zipfile

    for name in ("x3", "x2"):
        with zipfile.ZipFile(cad / f"bodies-kicad9-gerbers{'-x3' if name == 'x3' else ''}.zip") as z:
            z.extractall(tmp_path / name)
    tab.gerber.setText("")
    tab.cad.setText(str(tmp_path / "x2"))
    tab.import_btn.click()
    qtbot.waitUntil(lambda: not tab.busy and "without X3 component layers" in tab.status.text(), timeout=30_000)
    tab.cad.setText(str(tmp_path / "x3"))
    tab.import_btn.click()
    qtbot.waitUntil(lambda: not tab.busy and "x3: 16 parts, 10 inspected" in tab.summary.text(), timeout=30_000)
    assert {p.ref for _c, p in load_rules(tab.rules_path).placements()} >= {"U1", "U2", "J1", "J2", "D1"}


def test_the_new_board_tab_reads_a_board_through_its_bom(qtbot, tmp_path: Path) -> None:
    """The BOM beside the board: what it leaves off is not inspected, and the summary's notes say why."""
    cad = Path(__file__).parent / "cad"
    tab = imported_tab(qtbot, tmp_path, cad / "bodies-kicad9.kicad_pcb", bom=cad / "bodies-kicad9-bom.xlsx")
    assert "2 parts the BOM lists as not fitted are not placed: J2, U3" in tab.summary.text()
    placed = {p.ref for _c, p in load_rules(tab.rules_path).placements()}
    assert placed >= {"U1", "U2", "J1"} and not placed & {"J2", "U3"}
    tab.bom.setText(str(tmp_path / "missing.csv"))
    tab.import_btn.click()
    qtbot.waitUntil(lambda: not tab.busy and "missing.csv: cannot be read" in tab.status.text(), timeout=30_000)


def test_the_new_board_tab_imports_for_a_station_before_the_through_hole_parts(qtbot, tmp_path: Path) -> None:
    """Checked: the board's through-hole LED and header are not inspected, except the header named pin-in-paste
    (the field opens with the box); a name the board lacks is refused, with what to do."""
    cad = Path(__file__).parent / "cad"
    tab = new_board_tab(qtbot, tmp_path)
    assert not tab.pin_in_paste.isEnabled()
    tab.before_through_hole.setChecked(True)
    assert tab.pin_in_paste.isEnabled()
    tab.pin_in_paste.setText("J2")
    tab.cad.setText(str(cad / "bodies-kicad9.kicad_pcb"))
    tab.scale.setValue(10.0)
    tab.import_btn.click()
    qtbot.waitUntil(lambda: tab.rules_path is not None, timeout=30_000)
    assert "1 through-hole parts are not inspected: D1" in tab.summary.text()
    placed = {p.ref for _c, p in load_rules(tab.rules_path).placements()}
    assert "J2" in placed and "D1" not in placed
    tab.bom.setText(str(cad / "bodies-kicad9-bom.ods"))  # J2 is not fitted by the BOM: named, and left off
    tab.import_btn.click()
    qtbot.waitUntil(lambda: not tab.busy and "named pin-in-paste are not placed at all" in tab.summary.text(),
                    timeout=30_000)
    assert "1 parts named pin-in-paste are not placed at all (DNP, not on the BOM): J2" in tab.summary.text()
    tab.fitted_later.setText("U1")
    tab.import_btn.click()
    qtbot.waitUntil(lambda: not tab.busy and "fitted after this station" in tab.summary.text(), timeout=30_000)
    assert "U1" not in {p.ref for _c, p in load_rules(tab.rules_path).placements()}
    tab.fitted_later.setText("")
    tab.pin_in_paste.setText("J9")
    tab.import_btn.click()
    qtbot.waitUntil(lambda: not tab.busy and "J9 are not on this board" in tab.status.text(), timeout=30_000)


def test_the_dashboards_own_line_serves_profiles_and_removes_the_boards_installed_on_its_box(
        qtbot, demo, tmp_path: Path) -> None:  # noqa: ANN001
    """Without a kiosk: the dashboard's own line lists the boards installed in its data folder beside its configured
    one, changes over to one live (its own zoo), has its profiling measured, goes back and removes it; each change in
    the audit trail under the engineer's name; a line not running says so."""
    from inspector.app.installed_boards import boards_dir
    from ui.tabs.boards_panel import CONFIGURED
    from ui.tabs.rules import RulesTab

    from .test_gui import confirm_with

    root, zoo = demo
    configured = tmp_path / "cfg" / "mini.yaml"
    configured.parent.mkdir()
    configured.write_text(GOOD, encoding="utf-8")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "b.yaml").write_text(GOOD.replace("recipe: mini", "recipe: mini-b"), encoding="utf-8")
    install = [sys.executable, "-m", "inspector.cli", "--models", str(tmp_path / "unmeasured"), "board", "install",
               "--rules", str(tmp_path / "src" / "b.yaml"), "--zoo", str(zoo.root), "--local", "--data",
               str(tmp_path / "data"), "--backend", "torch"]
    done = subprocess.run(install, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "board b (recipe mini-b" in done.stdout, done.stderr
    assert "Routing rules tab" in done.stdout
    # prepared as a kiosk prepares a board it installs: what its first changeover profiles in a models folder that
    # never measured its architectures, and how to measure it at a quiet moment
    assert "its first changeover on torch profiles " in done.stdout and "*Profile now*" in done.stdout, done.stdout
    board = boards_dir(tmp_path / "data") / "b"
    again = subprocess.run([*install, "--reason", "x"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and "--reason goes with --kiosk" in again.stderr
    again = subprocess.run(install, capture_output=True, text=True, timeout=300)  # b is there: never overwritten
    assert again.returncode == 1 and "install this one under another name (--name)" in again.stderr, again.stderr
    setup = LineSetup(rules_path=configured, source="synthetic", boards=0, interval_s=0.05,
                      service=ServiceConfig(LineConfig(device_mb=40)))
    backend = LocalBackend(LineController(root / "models", tmp_path / "data", zoo=zoo), setup)
    backend.identity = ENGINEER
    rules_tab = RulesTab(backend)
    qtbot.addWidget(rules_tab)
    panel = rules_tab.boards
    assert panel is not None and "installed on this box" in panel.title()
    rules_tab.refresh({})
    listed = {panel.table.item(r, 0).text(): panel.table.item(r, 1).text() for r in range(panel.table.rowCount())}
    assert listed == {CONFIGURED: "mini.yaml", "b": "mini-b"}, listed
    assert panel.table.item(0, 4).text() == "next start"  # a line not running serves none
    said = pressed(qtbot, panel, panel.serve_btn, 1, "lot of b")  # the line is not running yet
    assert "the line is not running: start it to change its board" in said, said
    try:
        backend.start()
        qtbot.waitUntil(lambda: backend.controller.phase == "running", timeout=300_000)
        service = backend.controller.service
        panel.refresh()
        said = pressed(qtbot, panel, panel.serve_btn, 1, "lot of b")
        assert "board b served from the next board on: mini-b" in said and "this dashboard's next start" in said, said
        assert Path(service.line.zoo.root).resolve() == (board / "zoo").resolve()
        assert service.line.rules.recipe == "mini-b" and backend.setup.rules_path == board / "board" / "b.yaml"
        assert backend.controller.setup.rules_path == board / "board" / "b.yaml"  # a restart runs it too
        now = {panel.table.item(r, 0).text(): panel.table.item(r, 4).text() for r in range(panel.table.rowCount())}
        assert now == {CONFIGURED: "", "b": "served, next start"}, now
        assert not panel.remove_btn.isEnabled()  # served: not removed
        # the demo's architectures, profiled at the start: nothing measured
        said = pressed(qtbot, panel, panel.profile_btn, 1, "between lots")
        assert "board b: this box has a profile of each of its architectures" in said, said
        said = pressed(qtbot, panel, panel.serve_btn, 0, "back to mini")
        assert "the configured board served from the next board on" in said, said
        assert Path(service.line.zoo.root).resolve() == Path(zoo.root).resolve() and service.line.rules.recipe == "mini"
        said = pressed(qtbot, panel, panel.remove_btn, 1, "b is taught again")
        assert "board b removed from this box" in said and not board.exists(), said
        assert panel.table.rowCount() == 1 and not list(boards_dir(tmp_path / "data").glob("b"))
        # a package carried here (`board install --out`) installed from the panel, not served; not twice
        from inspector.app.board_package import pack_board

        (tmp_path / "src" / "c.yaml").write_text(GOOD.replace("recipe: mini", "recipe: mini-c"), encoding="utf-8")
        with open(tmp_path / "c.tar", "wb") as f:
            pack_board(tmp_path / "src" / "c.yaml", zoo.root, f)
        for _ in range(2):
            confirm_with("lot of c next week")
            panel.install(tmp_path / "c.tar")
            qtbot.waitUntil(lambda: not panel.busy, timeout=120_000)
            said = panel.status.text()
            if _ == 0:
                assert "board c (mini-c " in said and "installed on this box, not served" in said, said
                assert panel.table.rowCount() == 2 and service.line.rules.recipe == "mini"
        assert "a board c is installed already on this box: remove the installed one first" in said, said
        trail = backend.audit()
        assert [(e.kind, e.subject, e.actor) for e in trail.events(kind="board.serve", newest_first=False)] == [
            ("board.serve", "b", "erin"), ("board.serve", "configured", "erin")]
        assert [e.reason for e in trail.events(kind="board.remove")] == ["b is taught again"]
        assert [(e.subject, e.reason) for e in trail.events(kind="board.install")] == [("c", "lot of c next week")]
        assert trail.events(kind="board.profile") == []  # nothing measured: nothing to record
    finally:
        backend.close(120)
