"""A part's kept crop as the history tab shows it, with the box its detector drew, on which a reviewer draws the
boxes of the defects: press, drag, release for each (a part may carry several defects, results/review_boxes.py), each
box taking the class the review bar names as it is drawn; a right click on a box takes it away. The boxes are kept in
the crop's own pixels (the frame of the part's stored box and of a review's boxes), whatever size the crop is shown
at: they are what teaches a detector that finds defects an escape (results/detector_labels.py)."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPen, QPixmap
from PySide6.QtWidgets import QWidget

from inspector.results.review_boxes import Box, ReviewBox

from .style import bgr_pixmap

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
        self.boxes: tuple[ReviewBox, ...] = ()  # the reviewer's, crop pixels, in the order drawn
        self._press: QPointF | None = None
        self._drag: QPointF | None = None
        self.on_boxes: Callable[[tuple[ReviewBox, ...]], None] | None = None  # a box drawn or taken away
        self.class_of_new: Callable[[], str | None] = lambda: None  # the class a box takes as it is drawn

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return QSize(self.side, self.side)

    def pixmap(self) -> QPixmap:
        """The crop as shown (null when there is none)."""
        return self._pixmap

    def show_text(self, text: str) -> None:
        """No crop: a sentence saying why."""
        self._pixmap, self._crop, self._text = QPixmap(), None, text
        self.detector_box, self.boxes = None, ()
        self.update()

    def show_crop(self, image: np.ndarray, detector_box: Box | None = None,
                  drawn: tuple[ReviewBox, ...] = ()) -> None:
        """The crop, the box its detector drew on it (None: none) and the boxes a review drew."""
        h, w = image.shape[:2]
        self._pixmap, self._crop, self._text = bgr_pixmap(image), (w, h), ""
        self.detector_box, self.boxes = detector_box, tuple(drawn)
        self.update()

    def clear_boxes(self) -> None:
        self.set_boxes(())

    def set_boxes(self, boxes: tuple[ReviewBox, ...]) -> None:
        self.boxes = tuple(boxes)
        self.update()
        if self.on_boxes is not None:
            self.on_boxes(self.boxes)

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
        elif self._crop is not None and event.button() == Qt.MouseButton.RightButton:
            self.take_away(event.position())
        super().mousePressEvent(event)

    def take_away(self, at: QPointF) -> None:
        """The box drawn last of those under `at` (a widget point) taken away."""
        point = self.to_crop(at)
        if point is None:
            return
        x, y = point
        under = [n for n, b in enumerate(self.boxes) if b.at[0] <= x <= b.at[2] and b.at[1] <= y <= b.at[3]]
        if under:
            self.set_boxes(self.boxes[:under[-1]] + self.boxes[under[-1] + 1:])

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
                    if box[2] - box[0] >= 1 and box[3] - box[1] >= 1 and box not in [b.at for b in self.boxes]:
                        self.set_boxes((*self.boxes, ReviewBox(box, self.class_of_new())))
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
        p.setPen(QPen(DRAWN_BOX, 2))
        for b in self.boxes:
            on_screen = self._on_screen(b.at)
            p.drawRect(on_screen)
            if b.defect:  # its own class, above it (inside where it touches the top)
                p.drawText(on_screen.topLeft() + QPointF(2, -3 if on_screen.top() > 14 else 12), b.defect)
        if self._press is not None and self._drag is not None:
            p.setPen(QPen(DRAWN_BOX, 1, Qt.PenStyle.DotLine))
            p.drawRect(QRectF(self._press, self._drag).normalized())
        p.end()
