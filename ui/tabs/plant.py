"""The plant tab: every line at a glance, from the shared results database and each kiosk's own answer.

What `inspector plant status` prints (inspector/app/plant.py), read off the GUI thread every few seconds while
the tab is on screen. The kiosks come from `inspector gui --plant-kiosks URL,...`; without them, the lines the
database knows are shown with what the database says.
"""
from __future__ import annotations

from typing import Any

from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inspector.app.plant import LineRow, plant_status, table_cells, where
from inspector.results.store import ResultStore

from ..worker import Job

COLUMNS = ("Line", "Station", "State", "Health", "Boards/min", "Yield %", "False calls", "Experts", "Last board",
           "Kiosk")
REFRESH_EVERY = 5  # slow ticks (seconds) between reads
BAD = {"unreachable", "critical", "stalled", "stopping"}


class PlantTab(QWidget):
    def __init__(self, backend: Any, kiosks: list[str]) -> None:
        super().__init__()
        self.backend, self.kiosks = backend, kiosks
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.refresh_btn = QPushButton("Refresh")
        self.refresh_btn.clicked.connect(self.read)
        top = QHBoxLayout()
        top.addWidget(QLabel(f"{len(kiosks)} kiosk(s) named (--plant-kiosks); boards/min and yield over the last "
                             "hour, from the results database"), 1)
        top.addWidget(self.refresh_btn)
        v = QVBoxLayout(self)
        v.addLayout(top)
        v.addWidget(self.table, 1)
        v.addWidget(self.status)
        self.rows: list[LineRow] = []
        self._job: Job | None = None
        self._slow = 0

    def refresh_slow(self) -> None:
        """Called once a second while the tab is shown: a read every REFRESH_EVERY seconds."""
        self._slow += 1
        if self._slow % REFRESH_EVERY == 1:
            self.read()

    def read(self) -> None:
        if self._job is not None and self._job.running:
            return
        store = self.backend.store()
        store = store if isinstance(store, ResultStore) else None  # a kiosk's API has its line only: no database
        self._job = Job(lambda: plant_status(store, self.kiosks), name="plant-status")
        self._job.done.connect(self.show_rows)
        self._job.failed.connect(lambda m: self.status.setText(f"cannot read the plant: {m}"))
        self._job.start()

    def show_rows(self, rows: list[LineRow]) -> None:
        self.rows = rows
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, value in enumerate(table_cells(row)):
                item = QTableWidgetItem(value)
                if c in (2, 3) and value in BAD:
                    item.setForeground(QColor("#c62828"))
                self.table.setItem(r, c, item)
        notes = [f"{where(r)}: {r.detail}" for r in rows if r.detail]
        self.status.setText("\n".join(notes) if notes else f"{len(rows)} line(s), all answering")
