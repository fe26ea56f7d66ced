"""Tab 3, the routing rules: YAML with errors at their line (the CLI's validator), the routes as a table,
save and apply to the running line, every applied version kept for rollback."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QTextCursor, QTextFormat
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from inspector.routing.rules import RuleSet, parse_rules
from inspector.yamlio import ConfigError

from ..code_editor import CodeEditor
from ..confirm import ConfirmChange, unified
from ..style import ERROR_BG, status_style
from .boards_panel import BoardsPanel

ROUTE_COLUMNS = ("Component", "Shape", "Parts", "Classifier", "Detector", "Pass rate")


class RulesTab(QWidget):
    def __init__(self, backend: Any) -> None:
        super().__init__()
        self.backend = backend
        self.path: Path | None = None
        self.loaded = False
        self.valid: RuleSet | None = None
        self.error_line: int | None = None

        self.editor = CodeEditor()
        self.editor.textChanged.connect(lambda: self._debounce.start())
        self._debounce = QTimer(self, singleShot=True, interval=300)
        self._debounce.timeout.connect(self.validate)
        self.file_label = QLabel("")
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.open_btn, self.reload_btn = QPushButton("Open…"), QPushButton("Reload file")
        self.apply_btn = QPushButton("Save && apply to the line")
        self.open_btn.clicked.connect(self._open)
        self.reload_btn.clicked.connect(self._reload)
        self.apply_btn.clicked.connect(self.apply)
        buttons = QHBoxLayout()
        for b in (self.open_btn, self.reload_btn, self.apply_btn):
            buttons.addWidget(b)
        buttons.addStretch(1)

        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        lv.addWidget(self.file_label)
        lv.addWidget(self.editor, 1)
        lv.addWidget(self.status)
        lv.addLayout(buttons)

        self.table = QTableWidget(0, len(ROUTE_COLUMNS))
        self.table.setHorizontalHeaderLabels(ROUTE_COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        routes = QGroupBox("Routes: component → classifier → detector (the last valid text)")
        QVBoxLayout(routes).addWidget(self.table)

        self.history = QListWidget()
        self.rollback_btn = QPushButton("Roll back to the selected version")
        self.rollback_btn.clicked.connect(self.rollback)
        self.counts = QLabel("")
        versions = QGroupBox("Applied versions (newest last)")
        hv = QVBoxLayout(versions)
        hv.addWidget(self.history)
        hv.addWidget(self.counts)
        hv.addWidget(self.rollback_btn)

        right = QWidget()
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        rv.addWidget(routes, 3)
        rv.addWidget(versions, 2)
        # the line's boards: the one served, the others installed on its box (a kiosk's, or this one's), changed over
        # to from here
        self.boards = BoardsPanel(backend) if hasattr(backend, "serve_board") else None
        if self.boards is not None:
            rv.addWidget(self.boards, 2)
        split = QSplitter()
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        QVBoxLayout(self).addWidget(split)
        self._history_key: tuple | None = None

    # -- file -------------------------------------------------------------------------------------
    def load(self, path: Path | None) -> None:
        if path is None:
            return
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self._say(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}", error=True)
            return
        self.path = Path(path)
        self.show_text(str(self.path), text)

    def show_text(self, name: str, text: str) -> None:
        """Put a rule set's text in the editor (a file here, or a kiosk's running set over its API)."""
        self.loaded = True
        self.file_label.setText(f"<b>{name}</b>")
        self.editor.setPlainText(text)
        self.validate()

    def _reload(self) -> None:
        if self.path is not None:
            self.load(self.path)
            return
        doc = self.backend.rules_document()
        if doc is not None:
            self.show_text(*doc)

    def _open(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "Open a rule set", str(self.path.parent if self.path else ""),
                                              "Rule sets (*.yaml *.yml)")
        if name:
            self.load(Path(name))

    # -- validation -------------------------------------------------------------------------------
    def validate(self) -> bool:
        """Parse with the CLI's validator; mark the error's line; fill the routes table from a valid set."""
        self._debounce.stop()
        text = self.editor.toPlainText()
        try:
            self.valid = parse_rules(text, str(self.path or "<editor>"))
        except ConfigError as exc:
            self.valid, self.error_line = None, exc.line
            self._mark(exc.line)
            where = f"line {exc.line}: " if exc.line else ""
            self._say(f"{where}{str(exc).split(': ', 1)[-1]}", error=True)
            self.apply_btn.setEnabled(False)
            return False
        except ValueError as exc:
            self.valid, self.error_line = None, None
            self._mark(None)
            self._say(str(exc), error=True)
            self.apply_btn.setEnabled(False)
            return False
        self.error_line = None
        self._mark(None)
        r = self.valid
        marks = (f"registered on {len(r.fiducials.marks)} fiducials ({r.fiducials.transform})" if r.fiducials else
                 "no fiducials: boards will be cut at their nominal positions, unregistered")
        self._say(f"valid: {r.recipe}, {len(r.components)} component types, {len(r.placements())} parts, {marks}, "
                  f"version {r.version}")
        self.apply_btn.setEnabled(self.backend.can_edit)
        self._fill_table(r)
        return True

    def _mark(self, line: int | None) -> None:
        selections = []
        if line:
            sel = QTextEdit.ExtraSelection()
            sel.format.setBackground(ERROR_BG)
            sel.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
            block = self.editor.document().findBlockByNumber(line - 1)
            sel.cursor = QTextCursor(block)
            selections.append(sel)
            if not self.editor.hasFocus():
                self.editor.setTextCursor(QTextCursor(block))
                self.editor.centerCursor()
        self.editor.setExtraSelections(selections)

    def _fill_table(self, r: RuleSet) -> None:
        self.table.setRowCount(len(r.components))
        for i, c in enumerate(r.components):
            for j, value in enumerate((c.name, c.shape, str(len(c.placements)), c.classifier,
                                       c.detector or "—", f"{c.expected_pass_rate:.2f}")):
                item = QTableWidgetItem(value)
                if j in (2, 5):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(i, j, item)

    # -- apply, rollback ---------------------------------------------------------------------------
    def permit(self) -> None:
        """The signed-in role: an engineer edits and applies, anyone else reads."""
        if self.boards is not None:
            self.boards.permit()
        self.editor.setReadOnly(not self.backend.can_edit)
        self.validate()
        self.rollback_btn.setEnabled(self.backend.can_edit and self.history.count() > 1)

    def apply(self) -> None:
        """After the diff against the running set is confirmed with a reason (the audit trail keeps both)."""
        if not self.validate():
            return
        text = self.editor.toPlainText()
        running = self.backend.rules_document()
        what = (f"{self.valid.recipe} {self.valid.version} replaces the running set on the line from the next "
                f"board on, recorded under your name with the reason below.") if self.valid else ""
        reason = self.confirm("Apply the edited rule set", what,
                              unified(running[1] if running else None, text, Path(str(self.path or "rules")).name))
        if reason is None:
            self._say("not applied: cancelled; the line runs the set it had")
            return
        try:
            self._say(self.backend.apply_rules(text, reason))
        except (RuntimeError, ValueError, OSError) as exc:
            self._say(str(exc), error=True)

    def rollback(self) -> None:
        row = self.history.currentRow()
        if row < 0:
            self._say("select a version in the list first", error=True)
            return
        target = self.history.item(row).text()
        reason = self.confirm("Roll back the rule set", f"Roll the line back to {target.split('   ')[0]}, recorded "
                              "under your name with the reason below.", "(the version's text is kept by its hash "
                              "in the audit trail: `inspector audit rule-text VERSION`)")
        if reason is None:
            self._say("not rolled back: cancelled")
            return
        try:
            self._say(self.backend.rollback(row, reason))
        except (RuntimeError, ValueError, OSError) as exc:
            self._say(str(exc), error=True)
            return
        self._reload()

    def confirm(self, title: str, what: str, diff: str) -> str | None:
        """The reason given in the confirmation dialog, or None when cancelled."""
        return ConfirmChange(self, title, what, diff).ask()

    def refresh(self, snap: dict[str, Any]) -> None:
        if self.boards is not None and not self.boards.asked and self.backend.identity is not None:
            self.boards.refresh()  # once signed in; then after each change and on Refresh
        if not self.loaded:
            path = self.backend.rules_path()
            if path is not None:
                self.load(path)
            else:
                doc = self.backend.rules_document()
                if doc is not None:
                    self.show_text(*doc)
        rules = snap.get("rules") or {}
        self.counts.setText(f"applied {rules.get('applied', 0)}, refused {rules.get('refused', 0)}"
                            + (f"; last refusal: {rules['last_error']}" if rules.get("last_error") else ""))
        self.counts.setWordWrap(True)
        history = self.backend.rules_history()
        key = tuple(history)
        if key != self._history_key:
            self._history_key = key
            self.history.clear()
            for i, (at, recipe, version) in enumerate(history):
                label = f"{at}  {recipe}  {version}" + ("   (running)" if i == len(history) - 1 else "")
                self.history.addItem(label)
        self.rollback_btn.setEnabled(self.backend.can_edit and len(history) > 1)

    def _say(self, text: str, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setStyleSheet(status_style(error))
