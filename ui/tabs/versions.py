"""The expert versions tab: each trained expert's weights versions, which one serves and at what operating point;
serve another, roll back, or move the served one's operating point (a detector's threshold, a classifier's good
margin), each confirmed with a reason for the audit trail.

It reads and changes through the backend (ui/backend.py on a line run here, ui/attached.py through a kiosk's
GET /experts, POST /experts/swap and /experts/operating): on a running line a change is served from the next board
on, at a board boundary; otherwise the zoo on disk serves it from the next start.
"""
from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDoubleSpinBox,
    QGroupBox,
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
from inspector.experts.operating import said

from ..confirm import ConfirmChange

COLUMNS = ("", "Version", "Created", "Origin", "Operating point", "Recall gate")
FIELDS = {"threshold": ("Threshold", 0.0, 1.0, 0.01), "good_margin": ("Good margin (log-odds)", -1e5, 1e5, 0.1)}


def _gate(version: dict[str, Any]) -> str:
    gate = version.get("gate")
    if not gate:
        return ""
    if gate.get("passed"):
        return "passed" + "".join(f"; tolerated: {t}" for t in gate.get("tolerated") or ())
    return "REFUSED: " + "; ".join(gate.get("reasons", []))


class VersionsTab(QWidget):
    def __init__(self, backend: Any) -> None:
        super().__init__()
        self.backend = backend
        self.known: dict[str, Any] = {}
        self.expert = QComboBox()
        self.expert.currentTextChanged.connect(self.show_expert)
        self.refresh_btn = QPushButton("Refresh")
        self.refresh_btn.clicked.connect(self.refresh)
        top = QHBoxLayout()
        top.addWidget(QLabel("Expert"))
        top.addWidget(self.expert, 1)
        top.addWidget(self.refresh_btn)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(len(COLUMNS) - 1, QHeaderView.ResizeMode.Stretch)
        self.serve_btn = QPushButton("Serve the selected version")
        self.serve_btn.clicked.connect(self.serve)
        self.rollback_btn = QPushButton("Roll back")
        self.rollback_btn.clicked.connect(self.roll_back)
        buttons = QHBoxLayout()
        buttons.addWidget(self.serve_btn)
        buttons.addWidget(self.rollback_btn)
        buttons.addStretch(1)
        self.point_label = QLabel("Threshold")
        self.point = QDoubleSpinBox()
        self.point.setDecimals(3)
        self.operate_btn = QPushButton("Serve at this point")
        self.operate_btn.clicked.connect(self.operate)
        point_box = QGroupBox("The served version's operating point (its weights unchanged)")
        pl = QHBoxLayout(point_box)
        pl.addWidget(self.point_label)
        pl.addWidget(self.point)
        pl.addWidget(self.operate_btn)
        pl.addStretch(1)
        self.message = QLabel("")
        self.message.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        layout.addWidget(point_box)
        layout.addWidget(self.message)
        self.permit()

    # -- reading ------------------------------------------------------------------------------------
    def showEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self.refresh()

    def refresh(self) -> None:
        """Read the experts' versions again (the kiosk's or this line's zoo), keeping the expert shown."""
        try:
            self.known = self.backend.expert_versions()
        except (RuntimeError, ValueError, OSError) as exc:
            self._say(f"the experts' versions cannot be read: {exc}", error=True)
            return
        shown = self.expert.currentText()
        self.expert.blockSignals(True)
        self.expert.clear()
        self.expert.addItems(sorted(self.known))
        self.expert.blockSignals(False)
        if shown in self.known:
            self.expert.setCurrentText(shown)
        self.show_expert(self.expert.currentText())

    def show_expert(self, name: str) -> None:
        entry = self.known.get(name) or {}
        versions = entry.get("versions", [])
        self.table.setRowCount(len(versions))
        served = entry.get("served", [])
        for row, v in enumerate(versions):
            sha = v.get("weights_sha256") or ""
            mark = "serving" if sha == entry.get("serving") else ("served before" if sha in served else "")
            # the serving one at what it serves now (a board tune may have moved it since it was stamped)
            point = (entry.get("operating") if sha == entry.get("serving") else v.get("operating")) or {}
            for col, text in enumerate((mark, sha[:12], str(v.get("created", "-"))[:19], v.get("origin", ""),
                                        said(point), _gate(v))):
                item = QTableWidgetItem(text)
                item.setToolTip(sha if col == 1 else text)
                self.table.setItem(row, col, item)
        point = entry.get("operating") or {}
        field = next(iter(point), None)
        label, low, high, step = FIELDS.get(field or "", ("Operating point", 0.0, 0.0, 0.1))
        self.point_label.setText(label)
        self.point.setRange(low, high)
        self.point.setSingleStep(step)
        if field is not None and point[field] is not None:
            self.point.setValue(float(point[field]))
        self.permit()

    # -- changing -----------------------------------------------------------------------------------
    def permit(self) -> None:
        """Enable what the signed-in person may do (the experts' permission) on what is shown."""
        may = bool(getattr(self.backend, "may", lambda _p: False)(Permission.EXPERTS))
        entry = self.known.get(self.expert.currentText()) or {}
        point = entry.get("operating") or {}
        self.serve_btn.setEnabled(may and len(entry.get("versions", [])) > 1)
        self.rollback_btn.setEnabled(may and len(entry.get("served", [])) > 1)
        self.point.setEnabled(may and bool(point))
        self.operate_btn.setEnabled(self.point.isEnabled())

    def serve(self) -> None:
        name, row = self.expert.currentText(), self.table.currentRow()
        if row < 0:
            self._say("select a version in the table first", error=True)
            return
        version = self.known[name]["versions"][row]
        if version["weights_sha256"] == self.known[name]["serving"]:
            self._say(f"{name} serves that version already: select another, or move its point below", error=True)
            return
        refused = bool(version.get("gate")) and not version["gate"].get("passed", True)
        what = (f"{name} serves version {version['weights_sha256'][:12]} ({version.get('origin', '')}"
                + (f", {said(version['operating'])}" if version.get("operating") else "") + ") from the next board"
                " on (a line not running: from its next start), recorded under your name with the reason below."
                + ("\n\nIts retraining's recall gate REFUSED it: " + "; ".join(version["gate"].get("reasons", []))
                   if refused else ""))
        reason = self.confirm("Serve another version", what, self._change(name, version["weights_sha256"],
                                                                     version.get("operating")))
        if reason is not None:
            self._act(lambda: self.backend.swap_expert(name, version["weights_sha256"], force=refused,
                                                       reason=reason))

    def roll_back(self) -> None:
        name = self.expert.currentText()
        served = self.known[name].get("served", [])
        before = served[-2] if len(served) > 1 else ""
        point = next((v.get("operating") for v in self.known[name]["versions"] if v["weights_sha256"] == before), None)
        reason = self.confirm("Roll back", f"{name} serves the version it served before, at the point it was served "
                              "at, recorded under your name with the reason below.", self._change(name, before, point))
        if reason is not None:
            self._act(lambda: self.backend.swap_expert(name, rollback=True, reason=reason))

    def operate(self) -> None:
        name = self.expert.currentText()
        point = self.known[name].get("operating") or {}
        field = next(iter(point), None)
        if field is None:
            self._say(f"{name} has no operating point to move", error=True)
            return
        new = {field: round(self.point.value(), 6)}
        reason = self.confirm("Move the operating point", f"{name} calls at {said(new)} from the next board on, its "
                              "weights unchanged, recorded under your name with the reason below.",
                              self._change(name, self.known[name]["serving"], new))
        if reason is not None:
            self._act(lambda: self.backend.operate_expert(name, new, reason=reason))

    def confirm(self, title: str, what: str, detail: str) -> str | None:
        """The reason given in the confirmation dialog, or None when cancelled."""
        return ConfirmChange(self, title, what, detail).ask()

    def _change(self, name: str, sha: str, point: dict[str, Any] | None) -> str:
        """What is served now and what will be, as the dialog's detail (a diff of two lines)."""
        entry = self.known[name]
        now = f"-{name}: {entry['serving'][:12]}, {said(entry.get('operating') or {}) or 'its top class'}"
        then = f"+{name}: {sha[:12]}, {said(point or entry.get('operating') or {}) or 'its top class'}"
        return f"{now}\n{then}\n"

    def _act(self, change: Any) -> None:
        try:
            self._say(change())
        except (RuntimeError, ValueError, OSError, PermissionError, TimeoutError) as exc:
            self._say(str(exc), error=True)
        self.refresh()

    def _say(self, text: str, error: bool = False) -> None:
        self.message.setStyleSheet("color: #c62828" if error else "")
        self.message.setText(text)
