"""What the dashboard remembers between starts (QSettings): the window, the tab, the history filters.

The first start fits the screen it opens on (a 1366x768 panel PC included); later starts come back where
the operator left them, clamped to the screen that is there now.
"""
from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSettings, QSize
from PySide6.QtWidgets import QApplication, QMainWindow

DEFAULT_SIZE = QSize(1366, 768)


def settings() -> QSettings:
    return QSettings("inspector", "dashboard")


def fit(window: QMainWindow) -> None:
    """The default size, no larger than the available screen (a panel's task bar included)."""
    screen = window.screen() or QApplication.primaryScreen()
    room = screen.availableGeometry() if screen is not None else None
    size = DEFAULT_SIZE if room is None else DEFAULT_SIZE.boundedTo(room.size())
    window.resize(size)
    if room is not None:
        window.move(room.topLeft())


def restore(window: Any) -> None:
    s = settings()
    geometry = s.value("window/geometry")
    if geometry is None or not window.restoreGeometry(geometry):
        fit(window)
    tab = s.value("window/tab", 0, type=int)
    if 0 <= tab < window.tabs.count():
        window.tabs.setCurrentIndex(tab)
    h = window.history
    h.board.setText(s.value("history/board", "", type=str))
    h.verdict.setCurrentIndex(max(0, h.verdict.findText(s.value("history/verdict", "any verdict", type=str))))
    h.reviewed.setCurrentIndex(max(0, h.reviewed.findText(s.value("history/reviewed", "", type=str))))
    h.use_since.setChecked(s.value("history/use_since", False, type=bool))
    h.use_until.setChecked(s.value("history/use_until", False, type=bool))


def save(window: Any) -> None:
    s = settings()
    s.setValue("window/geometry", window.saveGeometry())
    s.setValue("window/tab", window.tabs.currentIndex())
    h = window.history
    s.setValue("history/board", h.board.text())
    s.setValue("history/verdict", h.verdict.currentText())
    s.setValue("history/reviewed", h.reviewed.currentText())
    s.setValue("history/use_since", h.use_since.isChecked())
    s.setValue("history/use_until", h.use_until.isChecked())
    s.sync()
