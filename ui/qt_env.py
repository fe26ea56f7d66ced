"""Undo what opencv-python does to Qt's environment before the dashboard makes its QApplication.

opencv-python (the GUI build) points QT_QPA_PLATFORM_PLUGIN_PATH and
QT_QPA_FONTDIR at its own bundled Qt 5 files when cv2 is imported; PySide6
(Qt 6) then finds Qt 5 plugins and fails to open a window ("Could not load
the Qt platform plugin xcb"). Call `qt_environment()` after cv2 is imported
and before QApplication is created.
"""
from __future__ import annotations

import os

import cv2


def qt_environment() -> None:
    cv2_dir = os.path.dirname(os.path.abspath(cv2.__file__))
    for var in ("QT_QPA_PLATFORM_PLUGIN_PATH", "QT_QPA_FONTDIR"):
        if os.environ.get(var, "").startswith(cv2_dir):
            del os.environ[var]
