"""The boards a line may serve, on the Routing rules tab: the configured board and each board installed on the line's
box (`board install`: on the kiosk a dashboard is attached to, or in the data folder of the dashboard's own line),
which one the line serves and which one a kiosk's next start runs; an engineer changes the line over to one now (at
a board boundary, with its own zoo), has what its first changeover would measure measured at a quiet moment (`board
profile`), or removes one. `backend.boards_home` names where they are installed."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from inspector.app.board_switch import board_said

from ..confirm import ConfirmChange
from ..style import status_style
from ..worker import OneJobAtATime

COLUMNS = ("Board", "Recipe", "Version", "Packed", "Now")
CONFIGURED = "(configured)"


class BoardsPanel(QGroupBox, OneJobAtATime):
    job_name = "boards-panel"

    def __init__(self, backend: Any) -> None:
        self.home = getattr(backend, "boards_home", "the kiosk")
        super().__init__(f"Boards on this line: the configured one and those installed on {self.home}")
        self.backend = backend
        self.doc: dict[str, Any] | None = None
        self.asked = False  # the line was asked once (the tab asks when first shown; then Refresh and each change)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._enable)
        self.refresh_btn = QPushButton("Refresh")
        self.serve_btn = QPushButton("Serve it now")
        self.remove_btn = QPushButton("Remove")
        self.install_btn = QPushButton("Install package…")
        self.install_btn.setToolTip("a board package carried here (`inspector board install --out`): installed, not "
                                    "served")
        self.profile_btn = QPushButton("Profile now")
        self.profile_btn.setToolTip("measure now, at a quiet moment, what this board's first changeover would "
                                    "measure (new boards wait meanwhile)")
        self.refresh_btn.clicked.connect(self.refresh)
        self.serve_btn.clicked.connect(self.serve)
        self.profile_btn.clicked.connect(self.profile)
        self.remove_btn.clicked.connect(self.remove)
        self.install_btn.clicked.connect(lambda: self.install())
        self.status = QLabel("")
        self.status.setWordWrap(True)
        buttons = QHBoxLayout()
        for b in (self.serve_btn, self.profile_btn, self.remove_btn, self.install_btn, self.refresh_btn):
            buttons.addWidget(b)
        buttons.addStretch(1)
        v = QVBoxLayout(self)
        v.addWidget(self.table)
        v.addLayout(buttons)
        v.addWidget(self.status)
        self._enable()

    def refresh(self) -> None:
        """The line's boards as it lists them now (a kiosk's GET /boards)."""
        self.asked = True
        try:
            self.doc = self.backend.boards()
        except (RuntimeError, ValueError) as exc:
            self._say(str(exc), error=True)
            return
        rules = (self.doc.get("configured") or {}).get("rules") or ""
        rows: list[tuple[str, ...]] = [(CONFIGURED, rules, "", "", self._now(None))]
        for b in self.doc["boards"]:
            if "damaged" in b:
                rows.append((b["board"], "damaged", "", "", b["damaged"]))
                continue
            rows.append((b["board"], str(b["recipe"]), str(b["version"]), str(b["packed"]), self._now(b["board"])))
        self.table.setRowCount(len(rows))
        for i, row in enumerate(rows):
            for j, value in enumerate(row):
                self.table.setItem(i, j, QTableWidgetItem(value))
        self._enable()

    def _now(self, board: str | None) -> str:
        assert self.doc is not None
        served = self.doc["serving"] if self.doc.get("running", True) else ()  # a stopped line serves none
        return ", ".join(w for w, name in (("served", served), ("next start", self.doc["next"])) if name == board)

    def selected(self) -> str | None:
        """The board of the selected row: its name, CONFIGURED, or None when no row is."""
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        return self.table.item(rows[0].row(), 0).text() if rows else None

    def permit(self) -> None:
        self._enable()

    def _enable(self) -> None:
        chosen = self.selected()
        row = self.table.currentRow()
        now = self.table.item(row, 4).text() if chosen is not None and self.table.item(row, 4) else ""
        may = self.backend.can_edit and not self.busy
        self.serve_btn.setEnabled(may and chosen is not None and "served" not in now)
        self.remove_btn.setEnabled(may and chosen not in (None, CONFIGURED) and not now)
        recipe = self.table.item(row, 1) if chosen is not None else None
        damaged = recipe is not None and recipe.text() == "damaged"
        self.profile_btn.setEnabled(may and chosen not in (None, CONFIGURED) and not damaged)
        self.install_btn.setEnabled(may and hasattr(self.backend, "install_package"))
        self.refresh_btn.setEnabled(not self.busy)

    def serve(self) -> None:
        """After a reason is given: the line changes over to the selected board from its next board on."""
        chosen = self.selected()
        if chosen is None:
            return
        board = None if chosen == CONFIGURED else chosen
        said = board_said(board)
        self._after_reason(f"Serve {said}", f"The line changes over to {said} (its rule set and its own experts) at "
                           "its next board boundary, and starts on it next time; recorded under your name with the "
                           "reason below.", "not served: cancelled; the line serves its board still",
                           f"changing the line over to {said}…", lambda reason: self.backend.serve_board(board, reason))

    def profile(self) -> None:
        """After a reason is given: the selected board's architectures the line's box never profiled measured now,
        its line held empty meanwhile."""
        chosen = self.selected()
        if chosen in (None, CONFIGURED):
            return
        self._after_reason(f"Profile board {chosen}", f"What board {chosen}'s first changeover would measure is "
                           "measured now: new boards wait at the camera meanwhile (seconds), the line's board stays; "
                           "recorded under your name with the reason below.", "not profiled: cancelled",
                           f"profiling board {chosen}…", lambda reason: self.backend.profile_board(chosen, reason))

    def remove(self) -> None:
        chosen = self.selected()
        if chosen in (None, CONFIGURED):
            return
        self._after_reason(f"Remove board {chosen}", f"Board {chosen} (its rule set and its zoo) is deleted from "
                           f"{self.home}'s disk; install its package again to serve it later.",
                           "not removed: cancelled", "", lambda reason: self.backend.remove_board(chosen, reason))

    def install(self, package: Path | None = None) -> None:
        """After a reason is given: a board package (asked for where not given) installed, not served."""
        if package is None:
            chosen, _ = QFileDialog.getOpenFileName(self, "A board package", "",
                                                    "Board packages (*.tar);;All files (*)")
            if not chosen:
                return
            package = Path(chosen)
        self._after_reason(f"Install {package.name}", f"The board in {package.name} (its rule set and its own zoo) is "
                           f"installed on {self.home}, not served: serve it from this list when its lot comes; "
                           "recorded under your name with the reason below.", "not installed: cancelled",
                           f"installing {package.name}…", lambda reason: self.backend.install_package(package, reason))

    def _after_reason(self, title: str, what: str, cancelled: str, doing: str,
                      job: Callable[[str], str]) -> None:
        """`job(reason)` off the GUI thread once the engineer gives a reason; `cancelled` said where they do not."""
        reason = self.confirm(title, what, "")
        if reason is None:
            self._say(cancelled)
            return
        if doing:
            self._say(doing)
        self._run(lambda: job(reason), self._done)

    def confirm(self, title: str, what: str, diff: str) -> str | None:
        return ConfirmChange(self, title, what, diff).ask()

    def _done(self, said: str) -> None:
        self._say(said)
        self.refresh()

    def _say(self, text: str, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setStyleSheet(status_style(error))
