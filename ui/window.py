"""The dashboard window: eight tabs over one backend, one timer reading one snapshot per tick.

The GUI never waits on the line: the line runs on its own threads and the
timer (5 Hz) reads a snapshot of plain counters; slower reads (the database,
the experts table) happen once a second, and only the tab on screen is drawn:
on a 2-core box every redraw is CPU the line does not get. Closing the window stops the line
the way SIGTERM stops the kiosk: no new boards, what was accepted is
inspected, the engine drains and the results are flushed, then the window goes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QApplication, QLabel, QMainWindow, QTabWidget

from . import menus, window_state
from .tabs.history import HistoryTab
from .tabs.line_io import LineIoTab
from .tabs.line_view import LineViewTab
from .tabs.llm import LlmTab
from .tabs.memory import MemoryTab
from .tabs.plant import PlantTab
from .tabs.rules import RulesTab
from .tabs.throughput import ThroughputTab

TICK_MS = 200  # 5 Hz
SLOW_EVERY = 5  # ticks: once a second
CLOSE_TIMEOUT_S = 120.0


class MainWindow(QMainWindow):
    def __init__(self, backend: Any, models_dir: Path, llm_model: Path | None = None,
                 plant_kiosks: list[str] | None = None) -> None:
        super().__init__()
        self.backend = backend
        self.setWindowTitle("Inspection dashboard — " + backend.label)
        self.tabs = QTabWidget()
        self.line = LineViewTab(backend)
        self.throughput = ThroughputTab()
        self.rules = RulesTab(backend)
        self.memory = MemoryTab(backend)
        self.history = HistoryTab(backend)
        self.io = LineIoTab(backend)
        self.plant = PlantTab(backend, plant_kiosks or [])
        self.llm = LlmTab(models_dir, llm_model, borrow=getattr(backend, "llm_loan", None))
        for tab, name in ((self.line, "Line"), (self.throughput, "Throughput && experts"),
                          (self.rules, "Routing rules"), (self.memory, "Memory && executors"),
                          (self.history, "History"), (self.llm, "Language model"), (self.io, "Camera && PLC"),
                          (self.plant, "Plant")):
            self.tabs.addTab(tab, name)
        self.setCentralWidget(self.tabs)
        self.state = QLabel("")
        self.statusBar().addPermanentWidget(self.state)
        self._ticks = 0
        self.timer = QTimer(self, interval=TICK_MS)
        self.timer.timeout.connect(self.tick)
        self.last: dict[str, Any] = {}
        self._switched = False
        self.tabs.currentChanged.connect(self._tab_changed)
        self.actions_by_name = menus.install(self)
        window_state.restore(self)
        self.tick()  # the controls' state from the first frame on
        self.timer.start()

    def save_rules(self) -> None:
        """Ctrl+S: the rules tab's text saved and applied (the tab comes forward, so its answer is seen)."""
        self.tabs.setCurrentWidget(self.rules)
        if self.backend.can_edit:
            self.rules.apply()

    def export_results(self) -> None:
        self.tabs.setCurrentWidget(self.history)
        self.history.export()

    def refresh_now(self) -> None:
        """F5: read everything now, the slow parts (database, experts) included."""
        self._switched = True
        self.tick()
        if self.tabs.currentWidget() is self.history:
            self.history.search()

    def about_text(self) -> str:
        from inspector import __version__

        return (f"Board inspection appliance {__version__}\n{self.backend.label}\n\nCtrl+S save and apply rules · "
                f"F5 refresh · Ctrl+1..{self.tabs.count()} tabs · Ctrl+Q quit")

    def tick(self) -> None:
        """Read one snapshot; redraw only the tab on screen (drawing hidden charts costs the line CPU)."""
        snap = self.backend.snapshot()
        self.last = snap
        shown = self.tabs.currentWidget()
        self.line.refresh(snap)
        if "engine" in snap:
            self.throughput.refresh(snap, draw=shown is self.throughput)
            if shown is self.memory:
                self.memory.refresh(snap)
        if shown is self.rules:
            self.rules.refresh(snap)
        if shown is self.io:
            self.io.refresh(snap)
        self._ticks += 1
        if self._ticks % SLOW_EVERY == 1 or self._switched:
            self._switched = False
            if shown is self.line:
                self.line.refresh_slow()
            if shown is self.throughput and "engine" in snap:
                self.throughput.refresh_slow(snap)
            if shown is self.io:
                self.io.refresh_slow()
            if shown is self.plant:
                self.plant.refresh_slow()
        ctl = snap.get("controller") or {}
        tp = (snap.get("throughput") or {}).get("parts_per_s")
        self.state.setText(f"{ctl.get('phase', snap.get('state', '?'))}"
                           + (f" · {snap.get('boards', 0)} boards · {tp:.1f} parts/s" if tp is not None else ""))

    def _tab_changed(self, _index: int) -> None:
        self._switched = True
        self.tick()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt's name
        """Drain and flush like the kiosk's SIGTERM before the window goes."""
        window_state.save(self)
        self.timer.stop()
        if self.backend.can_control and self.backend.controller.busy:
            self.statusBar().showMessage("stopping: inspecting the accepted boards and flushing the results…")
            QApplication.processEvents()
        self.llm.close_session()
        if not self.backend.close(CLOSE_TIMEOUT_S):
            self.statusBar().showMessage("the line did not drain in time; results not yet written stay spooled")
        event.accept()
