"""The New board tab's good boards, beside its validation table: photos of boards known good through the taught
board's line, the tune of their flags planned type by type (inspector/app/board_tune.py: each type's threshold
lowered while its held-out recall holds within the points allowed), and served only when an engineer says so, in
the audit trail under their name.
After serving, the boards are planned again: what the table then shows is the line's second look, measured."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inspector.access.roles import Permission
from inspector.app.board_costs import percent
from inspector.app.board_tune import MARGIN, PRESENCE, short

from ..style import ERROR_TEXT
from ..worker import OneJobAtATime


class TunePanel(OneJobAtATime, QWidget):
    job_name = "board-tune"

    def __init__(self, backend: Any) -> None:
        super().__init__()
        self.backend = backend
        self.board: tuple[Path, Path] | None = None  # (taught rule set, its zoo)
        self.photos: list[Path] = []
        self.tune: Any = None

        self.add_btn = QPushButton("Good boards…")
        self.add_btn.setToolTip("Photos of boards known good, from the line's camera: their flags are false calls")
        self.add_btn.clicked.connect(self._add)
        self.most_lost = QDoubleSpinBox(decimals=1, minimum=0.0, maximum=100.0, value=5.0, suffix=" points")
        self.most_lost.setToolTip("The most a type's held-out recall may fall to pass its flags")
        self.plan_btn = QPushButton("Plan")
        self.plan_btn.clicked.connect(lambda: self.plan())
        self.serve_btn = QPushButton("Serve these thresholds")
        self.serve_btn.clicked.connect(self.serve)
        self.status = QLabel("Teach a board, then show it boards known good to pass their false calls.")
        self.status.setWordWrap(True)
        self.status.setMinimumHeight(3 * self.status.fontMetrics().lineSpacing())  # nested, it is not grown to fit
        self.table = QTableWidget(0, 6)
        self.table.setHorizontalHeaderLabels(["Type", "Flagged", "Passed", "Threshold", "Its held-out recall",
                                              "Left flagged"])
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        row = QHBoxLayout()
        row.addWidget(QLabel("Good boards"))
        row.addWidget(self.add_btn)
        row.addWidget(QLabel("lose at most"))
        row.addWidget(self.most_lost)
        row.addWidget(self.plan_btn)
        row.addWidget(self.serve_btn)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.status)
        layout.addWidget(self.table, 1)
        self._enable()

    def set_board(self, rules: Path, zoo: Path) -> None:
        """The taught board to tune (a new teaching: the plan before it is void)."""
        self.board, self.tune = (Path(rules), Path(zoo)), None
        self.table.setRowCount(0)
        self._enable()

    def add_photos(self, paths: list[Path]) -> None:
        self.photos = [Path(p) for p in paths]
        self.tune = None
        self._say(f"{len(self.photos)} good boards' photos: plan to see their flags")
        self._enable()

    def _add(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self, "Photos of good boards", "",
                                                "Images (*.png *.jpg *.jpeg *.bmp *.tif *.tiff)")
        if paths:
            self.add_photos([Path(p) for p in paths])

    def _enable(self) -> None:
        ready = self.board is not None and not self.busy
        self.add_btn.setEnabled(ready)
        self.plan_btn.setEnabled(ready and bool(self.photos))
        self.serve_btn.setEnabled(ready and self.tune is not None and any(t.changed for t in self.tune.types)
                                  and self.backend.may(Permission.EXPERTS) and hasattr(self.backend, "serve_tune"))

    def permit(self) -> None:
        self._enable()

    def _say(self, text: str, error: bool = False) -> None:
        self.status.setStyleSheet(ERROR_TEXT if error else "")
        self.status.setText(text)


    def plan(self, after: str = "") -> None:
        if not hasattr(self.backend, "tune_board"):
            self._say("tuning runs on a dashboard that runs its own line, not one attached to a kiosk", error=True)
            return
        rules, zoo = self.board
        lost = self.most_lost.value() / 100
        self._say("the good boards through the line…")
        self._run(lambda: self.backend.tune_board(rules, zoo, self.photos, lost, MARGIN),
                  lambda result: self._planned(result, after))

    def _planned(self, result: tuple[list[Any], Any], after: str) -> None:
        checked, tune = result
        self.tune = tune
        if tune is None:
            reasons = "; ".join(f"{c.board.name}: {c.board.reason}" for c in checked if not c.inspected)
            self.table.setRowCount(0)
            self._say(f"no good board registered: {reasons}", error=True)
            return
        left: dict[str, list[tuple[Any, str]]] = {}
        for f, why in tune.left:
            left.setdefault("(presence check)" if why == PRESENCE else f.type, []).append((f, why))
        rows = [(t.type, len(t.flags), len(t.passed), f"{t.before:.2f} → {t.after:.2f}",
                 f"{percent(t.recall_before)} → {percent(t.recall_after)}", left.get(t.type, [])) for t in tune.types]
        if "(presence check)" in left:
            calls = left["(presence check)"]
            rows.append(("(presence check)", len(calls), 0, "", "", calls))
        self.table.setRowCount(len(rows))
        for r, (*cells, kept) in enumerate(rows):
            refs = ", ".join(f"{f.ref}" for f, _w in kept)
            cells.append(f"{refs}: {short(kept[0][1])}" if kept else "")
            for col, v in enumerate(cells):
                item = QTableWidgetItem(str(v))
                if col == len(cells) - 1 and kept:
                    item.setToolTip(kept[0][1])  # the whole reason
                self.table.setItem(r, col, item)
        boards = sum(1 for c in checked if c.inspected)
        self._say(f"{after}flagged on the good boards: {tune.flags}, {len(tune.left)} after the plan ({boards} "
                  f"board{'s' if boards != 1 else ''}); all types' held-out recall {percent(tune.recall_before)} → "
                  f"{percent(tune.recall_after)}")

    def serve(self) -> None:
        try:
            said = self.backend.serve_tune(self.board[1], self.tune, "tuned on the New board tab")
        except (RuntimeError, ValueError, PermissionError) as exc:
            self._say(str(exc), error=True)
            return
        self.plan(after=f"{said}. Checked again: ")
