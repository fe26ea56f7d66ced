"""`inspector gui`: the operator dashboard, on a line of its own or attached to a running kiosk."""
from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from inspector.app.controller import LineController, LineSetup
from inspector.app.line import LineConfig
from inspector.app.run import RULES_DIR
from inspector.app.service import ServiceConfig
from inspector.cli.common import backend_of, comma_list
from inspector.logs import say_for
from inspector.paths import data_dir, models_dir

from .attached import AttachedBackend
from .backend import LocalBackend
from .garbage import GuiThreadCollector
from .qt_env import qt_environment
from .window import MainWindow


def _camera_settings(path: str | None) -> dict | None:
    if not path:
        return None
    from inspector.yamlio import load_yaml

    return load_yaml(Path(path).read_text(encoding="utf-8"), path) or {}


def _plc(args: argparse.Namespace, data: Path):  # noqa: ANN202 - the PlcConfig of --opcua / --modbus, or None
    from inspector.cli.common import plc_config_of

    return plc_config_of(args, data)


def local_backend(args: argparse.Namespace) -> LocalBackend:
    models, data = models_dir(args.models), data_dir(args.data)
    zoo = None
    if args.zoo:
        from inspector.experts.zoo import Zoo

        zoo = Zoo.load(Path(args.zoo))
    line = LineConfig(line=args.line, station=args.station, policy=args.policy, device_mb=args.device_mb,
                      register=not args.no_register, backend=backend_of(args))
    setup = LineSetup(rules_path=Path(args.rules) if args.rules else RULES_DIR / "board_a.yaml", source=args.source,
                      boards=args.boards, seed=args.seed, interval_s=args.interval, defect_rate=args.defect_rate,
                      camera=args.camera, service=ServiceConfig(line, keep_crops=args.keep_crops),
                      camera_settings=_camera_settings(args.camera_settings), gate=args.gate, plc=_plc(args, data))
    return LocalBackend(LineController(models, data, args.db, zoo, say=say_for(logging.getLogger("inspector.gui"))),
                        setup, **({"llm_mb": args.llm_mb} if args.llm_mb is not None else {}))


def run(args: argparse.Namespace) -> int:
    qt_environment()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Inspection dashboard")
    GuiThreadCollector(app).start()  # Qt objects are freed in the GUI thread, never in a line thread
    if args.attach:
        from inspector.endpoint import read_token

        backend = AttachedBackend(args.attach, args.db, token=read_token(args.token_file))
    else:
        backend = local_backend(args)
    app.setOrganizationName("inspector")
    window = MainWindow(backend, models_dir(args.models), Path(args.llm_model) if args.llm_model else None,
                        plant_kiosks=comma_list(args.plant_kiosks), idle_s=args.idle_lock_min * 60)
    window.show()  # at the size and tab of the last start, or fitted to this screen (window_state.py)
    if args.start and backend.can_control:
        backend.start()
    # Ctrl+C in the terminal or a SIGTERM: close the window, which drains and flushes like the kiosk.
    # (Python runs signal handlers between Qt events; the window's 5 Hz timer provides them.)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: QTimer.singleShot(0, window.close))
    return app.exec()
