"""The dashboard window: its tabs over one backend, one timer reading one snapshot per tick, behind a sign-in.

Nobody sees the tabs before signing in (session.py); what the tabs offer follows from the signed-in role (an
operator reviews, an engineer also changes rules, memory, experts and the camera), and every change goes into the
audit trail under that name. After IDLE_S without input the window locks; the line runs on meanwhile.

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
from PySide6.QtWidgets import QApplication, QLabel, QMainWindow, QStackedWidget, QTabWidget

from inspector.access.identity import Identity

from . import menus, window_state
from .review_bar import ReviewBar
from .session import IDLE_S, IdleLock, SignInPage
from .tabs.audit import AuditTab
from .tabs.history import HistoryTab
from .tabs.line_io import LineIoTab
from .tabs.line_view import LineViewTab
from .tabs.llm import LlmTab
from .tabs.memory import MemoryTab
from .tabs.new_board import NewBoardTab
from .tabs.plant import PlantTab
from .tabs.rules import RulesTab
from .tabs.throughput import ThroughputTab
from .tabs.versions import VersionsTab

TICK_MS = 200  # 5 Hz
SLOW_EVERY = 5  # ticks: once a second
CLOSE_TIMEOUT_S = 120.0


class MainWindow(QMainWindow):
    def __init__(self, backend: Any, models_dir: Path, llm_model: Path | None = None,
                 plant_kiosks: list[str] | None = None, identity: Identity | None = None,
                 idle_s: float = IDLE_S) -> None:
        super().__init__()
        self.backend = backend
        self.setWindowTitle("Inspection dashboard — " + backend.label)
        self.tabs = QTabWidget()
        self.line = LineViewTab(backend)
        self.throughput = ThroughputTab()
        self.rules = RulesTab(backend)
        self.memory = MemoryTab(backend)
        self.versions = VersionsTab(backend)
        self.history = HistoryTab(backend)
        self.io = LineIoTab(backend)
        self.plant = PlantTab(backend, plant_kiosks or [])
        self.llm = LlmTab(models_dir, llm_model, borrow=getattr(backend, "llm_loan", None),
                          person_token=lambda: getattr(backend, "session_token", None))
        self.audit = AuditTab(backend)
        self.new_board = NewBoardTab(backend, Path(models_dir) / "boards")
        for tab, name in ((self.line, "Line"), (self.throughput, "Throughput && experts"),
                          (self.rules, "Routing rules"), (self.memory, "Memory && executors"),
                          (self.history, "History"), (self.llm, "Language model"), (self.io, "Camera && PLC"),
                          (self.plant, "Plant"), (self.new_board, "New board"),
                          (self.versions, "Expert versions"), (self.audit, "Audit")):
            self.tabs.addTab(tab, name)
        self.sign_in = SignInPage(backend, self.signed_in)
        self.pages = QStackedWidget()
        self.pages.addWidget(self.sign_in)
        self.pages.addWidget(self.tabs)
        self.setCentralWidget(self.pages)
        self.who = QLabel("nobody signed in")
        self.state = QLabel("")
        self.statusBar().addPermanentWidget(self.who)
        self.statusBar().addPermanentWidget(self.state)
        self.idle = IdleLock(QApplication.instance(), idle_s, self.lock)
        self._ticks = 0
        self.timer = QTimer(self, interval=TICK_MS)
        self.timer.timeout.connect(self.tick)
        self.last: dict[str, Any] = {}
        self._switched = False
        self.tabs.currentChanged.connect(self._tab_changed)
        self.actions_by_name = menus.install(self)
        window_state.restore(self)
        if identity is not None:
            self.signed_in(identity)
        else:
            self.pages.setCurrentWidget(self.sign_in)
        self.tick()  # the controls' state from the first frame on
        self.timer.start()

    # -- who is at the panel ------------------------------------------------------------------------
    def signed_in(self, who: Identity) -> None:
        """Show the tabs with what `who` may do."""
        self.backend.identity = who
        self.who.setText(f"signed in: {who.name} ({who.role})")
        for part in (self.rules, self.memory, self.versions, self.new_board, *self.findChildren(ReviewBar)):
            part.permit()
        self.pages.setCurrentWidget(self.tabs)
        self.idle.arm()
        self.statusBar().showMessage(f"{who.name} signed in as {who.role}", 5000)

    def lock(self) -> None:
        """Hide the tabs until someone signs in (idle, or Ctrl+L); the line runs on."""
        who = self.backend.identity
        sign_out = getattr(self.backend, "sign_out", None)
        if sign_out is not None:
            sign_out()  # attached: the session token is revoked at the kiosk
        self.backend.identity = None
        self.idle.disarm()
        self.who.setText("locked" if who else "nobody signed in")
        self.sign_in.reset(locked_by=who.name if who else None)
        self.pages.setCurrentWidget(self.sign_in)

    def save_rules(self) -> None:
        """Ctrl+S: the rules tab's text saved and applied after its diff is confirmed with a reason (the tab comes
        forward, so its answer is seen)."""
        if self.pages.currentWidget() is not self.tabs:
            return
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
        shown = self.tabs.currentWidget() if self.pages.currentWidget() is self.tabs else None
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
            if shown is self.audit and not self.audit.events:
                self.audit.read()
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
