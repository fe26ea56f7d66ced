"""Before a rule set changes the running line: what changes (a unified diff against what runs), and why (a reason,
required: it goes into the audit trail with the change)."""
from __future__ import annotations

import difflib
import html

from PySide6.QtGui import QFont
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QLineEdit, QTextEdit, QVBoxLayout, QWidget

COLOURS = {"+": "#1b7f3b", "-": "#c62828", "@": "#6a4fb3"}  # added, removed, a hunk's place


def unified(before: str | None, after: str, name: str) -> str:
    if before is None:
        return f"(the running set's text is not known here; the whole new text follows)\n\n{after}"
    diff = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                f"{name} (running)", f"{name} (edited)", n=2)
    return "".join(diff) or "(no change to the text)"


def coloured(diff: str) -> str:
    """The diff as HTML, its added lines green, removed ones red (text otherwise as it is)."""
    lines = []
    for line in diff.splitlines():
        colour = COLOURS.get(line[:1]) if not line.startswith(("+++", "---")) else None
        text = html.escape(line) or "&nbsp;"
        lines.append(f'<span style="color: {colour}">{text}</span>' if colour else text)
    return "<pre style='margin: 0'>" + "\n".join(lines) + "</pre>"


class ConfirmChange(QDialog):
    def __init__(self, parent: QWidget | None, title: str, what: str, diff: str) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.resize(760, 520)
        self.view = QTextEdit()
        self.view.setReadOnly(True)
        self.view.setFont(QFont("monospace"))
        self.view.setHtml(coloured(diff))
        self.reason = QLineEdit()
        self.reason.setPlaceholderText("why: a ticket, an ECN, what was seen on the line (required)")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok.setText("Apply to the line")
        self.ok.setEnabled(False)
        self.reason.textChanged.connect(lambda t: self.ok.setEnabled(bool(t.strip())))
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        v = QVBoxLayout(self)
        label = QLabel(what)
        label.setWordWrap(True)
        v.addWidget(label)
        v.addWidget(self.view, 1)
        v.addWidget(QLabel("Reason"))
        v.addWidget(self.reason)
        v.addWidget(self.buttons)

    def ask(self) -> str | None:
        """The reason given, or None when cancelled."""
        return self.reason.text().strip() if self.exec() == QDialog.DialogCode.Accepted else None
