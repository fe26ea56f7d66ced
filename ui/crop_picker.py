"""A part's kept crop as the history tab shows it, with the box its detector drew, on which a reviewer draws the
box of a defect: press, drag, release. The box is kept in the crop's own pixels (the frame of the part's stored
box and of a review's `box`, results/reviews.py), whatever size the crop is shown at: it is what teaches a
detector that finds defects an escape (results/detector_labels.py)."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPen, QPixmap
from PySide6.QtWidgets import QWidget

from .style import bgr_pixmap

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in crop pixels
DETECTOR_BOX = QColor("#ffb300")  # what the detector drew: amber, dashed
DRAWN_BOX = QColor("#00e5ff")  # what the reviewer drew: cyan, solid
LEAST_DRAG = 3  # screen px: a click, not a box


class CropPicker(QWidget):
    def __init__(self, side: int) -> None:
        super().__init__()
        self.setMinimumSize(side, side)
        self.side = side
        self.setCursor(Qt.CursorShape.CrossCursor)
        self._pixmap = QPixmap()
        self._crop: tuple[int, int] | None = None  # w, h of the crop shown
        self._text = ""
        self.detector_box: Box | None = None
        self.box: Box | None = None  # the reviewer's, crop pixels
        self._press: QPointF | None = None
        self._drag: QPointF | None = None
        self.on_box: Callable[[Box | None], None] | None = None  # a box drawn (or cleared)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return QSize(self.side, self.side)

    def pixmap(self) -> QPixmap:
        """The crop as shown (null when there is none)."""
        return self._pixmap

    def show_text(self, text: str) -> None:
        """No crop: a sentence saying why."""
        self._pixmap, self._crop, self._text = QPixmap(), None, text
        self.detector_box = self.box = None
        self.update()

    def show_crop(self, image: np.ndarray, detector_box: Box | None = None, drawn: Box | None = None) -> None:
        """The crop, the box its detector drew on it and the one a review drew (either may be None)."""
        h, w = image.shape[:2]
        self._pixmap, self._crop, self._text = bgr_pixmap(image), (w, h), ""
        self.detector_box, self.box = detector_box, drawn
        self.update()

    def clear_box(self) -> None:
        self.set_box(None)

    def set_box(self, box: Box | None) -> None:
        self.box = box
        self.update()
        if self.on_box is not None:
            self.on_box(box)

    # -- where the crop lies on the widget -----------------------------------------------------------------------
    def _frame(self) -> tuple[QRectF, float] | None:
        """The crop's rectangle on the widget and its scale (screen px a crop px), or None without a crop."""
        if self._crop is None:
            return None
        w, h = self._crop
        scale = min(self.width() / w, self.height() / h)
        return QRectF((self.width() - w * scale) / 2, (self.height() - h * scale) / 2, w * scale, h * scale), scale

    def to_crop(self, at: QPointF) -> tuple[float, float] | None:
        """A widget point in crop pixels, held to the crop's edges."""
        frame = self._frame()
        if frame is None:
            return None
        rect, scale = frame
        w, h = self._crop  # type: ignore[misc]
        return (min(max((at.x() - rect.x()) / scale, 0.0), float(w)),
                min(max((at.y() - rect.y()) / scale, 0.0), float(h)))

    def _on_screen(self, box: Box) -> QRectF:
        rect, scale = self._frame()  # type: ignore[misc]
        x0, y0, x1, y1 = box
        return QRectF(rect.x() + x0 * scale, rect.y() + y0 * scale, (x1 - x0) * scale, (y1 - y0) * scale)

    # -- drawing a box -------------------------------------------------------------------------------------------
    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt's name
        if self._crop is not None and event.button() == Qt.MouseButton.LeftButton:
            self._press = self._drag = event.position()
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt's name
        if self._press is not None:
            self._drag = event.position()
            self.update()
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt's name
        start, self._press, self._drag = self._press, None, None
        if start is not None and event.button() == Qt.MouseButton.LeftButton:
            end = event.position()
            if abs(end.x() - start.x()) >= LEAST_DRAG and abs(end.y() - start.y()) >= LEAST_DRAG:
                a, b = self.to_crop(start), self.to_crop(end)
                if a is not None and b is not None:
                    box = (round(min(a[0], b[0]), 1), round(min(a[1], b[1]), 1), round(max(a[0], b[0]), 1),
                           round(max(a[1], b[1]), 1))
                    if box[2] - box[0] >= 1 and box[3] - box[1] >= 1:
                        self.set_box(box)
            self.update()
        super().mouseReleaseEvent(event)

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt's name
        p = QPainter(self)
        frame = self._frame()
        if frame is None:
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, self._text)
            p.end()
            return
        rect, _scale = frame
        p.drawPixmap(rect, self._pixmap, QRectF(self._pixmap.rect()))
        if self.detector_box is not None:
            p.setPen(QPen(DETECTOR_BOX, 2, Qt.PenStyle.DashLine))
            p.drawRect(self._on_screen(self.detector_box))
        if self.box is not None:
            p.setPen(QPen(DRAWN_BOX, 2))
            p.drawRect(self._on_screen(self.box))
        if self._press is not None and self._drag is not None:
            p.setPen(QPen(DRAWN_BOX, 1, Qt.PenStyle.DotLine))
            p.drawRect(QRectF(self._press, self._drag).normalized())
        p.end()
