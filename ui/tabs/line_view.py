"""Tab 1, the line: the newest board with its parts coloured by verdict, recent defects with crops and their places'
part numbers (each call reviewable: confirmed, false call), controls."""
from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QFont, QIcon, QPainter, QPen, QPixmap
from PySide6.QtWidgets import (
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from inspector.results.units import PanelResult
from inspector.routing.panel import FRAME

from ..picture import SKIPPED, BoardPicture
from ..review_bar import ReviewBar
from ..style import (
    BOARD_GREEN,
    BOX_PASS,
    ERROR_TEXT,
    FIDUCIAL_FOUND,
    FIDUCIAL_MISSING,
    PANEL_BOARD,
    X_OUT,
    bgr_pixmap,
    status_style,
    verdict_colour,
)

CROP_ICON = 72  # px, the defect list's thumbnails
DEFECTS_SHOWN = 30


class BoardView(QWidget):
    """The board scaled to fit, every part's box in its verdict's colour, failed parts labelled."""

    def __init__(self) -> None:
        super().__init__()
        self.picture: BoardPicture | None = None
        self._pixmap: QPixmap | None = None
        self.setMinimumSize(480, 300)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def show_board(self, picture: BoardPicture | None) -> None:
        self.picture = picture
        self._pixmap = bgr_pixmap(picture.image) if picture is not None and picture.image is not None else None
        self.update()

    def paintEvent(self, _event: Any) -> None:  # noqa: N802 - Qt's name
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.fillRect(self.rect(), self.palette().window())
        pic = self.picture
        if pic is None:
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "no board inspected yet")
            return
        w, h = pic.size
        scale = min(self.width() / w, (self.height() - 4) / h)
        ox, oy = (self.width() - w * scale) / 2, (self.height() - h * scale) / 2
        target = QRectF(ox, oy, w * scale, h * scale)
        if self._pixmap is not None:
            p.drawPixmap(target, self._pixmap, QRectF(0, 0, w, h))
        else:
            p.fillRect(target, BOARD_GREEN)
            p.setPen(Qt.GlobalColor.white)
            p.drawText(target.adjusted(8, 6, -8, -6), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignBottom,
                       "schematic: the kiosk keeps no board images")
        font = QFont(self.font())
        font.setPointSizeF(max(7.0, 9.0 * min(1.6, scale)))
        font.setBold(True)
        p.setFont(font)
        self._draw_fiducials(p, pic, ox, oy, scale)
        self._draw_panel_boards(p, pic, ox, oy, scale)
        for box in pic.boxes:
            x0, y0, x1, y1 = box.box
            (vx0, vy0), (vx1, vy1) = pic.to_view(x0, y0), pic.to_view(x1, y1)  # registered: where the camera saw it
            rect = QRectF(ox + vx0 * scale, oy + vy0 * scale, (vx1 - vx0) * scale, (vy1 - vy0) * scale)
            if box.verdict == SKIPPED:  # an x-out's part: where it would be, not inspected
                pen = QPen(X_OUT, 1)
                pen.setStyle(Qt.PenStyle.DotLine)
                p.setPen(pen)
                p.drawRect(rect)
                continue
            colour = verdict_colour(box.verdict)
            p.setPen(QPen(BOX_PASS if box.verdict == "pass" else colour, 3 if box.verdict != "pass" else 1.5))
            p.drawRect(rect)
            if box.verdict != "pass":
                label = f"{box.ref} {box.defect}"
                tw = p.fontMetrics().horizontalAdvance(label) + 8
                th = p.fontMetrics().height() + 2
                tag = QRectF(rect.left(), rect.top() - th - 1, tw, th)
                if tag.top() < oy:
                    tag.moveTop(rect.bottom() + 1)
                if tag.right() > target.right():  # keep the label on the board
                    tag.moveRight(target.right())
                p.fillRect(tag, colour)
                p.setPen(Qt.GlobalColor.white)
                p.drawText(tag, Qt.AlignmentFlag.AlignCenter, label)


    @staticmethod
    def _draw_panel_boards(p: QPainter, pic: BoardPicture, ox: float, oy: float, scale: float) -> None:
        """A panel's boards, each a dashed frame around its parts with its number (and its own serial where it has
        one): red where that board failed."""
        if pic.panel is None:
            return
        areas: dict[int, QRectF] = {}
        for box in pic.boxes:
            k = pic.panel.position_of(box.ref)
            if k == FRAME:
                continue
            x0, y0, x1, y1 = box.box
            (vx0, vy0), (vx1, vy1) = pic.to_view(x0, y0), pic.to_view(x1, y1)
            rect = QRectF(ox + vx0 * scale, oy + vy0 * scale, (vx1 - vx0) * scale, (vy1 - vy0) * scale)
            areas[k] = areas[k].united(rect) if k in areas else rect
        framed = {k: area.adjusted(-8, -8, 8, 8) for k, area in areas.items()}
        for k, area in sorted(framed.items()):
            failed, x_out = k in pic.panel.failed, k in pic.panel.skipped
            pen = QPen(verdict_colour("fail") if failed else X_OUT if x_out else PANEL_BOARD, 2 if failed else 1.5)
            pen.setStyle(Qt.PenStyle.DashLine)
            p.setPen(pen)
            p.drawRect(area)
            title, serial = board_label(pic.panel, k)
            metrics = p.fontMetrics()
            # a serial as wide as the room up to the next board of its row (the view's edge for the last)
            right = min((a.left() for a in framed.values() if a.left() > area.left() and a.top() < area.bottom()
                         and area.top() < a.bottom()), default=float(p.device().width()))
            width = max(metrics.horizontalAdvance(title), right - area.left() - 14)
            lines = [title] + ([metrics.elidedText(serial, Qt.TextElideMode.ElideMiddle, int(width))] if serial else [])
            tag = QRectF(area.left(), area.bottom() + 1, max(metrics.horizontalAdvance(t) for t in lines) + 8,
                         len(lines) * metrics.height() + 2)  # below its frame: clear of its parts and their labels
            if failed:
                p.fillRect(tag, verdict_colour("fail"))
            p.setPen(Qt.GlobalColor.white if failed else X_OUT if x_out else PANEL_BOARD)
            p.drawText(tag, Qt.AlignmentFlag.AlignCenter, "\n".join(lines))

    @staticmethod
    def _draw_fiducials(p: QPainter, pic: BoardPicture, ox: float, oy: float, scale: float) -> None:
        """Each fiducial found as a cyan ring with its name; one not found as a red dashed ring at its place."""
        r = max(6.0, 7 * scale)
        for mark in pic.marks:
            x, y = ox + mark.at[0] * scale, oy + mark.at[1] * scale
            pen = QPen(FIDUCIAL_FOUND if mark.found else FIDUCIAL_MISSING, 2)
            if not mark.found:
                pen.setStyle(Qt.PenStyle.DashLine)
            p.setPen(pen)
            p.drawEllipse(QRectF(x - r, y - r, 2 * r, 2 * r))
            p.drawLine(QPointF(x - r * 1.4, y), QPointF(x + r * 1.4, y))
            p.drawLine(QPointF(x, y - r * 1.4), QPointF(x, y + r * 1.4))
            p.drawText(QPointF(x + r + 2, y - r), mark.name)


class LineViewTab(QWidget):
    def __init__(self, backend: Any) -> None:
        super().__init__()
        self.backend = backend
        self.board = BoardView()
        self.caption = QLabel("")
        self.caption.setObjectName("boardCaption")
        f = self.caption.font()
        f.setPointSizeF(f.pointSizeF() * 1.3)
        f.setBold(True)
        self.caption.setFont(f)
        self.registration = QLabel("")  # the board's registration: residual, shift and rotation, or why it failed
        self.registration.setObjectName("boardRegistration")
        self.registration.setWordWrap(True)
        self.hint = QLabel("")  # said once for the line: the boards' fiducials say the camera is tilted
        self.hint.setObjectName("registrationHint")
        self.hint.setWordWrap(True)
        self.hint.setStyleSheet(status_style(True, bold_error=False))
        self.hint.hide()

        self.source = QLineEdit(getattr(getattr(backend, "setup", None), "source", "") or "")
        self.source.setPlaceholderText("synthetic | folder:DIR | watch:DIR | replay:FILE | camera:URI")
        self.start_btn, self.pause_btn, self.stop_btn = QPushButton("Start"), QPushButton("Pause"), QPushButton("Stop")
        for b in (self.start_btn, self.pause_btn, self.stop_btn):
            b.setMinimumWidth(96)
        self.start_btn.clicked.connect(self._start)
        self.pause_btn.clicked.connect(self._pause)
        self.stop_btn.clicked.connect(backend.stop if backend.can_control else (lambda: None))
        self.state = QLabel("idle")
        self.message = QLabel("")
        self.message.setWordWrap(True)

        controls = QGroupBox("Line")
        g = QGridLayout(controls)
        g.addWidget(QLabel("Source"), 0, 0)
        g.addWidget(self.source, 0, 1, 1, 4)
        g.addWidget(self.start_btn, 1, 1)
        g.addWidget(self.pause_btn, 1, 2)
        g.addWidget(self.stop_btn, 1, 3)
        g.addWidget(self.state, 1, 4)
        g.addWidget(self.message, 2, 0, 1, 5)
        g.setColumnStretch(4, 1)
        if not backend.can_control:
            for w in (self.source, self.start_btn, self.pause_btn, self.stop_btn):
                w.setEnabled(False)
            self.message.setText(backend.label)

        self.counters = QLabel("")
        self.counters.setTextFormat(Qt.TextFormat.RichText)
        self.counters.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        counts = QGroupBox("Counts")
        QVBoxLayout(counts).addWidget(self.counters)

        self.defects = QListWidget()
        self.defects.setIconSize(QSize(CROP_ICON, CROP_ICON))
        self.defects.setSpacing(2)
        defects = QGroupBox("Recent defects (newest first)")
        dv = QVBoxLayout(defects)
        dv.addWidget(self.defects)
        self.review_bar = ReviewBar(backend)
        dv.addWidget(self.review_bar)
        self.defects.currentItemChanged.connect(
            lambda item, _prev: self.review_bar.set_part(item.data(Qt.ItemDataRole.UserRole) if item else None))

        left = QVBoxLayout()
        left.addWidget(self.caption)
        left.addWidget(self.registration)
        left.addWidget(self.hint)
        left.addWidget(self.board, 1)
        left.addWidget(controls)
        right = QVBoxLayout()
        right.addWidget(counts)
        right.addWidget(defects, 1)
        root = QHBoxLayout(self)
        root.addLayout(left, 3)
        root.addLayout(right, 1)
        self._shown_serial: str | None = None
        self._shown_defect: int | None = None
        self._crop_cache: dict[str, QPixmap] = {}

    def _start(self) -> None:
        try:
            self.backend.start(self.source.text().strip() or None)
        except (RuntimeError, ValueError) as exc:
            self.message.setText(str(exc))

    def _pause(self) -> None:
        if self.pause_btn.text() == "Pause":
            self.backend.pause()
        else:
            self.backend.resume()

    def refresh(self, snap: dict[str, Any]) -> None:
        ctl = snap.get("controller") or {}
        state = snap.get("state", "idle")
        phase = ctl.get("phase", state)
        shown = state if phase in ("running",) else phase
        self.state.setText(f"<b>{shown}</b>" + (f" — {ctl.get('source')}" if ctl.get("source") else ""))
        if self.backend.can_control:
            running = phase == "running"
            self.start_btn.setEnabled(phase in ("idle", "stopped", "failed"))
            self.pause_btn.setEnabled(running)
            self.pause_btn.setText("Resume" if state == "paused" else "Pause")
            self.stop_btn.setEnabled(phase in ("running", "preparing"))
            self.source.setEnabled(self.start_btn.isEnabled())
            log = ctl.get("log") or []
            self.message.setText(ctl.get("error") or (log[-1] if log else ""))
        elif ctl.get("error"):
            self.message.setText(ctl["error"])
        hint = (snap.get("registration") or {}).get("hint")
        self.hint.setText(f"Registration: {hint}" if hint else "")
        self.hint.setVisible(bool(hint))
        if "engine" in snap:
            v, pb = snap.get("verdicts", {}), snap.get("panel_boards")  # pb: a panel line's boards one by one
            tp = snap["throughput"]
            self.counters.setText(
                f"<table cellspacing=4>"
                f"<tr><td>Boards</td><td align=right><b>{snap['boards']}</b></td></tr>"
                f"<tr><td>Parts</td><td align=right><b>{snap['parts']}</b></td></tr>"
                f"<tr><td>Pass / fail / error</td><td align=right><b>{v.get('pass', 0)} / {v.get('fail', 0)} / "
                f"{v.get('error', 0)}</b></td></tr>"
                + (f"<tr><td>Panels' boards: pass / fail / error</td><td align=right><b>{pb.get('pass', 0)} / "
                   f"{pb.get('fail', 0)} / {pb.get('error', 0)}</b></td></tr>" if pb else "")
                + f"<tr><td>Parts/s</td><td align=right><b>{tp['parts_per_s']:.1f}</b></td></tr>"
                f"<tr><td>Expert switches</td><td align=right><b>{snap['engine']['switches']}</b></td></tr>"
                f"<tr><td>Stored</td><td align=right><b>{snap['results']['written']}</b></td></tr>"
                f"<tr><td>Recipe</td><td align=right><b>{snap['line']['recipe']}</b> "
                f"{snap['line']['ruleset_version']}</td></tr></table>")

    def refresh_slow(self) -> None:
        """Once a second: the newest board and the defect list (database reads)."""
        pic = self.backend.board()
        if pic is not None and pic.serial != self._shown_serial:
            self._shown_serial = pic.serial
            self.board.show_board(pic)
            bad = sum(1 for b in pic.boxes if b.verdict not in ("pass", SKIPPED))
            flagged = [f"{bad} part{'s' if bad != 1 else ''} flagged"] if bad else []
            boards = [pic.panel.describe()] if pic.panel is not None and pic.panel.describe() else []
            self.caption.setText(f"{'Panel' if pic.panel is not None else 'Board'} {pic.serial}: {pic.verdict.upper()}"
                                 + (f" ({'; '.join(boards + flagged)})" if boards or flagged else ""))
            self.registration.setText(pic.describe_registration())
            self.registration.setStyleSheet(f"color: {ERROR_TEXT}" if pic.registration.error else "")
            self.caption.setStyleSheet(f"color: {verdict_colour(pic.verdict).name()}")
        store, scope = self.backend.store(), self.backend.scope()
        if store is None or scope is None:
            return
        rows = store.recent_parts(scope, limit=DEFECTS_SHOWN)
        newest = rows[0][1].id if rows else None
        if newest == self._shown_defect:
            return
        self._shown_defect = newest
        current = self.defects.currentItem()
        keep = current.data(Qt.ItemDataRole.UserRole) if current is not None else None
        self.defects.blockSignals(True)  # a rebuilt list keeps the part under review selected
        self.defects.clear()
        for insp, part in rows:
            bought = store.part_numbers(insp.ruleset_version).get(part.ref)  # the BOM's: what to fetch for a rework
            item = QListWidgetItem(f"{part.ref} ({part.component_type}{', ' + bought if bought else ''}): "
                                   f"{part.defect_class}\n"
                                   f"board {insp.board_serial}  {insp.started_at:%H:%M:%S}")
            item.setForeground(verdict_colour(part.verdict))
            pix = self._crop(insp.uuid, part.ref, part.crop_path)
            if pix is not None:
                item.setIcon(QIcon(pix))
            make = part.approved_make  # flagged though compared with an approved make's window: the engineer's to see
            item.setToolTip((part.crop_path or "no crop kept") + (f"\ncompared with the approved make {make}"
                                                                  if make else ""))
            item.setData(Qt.ItemDataRole.UserRole, (insp.uuid, part.ref, part.verdict, part.expert))
            self.defects.addItem(item)
            if keep is not None and tuple(keep) == (insp.uuid, part.ref, part.verdict, part.expert):
                self.defects.setCurrentItem(item)
        self.defects.blockSignals(False)

    def _crop(self, uuid: str, ref: str, path: str | None) -> QPixmap | None:
        if not path:
            return None
        if path not in self._crop_cache:
            image = self.backend.crop_image(uuid, ref, path)
            if image is None:
                return None
            pix = bgr_pixmap(image).scaled(CROP_ICON, CROP_ICON, Qt.AspectRatioMode.KeepAspectRatio,
                                           Qt.TransformationMode.FastTransformation)
            if len(self._crop_cache) > 200:
                self._crop_cache.clear()
            self._crop_cache[path] = pix
        return self._crop_cache[path]


def board_label(panel: PanelResult, k: int) -> tuple[str, str]:
    """What a panel's board `k` is called in the board view: its number (or that it is an x-out), and on a line of
    its own its own serial where it has one (read from its code, or its NOREAD), else ""."""
    if k in panel.skipped:
        return f"board {k}: x-out", ""
    return f"board {k}", panel.serials.get(k, "")
