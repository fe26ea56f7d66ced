"""Who is at the panel: the sign-in page the window shows instead of its tabs, and the idle lock.

The window starts on this page; a sign-in (or, on an empty database, making the first admin) shows the tabs with
what that person's role may do. After `idle_s` without a key or a click the window locks: the tabs are hidden
(product images, rules) and the next person signs in again; the line runs on meanwhile.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtWidgets import QFormLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget

from inspector.access.identity import Identity

from .style import status_style

IDLE_S = 300.0  # five minutes at a shared panel


class SignInPage(QWidget):
    def __init__(self, backend: Any, on_signed_in: Callable[[Identity], None]) -> None:
        super().__init__()
        self.backend, self.on_signed_in = backend, on_signed_in
        self.title = QLabel("<h2>Sign in</h2>")
        self.note = QLabel("")
        self.note.setWordWrap(True)
        self.name, self.password, self.again = QLineEdit(), QLineEdit(), QLineEdit()
        for box in (self.password, self.again):
            box.setEchoMode(QLineEdit.EchoMode.Password)
        self.name.setPlaceholderText("user name")
        self.button = QPushButton("Sign in")
        self.button.setDefault(True)
        self.button.clicked.connect(self.submit)
        self.password.returnPressed.connect(self.submit)
        self.again.returnPressed.connect(self.submit)
        self.message = QLabel("")
        self.message.setWordWrap(True)
        form = QFormLayout()
        form.addRow("User", self.name)
        form.addRow("Password", self.password)
        self.again_label = QLabel("Password again")
        form.addRow(self.again_label, self.again)
        box = QWidget()
        box.setMaximumWidth(420)
        inner = QVBoxLayout(box)
        for w in (self.title, self.note):
            inner.addWidget(w)
        inner.addLayout(form)
        inner.addWidget(self.button)
        inner.addWidget(self.message)
        outer = QVBoxLayout(self)
        outer.addStretch(1)
        outer.addWidget(box, 0, Qt.AlignmentFlag.AlignHCenter)
        outer.addStretch(2)
        self.first = False
        self.reset()

    def reset(self, locked_by: str | None = None) -> None:
        """Empty fields; the first-admin form when the database has nobody yet."""
        try:
            self.first = not self.backend.has_users()
        except Exception as exc:  # noqa: BLE001 - no database yet: say so, keep the page
            self.first = False
            self.message.setText(f"cannot read the users: {exc}")
            self.message.setStyleSheet(status_style(True))
        self.title.setText("<h2>Create the first admin</h2>" if self.first else "<h2>Sign in</h2>")
        self.note.setText("Nobody can sign in to this line yet. The first user is an admin, who adds the others "
                          "(`inspector user add`)." if self.first else
                          (f"Locked after {locked_by} was idle. " if locked_by else "")
                          + "Sign in with your own name: every change is recorded under it.")
        self.again.setVisible(self.first)
        self.again_label.setVisible(self.first)
        self.button.setText("Create and sign in" if self.first else "Sign in")
        for box in (self.password, self.again):
            box.clear()
        self.name.setFocus()

    def submit(self) -> None:
        name, password = self.name.text().strip(), self.password.text()
        try:
            if self.first:
                if password != self.again.text():
                    raise ValueError("the two passwords differ")
                who = self.backend.first_admin(name, password)
            else:
                who = self.backend.sign_in(name, password)
        except (PermissionError, ValueError, RuntimeError) as exc:
            self.message.setText(str(exc))
            self.message.setStyleSheet(status_style(True))
            self.password.clear()
            return
        self.message.setText("")
        self.password.clear()
        self.again.clear()
        self.on_signed_in(who)


class IdleLock(QObject):
    """Calls `lock` after `idle_s` without a key press or a click anywhere in the application."""

    WAKES = (QEvent.Type.KeyPress, QEvent.Type.MouseButtonPress, QEvent.Type.Wheel, QEvent.Type.TouchBegin)

    def __init__(self, app: QObject, idle_s: float, lock: Callable[[], None]) -> None:
        super().__init__(app)
        self.timer = QTimer(self, singleShot=True, interval=max(1, int(idle_s * 1000)))
        self.timer.timeout.connect(lock)
        app.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() in self.WAKES and self.timer.isActive():
            self.timer.start()
        return False

    def arm(self) -> None:
        self.timer.start()

    def disarm(self) -> None:
        self.timer.stop()
