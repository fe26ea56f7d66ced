"""The audit tab: who changed what on this line (and the plant's other lines), before and after, and why; a check
of the trail's hash chain. Read off the GUI thread, from the results database or, attached, the kiosk's API.
Nobody changes the trail here: it is append-only everywhere."""
from __future__ import annotations

from typing import Any

from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inspector.access.audit import KINDS

from ..worker import Job

COLUMNS = ("When (UTC)", "Who", "Role", "Change", "Subject", "Before", "After", "Reason", "Line", "From")
LIMIT = 300


class AuditTab(QWidget):
    def __init__(self, backend: Any) -> None:
        super().__init__()
        self.backend = backend
        self.kind = QComboBox()
        self.kind.addItems(["every change", *sorted({k.split(".")[0] + ".*" for k in KINDS if "." in k}), *KINDS])
        self.kind.currentIndexChanged.connect(lambda _i: self.read())
        self.refresh_btn, self.verify_btn = QPushButton("Refresh"), QPushButton("Verify the chain")
        self.refresh_btn.clicked.connect(self.read)
        self.verify_btn.clicked.connect(self.verify)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        for column, width in ((0, 150), (4, 200), (5, 220), (6, 220), (7, 200)):
            self.table.setColumnWidth(column, width)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        top = QHBoxLayout()
        top.addWidget(QLabel("Show"))
        top.addWidget(self.kind)
        top.addStretch(1)
        top.addWidget(self.refresh_btn)
        top.addWidget(self.verify_btn)
        v = QVBoxLayout(self)
        v.addLayout(top)
        v.addWidget(self.table, 1)
        v.addWidget(self.status)
        self.events: list[Any] = []
        self._job: Job | None = None

    def _kind(self) -> str | None:
        return None if self.kind.currentIndex() == 0 else self.kind.currentText()

    def read(self) -> None:
        if self._job is not None and self._job.running:
            return
        kind = self._kind()
        self._job = Job(lambda: self.backend.audit().events(kind, None, LIMIT), name="audit-read")
        self._job.done.connect(self.show_events)
        self._job.failed.connect(lambda m: self.status.setText(f"cannot read the audit trail: {m}"))
        self._job.start()

    def show_events(self, events: list[Any]) -> None:
        self.events = events
        self.table.setRowCount(len(events))
        for r, e in enumerate(events):
            cells = (f"{e.at:%Y-%m-%d %H:%M:%S}", e.actor, e.role, e.kind, e.subject, e.before or "", e.after or "",
                     e.reason or "", f"{e.line}/{e.station}", e.origin)
            for c, value in enumerate(cells):
                item = QTableWidgetItem(str(value))
                item.setToolTip(str(value))  # before and after are JSON: the whole of it on hover
                self.table.setItem(r, c, item)
        self.status.setText(f"{len(events)} change(s), newest first" + (" (the newest shown)" if len(events) >= LIMIT
                                                                        else ""))

    def verify(self) -> None:
        self._job = Job(lambda: self.backend.audit().verify(), name="audit-verify")
        self._job.done.connect(self.show_verdict)
        self._job.failed.connect(lambda m: self.status.setText(f"cannot verify: {m}"))
        self._job.start()

    def show_verdict(self, v: Any) -> None:
        if v.intact:
            self.status.setText(f"chain intact: {v.rows} rows, head {v.head[:16]}…")
            self.status.setStyleSheet("")
            return
        where = "; ".join(f"row {b.row_id}: {b.why}" for b in v.broken)
        self.status.setText(f"THE TRAIL WAS TAMPERED WITH: {where}")
        self.status.setStyleSheet(f"color: {QColor('#c62828').name()}; font-weight: bold;")
