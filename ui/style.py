"""Colours and small helpers shared by the tabs: one meaning per colour everywhere."""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage, QPixmap
from PySide6.QtWidgets import QTableWidget

VERDICT_COLOURS = {"pass": QColor("#2e9d4a"), "fail": QColor("#d93025"), "error": QColor("#f29900")}
BOARD_GREEN = QColor("#1f4d2b")
BOX_PASS = QColor("#8cff66")  # a passed part's box: visible on a green board
FIDUCIAL_FOUND = QColor("#00e5ff")  # a fiducial registration found
PANEL_BOARD = QColor("#f0f0f0")  # the frame around a panel's board that passed: light on a green board
X_OUT = QColor("#9aa0a6")  # a panel's x-out, not inspected: grey
FIDUCIAL_MISSING = QColor("#ff1744")  # one it did not (the board got a board-level error)
# status text: mid-tones that read on a light and on a dark theme alike
ERROR_TEXT, OK_TEXT = "#e5484d", "#30a46c"
ERROR_BG = QColor(229, 72, 77, 70)  # a line the rules editor marks: translucent, so the theme's text stays legible


def status_style(error: bool, bold_error: bool = True) -> str:
    return f"color: {ERROR_TEXT}" + ("; font-weight: bold" if bold_error else "") if error else f"color: {OK_TEXT}"


def verdict_colour(verdict: str) -> QColor:
    return VERDICT_COLOURS.get(verdict, QColor("#777777"))


def bgr_pixmap(image: np.ndarray) -> QPixmap:
    """An OpenCV BGR (or grey) image as a QPixmap (copied: the array may be reused)."""
    if image.ndim == 2:
        image = np.repeat(image[:, :, None], 3, axis=2)
    rgb = np.ascontiguousarray(image[:, :, ::-1])
    h, w = rgb.shape[:2]
    return QPixmap.fromImage(QImage(rgb.data, w, h, 3 * w, QImage.Format.Format_RGB888).copy())


def mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:.1f} MiB"


def fit_height(table: QTableWidget) -> None:
    """A fixed table as tall as its rows: no scroll bar, no empty band below."""
    table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    header = table.horizontalHeader()
    top = 0 if header.isHidden() else header.sizeHint().height()
    table.setFixedHeight(top + table.verticalHeader().length() + 2 * table.frameWidth() + 2)
