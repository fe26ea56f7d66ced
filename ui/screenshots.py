"""Screenshots of every dashboard tab at 1366x768 (a panel PC), in a real window under Xvfb, while the demo line runs.

    python -m ui.screenshots --out screenshots/          # starts Xvfb itself when there is no display

Builds the demo experts first when they are not there yet (it says so; about 14 minutes on 2 cores,
once; Ctrl+C stops the training at once and the next run resumes from the experts already trained),
then runs the demo line (board_a, synthetic boards), lets the charts fill, estimates an allocation edit and runs the
planner, searches the history, moves a detector's threshold on the expert versions tab (the demo zoo's manifest
written back after), shows a rule error at its line, chats with
the demo MoE model when one is built, and saves one PNG of the whole screen
per tab. With no display set it needs Debian's xvfb and the X libraries Qt's xcb plugin loads:
    apt-get install -y xvfb libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 \
        libxcb-shape0 libxcb-xkb1 libxcb-randr0 libxkbcommon-x11-0
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from inspector.paths import models_dir

SIZE = (1366, 768)


def _under_xvfb(argv: list[str]) -> int:
    xvfb = shutil.which("xvfb-run")
    if xvfb is None:
        print("no display and no xvfb-run: install the packages named in `python -m ui.screenshots --help`",
              file=sys.stderr)
        return 2
    cmd = [xvfb, "-a", "-s", f"-screen 0 {SIZE[0]}x{SIZE[1]}x24", sys.executable, "-m", "ui.screenshots", *argv]
    return subprocess.call(cmd, env={**os.environ, "QT_QPA_PLATFORM": "xcb"})


def _wait(app, until: Callable[[], bool], timeout: float) -> bool:  # noqa: ANN001 - the QApplication
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        app.processEvents()
        if until():
            return True
        time.sleep(0.03)
    return until()


def _camera_line(setup, data: Path, say: Callable[[str], None]):  # noqa: ANN001, ANN202 - a LineSetup
    """The setup on pypylon's emulated camera running free over a conveyor of the demo board (frames written
    for the emulator to play), with the board gate and an OPC UA server on loopback."""
    import cv2

    from inspector.app.plc_link import PlcConfig
    from inspector.camera.conveyor import conveyor_frames
    from inspector.routing.rules import load_rules

    os.environ.setdefault("PYLON_CAMEMU", "1")
    rules = load_rules(setup.rules_path)
    folder = data / "conveyor"
    folder.mkdir(parents=True, exist_ok=True)
    frames, _ = conveyor_frames(rules, 10, seed=11, still=3, slide=1, gap=1)
    for i, frame in enumerate(frames):
        cv2.imwrite(str(folder / f"{i:04d}.png"), frame)
    say(f"an emulated GenICam camera plays {len(frames)} conveyor frames of {rules.recipe} at 6 fps (a board a "
        "second, which this box's line keeps up with beside the dashboard)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = {"ImageFilename": str(folder), "Width": rules.board_size[0], "Height": rules.board_size[1],
                "PixelFormat": "BGR8", "AcquisitionFrameRate": 6, "ExposureTime": 2000}
    plc = PlcConfig(opcua=f"opc.tcp://127.0.0.1:{port}/inspector", opcua_anonymous=True, cert_dir=data / "opcua")
    return replace(setup, source="genicam:0", camera=None, camera_settings=settings, plc=plc,
                   service=replace(setup.service, overflow="drop-oldest"))


def _move_a_threshold(app, window) -> None:  # noqa: ANN001 - the QApplication, the MainWindow
    """Move the shared polarity detector's threshold from the versions tab on the running line, as an engineer does
    (the confirmation answered with a reason): the versions and audit tabs then show a change made live."""
    from PySide6.QtCore import QTimer

    from .confirm import ConfirmChange

    tab = window.versions
    window.tabs.setCurrentWidget(tab)
    _wait(app, lambda: tab.expert.count() > 0, 10)
    if tab.expert.findText("det-polarity") < 0:
        return

    def answer() -> None:
        dialog = app.activeModalWidget()
        if not isinstance(dialog, ConfirmChange):
            QTimer.singleShot(50, answer)
            return
        dialog.reason.setText("reversed diodes of the new reel called unverified")
        dialog.ok.click()

    tab.expert.setCurrentText("det-polarity")
    QTimer.singleShot(0, answer)
    tab.point.setValue(round(tab.point.value() - 0.05, 3))
    tab.operate()


def shoot(args: argparse.Namespace) -> int:
    from PySide6.QtWidgets import QApplication

    from inspector.app.controller import LineController, LineSetup
    from inspector.app.line import LineConfig
    from inspector.app.service import ServiceConfig

    from .backend import LocalBackend
    from .qt_env import qt_environment
    from .tabs.llm import demo_model
    from .window import MainWindow

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    models = Path(args.models)
    data = Path(args.data or tempfile.mkdtemp(prefix="inspector-shots-"))
    # the experts before the window: a line started on an untrained zoo would wait for the build behind the GUI
    from inspector.app.run import demo_zoo
    from inspector.training.demo_zoo import RECIPE

    say = lambda m: print(m, flush=True)  # noqa: E731
    say(f"demo experts under {models / 'demo'} (trained now if missing: about 14 minutes on 2 cores, once; "
        f"recipe version {RECIPE['version']})")
    manifest = demo_zoo(models, say).root / "manifest.json"
    kept = manifest.read_bytes()
    # a throwaway settings file: the shots start from the default layout, not from this user's last session
    os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="inspector-shots-settings-")
    qt_environment()
    app = QApplication.instance() or QApplication([sys.argv[0]])
    setup = LineSetup(source="synthetic", boards=0, interval_s=args.interval, camera="realistic",
                      service=ServiceConfig(LineConfig(device_mb=args.device_mb)))
    if not args.synthetic:  # the line as it runs on a conveyor: an emulated GenICam camera, the gate, OPC UA
        setup = _camera_line(setup, data, say)
    backend = LocalBackend(LineController(models, data, say=say), setup)
    window = MainWindow(backend, models)
    window.showMaximized()  # the whole 1366x768 screen, title bar and menus included
    _wait(app, lambda: False, 0.5)
    screen = app.primaryScreen()
    shots = []
    page = window.sign_in  # a fresh data directory: nobody yet, so the first admin is made here
    page.name.setText("ada")
    _wait(app, lambda: False, 0.5)
    shots.append(out / "0-sign-in.png")
    screen.grabWindow(0).save(str(shots[-1]))
    page.password.setText("shots-admin-1")
    page.again.setText("shots-admin-1")
    page.submit()
    backend.start()
    print(f"line starting; charts fill for {args.seconds:.0f} s", flush=True)
    if not _wait(app, lambda: window.last.get("boards", 0) >= 3, 1800):
        print(f"the line did not start: {window.last.get('controller')}", file=sys.stderr)
        return 1
    _wait(app, lambda: False, args.seconds)

    memory = window.memory
    window.tabs.setCurrentWidget(memory)  # a tab reads the line when it is on screen
    _wait(app, lambda: memory.pool_mb.value() > 1, 10)
    memory.pool_mb.setValue(memory.pool_mb.value() - 40)
    memory.estimate()
    memory.run_planner()
    _wait(app, lambda: memory.estimate_btn.isEnabled() and memory.plan_btn.isEnabled(), 600)
    memory.apply()  # a change for the audit tab to show, under the signed-in name
    window.tabs.setCurrentWidget(window.line)
    window.history.verdict.setCurrentText("fail")
    window.history.search()
    window.history.table.setCurrentCell(0, 0)
    window.history.review_bar.review("confirmed")
    _move_a_threshold(app, window)  # the versions tab on a running line: a detector's threshold moved live

    llm = window.llm
    model = demo_model(models)
    if model is not None:
        llm.model.setText(str(model))
        job = llm.load()
        _wait(app, lambda: job is not None and not job.running, 900)
        llm.prompt.setPlainText('def read_lines(path):\n    """Return the lines of a text file."""')
        llm.send()
        _wait(app, lambda: not llm.busy and llm.send_btn.isEnabled(), 300)
    else:
        print("no demo MoE model under models/llm (inspector llm build-demo): the LLM tab is shot empty")

    for i in range(window.tabs.count()):
        window.tabs.setCurrentIndex(i)
        _wait(app, lambda: False, 1.2)
        name = window.tabs.tabText(i).replace("&&", "and").lower().replace(" ", "-")
        path = out / f"{i + 1}-{name}.png"
        screen.grabWindow(0).save(str(path))
        shots.append(path)
    rules = window.rules
    rules.editor.setPlainText(rules.editor.toPlainText().replace("shape: diode", "shape: diodee", 1))
    rules.validate()
    window.tabs.setCurrentIndex(2)
    _wait(app, lambda: False, 1.0)
    path = out / "3b-routing-rules-error.png"
    screen.grabWindow(0).save(str(path))
    shots.append(path)
    # what Save and apply asks first: the diff against the running set, and a reason
    from .confirm import ConfirmChange, unified

    running = backend.rules_document()
    fixed = rules.editor.toPlainText().replace("shape: diodee", "shape: diode", 1)
    edited = fixed.replace("threshold: 0.5", "threshold: 0.45", 1)
    dialog = ConfirmChange(window, "Apply the edited rule set", "the edited set replaces the running one on the "
                           "line from the next board on, recorded under your name with the reason below.",
                           unified(running[1] if running else None, edited, "board_a.yaml"))
    dialog.reason.setText("ECN-12: fewer false calls on the diodes")
    dialog.show()
    _wait(app, lambda: False, 1.0)
    path = out / "3c-routing-rules-confirm.png"
    screen.grabWindow(0).save(str(path))
    shots.append(path)
    dialog.reject()
    window.close()  # the line stops
    manifest.write_bytes(kept)  # the threshold moved for the shots: the demo zoo left byte for byte as found
    for p in shots:
        print(p)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="python -m ui.screenshots", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="screenshots", help="folder for the PNGs (default ./screenshots)")
    p.add_argument("--models", default=str(models_dir()), help="models directory (default: the product's)")
    p.add_argument("--data", help="data directory for the demo line (default: a new temporary one)")
    p.add_argument("--seconds", type=float, default=40.0, help="seconds of charts before the shots (default 40)")
    p.add_argument("--interval", type=float, default=0.0, help="seconds between synthetic boards (default 0)")
    p.add_argument("--device-mb", type=float, default=160.0)
    p.add_argument("--synthetic", action="store_true",
                   help="feed the line synthetic boards (default: an emulated GenICam camera over a conveyor)")
    args = p.parse_args(argv)
    if not os.environ.get("DISPLAY"):
        return _under_xvfb(argv)
    rc = shoot(args)
    # the PNGs are written and the line is stopped; skip the interpreter's teardown, where PySide6 and pyqtgraph
    # objects freed in an arbitrary order can abort (none_dealloc) after everything that matters is done
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


if __name__ == "__main__":
    raise SystemExit(main())
