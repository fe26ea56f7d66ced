"""The dashboard's menus and keyboard shortcuts: what an operator at a panel PC reaches for first."""
from __future__ import annotations

from typing import Any

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMessageBox


def _action(window: Any, menu: Any, text: str, keys: QKeySequence | str | None, slot: Any) -> QAction:
    action = QAction(text, window)
    if keys is not None:
        action.setShortcut(QKeySequence(keys))
    action.triggered.connect(slot)
    menu.addAction(action)
    return action


def install(window: Any) -> dict[str, QAction]:
    """File, View and Help menus on `window` (a MainWindow); the actions by name, for tests."""
    bar = window.menuBar()
    out: dict[str, QAction] = {}
    file = bar.addMenu("&File")
    out["save_rules"] = _action(window, file, "&Save and apply rules", "Ctrl+S",
                                window.save_rules)
    out["export"] = _action(window, file, "&Export the filtered results…", "Ctrl+E", window.export_results)
    file.addSeparator()
    out["lock"] = _action(window, file, "&Lock (sign out)", "Ctrl+L", window.lock)
    out["quit"] = _action(window, file, "&Quit", "Ctrl+Q", window.close)
    view = bar.addMenu("&View")
    out["refresh"] = _action(window, view, "&Refresh", "F5", window.refresh_now)
    view.addSeparator()
    for i in range(window.tabs.count()):
        name = window.tabs.tabText(i).replace("&&", "&")
        out[f"tab{i + 1}"] = _action(window, view, name, f"Ctrl+{i + 1}",
                                     lambda _=False, i=i: window.tabs.setCurrentIndex(i))
    help_menu = bar.addMenu("&Help")
    out["about"] = _action(window, help_menu, "&About", None, lambda: QMessageBox.about(
        window, "Inspection dashboard", window.about_text()))
    return out
