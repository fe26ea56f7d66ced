"""Tab 5, history: stored results filtered by time, board (its serial or the Hermes BoardId the line gave it),
verdict, component and review (not reviewed, with verdict fail: the review queue), each part with the BOM's part
number its board's rule set gave its place; a result's crop (with the box its detector drew, and those the reviewer
draws where the defects are: ui/crop_picker.py) and the operator's review of its call; CSV export of exactly the
filtered rows (the same query and writer as `inspector export`)."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from PySide6.QtCore import QDateTime, Qt
from PySide6.QtGui import QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDateTimeEdit,
    QDialog,
    QFileDialog,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inspector.endpoint import EndpointError
from inspector.results.review_boxes import Box, ReviewBox
from inspector.results.scope import PLANT
from inspector.results.store import COUNT_CAP, Filters
from inspector.results.units import PanelResult
from inspector.routing.panel import FRAME

from ..crop_picker import CropPicker
from ..review_bar import ReviewBar
from ..style import bgr_pixmap, verdict_colour

REVIEWED = ("reviewed or not", "not reviewed", "reviewed")  # the review filter's choices
COLUMNS = ("Time", "Board", "Board verdict", "Ref", "Component", "Verdict", "Defect", "Score", "Expert", "Weights",
           "Crop kept", "Review", "BoardId", "Approved make", "Part number", "Panel board")
BOARD_ID, MAKE, NUMBER, PANEL = (COLUMNS.index(c) for c in ("BoardId", "Approved make", "Part number", "Panel board"))
SHOWN = 2000  # rows in the table; the export writes all that match
PREVIEW = 320  # px, the selected row's crop
REPORT_WIDTH = 560  # px, each plot of an expert report


class HistoryTab(QWidget):
    def __init__(self, backend: Any) -> None:
        super().__init__()
        self.backend = backend
        now = QDateTime.currentDateTime()
        self.use_since, self.use_until = QCheckBox("From"), QCheckBox("Until")
        self.since = QDateTimeEdit(now.addSecs(-3600), calendarPopup=True, displayFormat="yyyy-MM-dd HH:mm:ss")
        self.until = QDateTimeEdit(now.addSecs(3600), calendarPopup=True, displayFormat="yyyy-MM-dd HH:mm:ss")
        self.board = QLineEdit(placeholderText="board serial")
        self.board_id = QLineEdit(placeholderText="Hermes BoardId")
        self.board_id.setToolTip("the BoardId an SMT line's Hermes lane gave the board (what the MES knows it by)")
        self.verdict = QComboBox()
        self.verdict.addItems(("any verdict", "pass", "fail", "error"))
        self.component = QComboBox()
        self.component.addItem("any component")
        self.reviewed = QComboBox()
        self.reviewed.addItems(REVIEWED)
        self.reviewed.setToolTip("not reviewed, with verdict fail: the flagged parts nobody has judged yet (the review "
                                 "queue)")
        self.search_btn, self.export_btn = QPushButton("Search"), QPushButton("Export CSV…")
        self.search_btn.clicked.connect(self.search)
        self.export_btn.clicked.connect(lambda: self.export())
        self.board.returnPressed.connect(self.search)
        self.board_id.returnPressed.connect(self.search)
        filters = QGroupBox("Filter")
        g = QGridLayout(filters)
        g.addWidget(self.use_since, 0, 0)
        g.addWidget(self.since, 0, 1)
        g.addWidget(self.use_until, 0, 2)
        g.addWidget(self.until, 0, 3)
        g.addWidget(self.board, 0, 4)
        g.addWidget(self.board_id, 0, 5)
        g.addWidget(self.verdict, 0, 6)
        g.addWidget(self.component, 0, 7)
        g.addWidget(self.reviewed, 0, 8)
        g.addWidget(self.search_btn, 0, 9)
        g.addWidget(self.export_btn, 0, 10)
        g.setColumnStretch(4, 1)
        g.setColumnStretch(5, 1)

        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setAlternatingRowColors(True)
        # columns as wide as what they hold (a serial, a BoardId's 36 characters), set once per search; the panel
        # scrolls sideways rather than cut every cell to a twelfth of its width
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.cellDoubleClicked.connect(lambda row, _col: self.open_crop(row))
        self.table.currentCellChanged.connect(lambda row, *_: self.preview_crop(row))
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.preview = CropPicker(PREVIEW)
        self.preview.show_text("select a row to see its crop")
        self.preview.setToolTip("dashed amber: the box the detector drew; drag a box where each defect is to send "
                                "them with a confirmed defect or an escape (cyan, each of the class chosen under "
                                "\"really:\" as it is drawn); right-click a box to take it away")
        self.preview_text = QLabel("")
        self.preview_text.setWordWrap(True)
        self.preview_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        crop = QGroupBox("Crop")
        cv = QVBoxLayout(crop)
        cv.addWidget(self.preview)
        cv.addWidget(self.preview_text)
        cv.addStretch(1)
        self.review_bar = ReviewBar(backend)
        self.review_bar.on_stored = self._reviewed
        self.review_bar.take_boxes(self.preview.clear_boxes)
        self.preview.on_boxes = self.review_bar.set_boxes
        self.preview.class_of_new = self.review_bar.box_class
        cv.addWidget(self.review_bar)
        self.report_btn = QPushButton("Expert report…")
        self.report_btn.setToolTip("the confusion matrix and precision-recall curves of the expert version that "
                                   "called this part, from its held-out crops")
        self.report_btn.clicked.connect(lambda: self.open_report(self.table.currentRow()))
        cv.addWidget(self.report_btn)
        body = QHBoxLayout()
        body.addWidget(self.table, 1)
        body.addWidget(crop)
        v = QVBoxLayout(self)
        v.addWidget(filters)
        v.addLayout(body, 1)
        v.addWidget(self.status)
        self.crop_paths: list[str | None] = []
        self.parts: list[tuple[str, str, str, str]] = []  # inspection id, ref, verdict, deciding expert a row
        self.boxes: list[tuple[Box | None, tuple[ReviewBox, ...]]] = []  # the detector's box and the review's, a row
        self.dialog: QDialog | None = None
        self.searched: Filters | None = None

    def filters(self) -> Filters:
        verdict = self.verdict.currentText()
        component = self.component.currentText()
        return Filters(since=_utc(self.since.dateTime()) if self.use_since.isChecked() else None,
                       until=_utc(self.until.dateTime()) if self.use_until.isChecked() else None,
                       board=self.board.text().strip() or None,
                       board_id=self.board_id.text().strip() or None,
                       verdict=None if verdict == "any verdict" else verdict,
                       component=None if component == "any component" else component,
                       reviewed={REVIEWED[1]: False, REVIEWED[2]: True}.get(self.reviewed.currentText()))

    def search(self) -> int:
        """Fill the table with the newest matching rows; returns how many match in all."""
        store, scope = self.backend.store(), self.backend.scope()
        if store is None:
            self.status.setText("no results database yet: start the line; attached, give --db URL, or --token-file "
                                "for the kiosk's results over its API")
            return 0
        if scope is None:
            self.status.setText("waiting for the kiosk to say which line it is (its /status)")
            return 0
        self._components(store.component_types(scope))
        # the export writes what this search found: this line's boards stored up to now
        f = replace(self.filters(), scope=scope, stored_upto=store.last_id(scope))
        try:
            total = store.count_components(f, cap=COUNT_CAP)
            shown = list(store.component_rows(f, newest=SHOWN))
        except (ValueError, EndpointError) as exc:  # a search this database cannot run (BoardIds before 0008)
            self.searched = None  # nothing found, so an export writes nothing rather than everything
            self.table.setCurrentCell(-1, -1)
            self.review_bar.set_part(None)
            self.table.setRowCount(0)
            self.crop_paths, self.parts, self.boxes = [], [], []
            self.status.setText(str(exc))
            return 0
        self.searched = f
        # new rows: nothing is selected, so the review bar never acts on a part of the previous search
        self.table.setCurrentCell(-1, -1)
        self.review_bar.set_part(None)
        self.table.setRowCount(len(shown))
        self.crop_paths, self.parts, self.boxes = [], [], []
        reviews = store.reviews_of(list({insp.uuid for insp, _ in shown}))
        for r, (insp, part) in enumerate(shown):
            review = reviews.get((insp.uuid, part.ref))
            values = (_local(insp.started_at), insp.board_serial, insp.verdict, part.ref, part.component_type,
                      part.verdict, part.defect_class, "" if part.score is None else f"{part.score:.3f}",
                      part.expert, (part.weights_sha256 or "")[:12], "yes" if part.crop_path else "",
                      _review_text(review), insp.hermes_board_id or "", part.approved_make or "",
                      store.part_numbers(insp.ruleset_version).get(part.ref, ""), *_panel_cell(insp.panel, part.ref))
            for c, value in enumerate(values[:len(COLUMNS)]):
                item = QTableWidgetItem(value)
                if c in (2, 5):
                    item.setForeground(verdict_colour(value))
                if c == MAKE and value:
                    item.setToolTip("compared with this approved make's window (`inspector board approve`), not "
                                    "the golden board's")
                if c == NUMBER and value:
                    item.setToolTip("the BOM's part number for this place, in the rule set the board was inspected "
                                    "under (`inspector board import --bom`)")
                if c == PANEL and value:
                    item.setForeground(verdict_colour(values[-1]))
                    own = insp.panel.serials.get(insp.panel.position_of(part.ref))
                    item.setToolTip((f"this board's serial: {own}\n" if own else "")
                                    + (insp.panel.describe() or "every board of the panel passed"))
                self.table.setItem(r, c, item)
            self.crop_paths.append(part.crop_path)
            self.parts.append((insp.uuid, part.ref, part.verdict, part.expert))
            self.boxes.append((_detector_box(part), review.drawn_boxes if review is not None else ()))
        # a line without a Hermes lane has no BoardIds, one without panels no positions, one without approved makes
        # or a BOM none of them: no empty columns for them
        for c in (BOARD_ID, MAKE, NUMBER, PANEL):
            self.table.setColumnHidden(c, not any(self.table.item(r, c).text() for r in range(len(shown))))
        self.table.resizeColumnsToContents()
        more = f" (the newest {SHOWN} shown)" if total > SHOWN else ""
        many = f"over {COUNT_CAP}" if total > COUNT_CAP else str(total)
        self.status.setText(f"{many} component results of {scope.label()} match{more}; double-click a row to open "
                            "its crop")
        return total

    def _components(self, names: list[str]) -> None:
        current = self.component.currentText()
        have = [self.component.itemText(i) for i in range(1, self.component.count())]
        if have != names:
            self.component.blockSignals(True)
            self.component.clear()
            self.component.addItem("any component")
            self.component.addItems(names)
            self.component.setCurrentText(current)
            self.component.blockSignals(False)

    def export(self, path: str | None = None) -> int:
        """Write the rows the last search matched (all of them, not only those shown) to a CSV file."""
        store = self.backend.store()
        if store is None:
            self.status.setText("no results database to export from")
            return 0
        # the widgets' filters against those the last search ran with (it added the line and a stored-up-to bound):
        # unchanged, the export writes exactly the rows that search found
        if self.searched is None or replace(self.searched, stored_upto=None, scope=PLANT) != self.filters():
            self.search()
            if self.searched is None:  # the search was refused: its reason is on the status line
                return 0
        if path is None:
            path, _ = QFileDialog.getSaveFileName(self, "Export the filtered results", "results.csv", "CSV (*.csv)")
            if not path:
                return 0
        try:
            with open(path, "w", newline="", encoding="utf-8") as out:
                n = store.export_csv(out, self.searched)
        except OSError as exc:
            self.status.setText(f"cannot write {path}: {exc.strerror}; choose another place")
            return 0
        self.status.setText(f"{n} component results exported to {path}")
        return n

    def _crop_image(self, row: int):  # noqa: ANN202 - (its path, an OpenCV image or None)
        path = self.crop_paths[row] if 0 <= row < len(self.crop_paths) else None
        if not path:
            return path, None
        uuid, ref, *_ = self.parts[row]
        return path, self.backend.crop_image(uuid, ref, path)

    def _reviewed(self, text: str) -> None:
        row = self.table.currentRow()
        if 0 <= row < self.table.rowCount():
            self.table.setItem(row, 11, QTableWidgetItem(text))
            if row < len(self.boxes):  # selected again, the row shows the boxes it was reviewed with
                self.boxes[row] = (self.boxes[row][0], self.review_bar.boxes)

    def preview_crop(self, row: int) -> None:
        if 0 <= row < len(self.parts):
            self.review_bar.set_part(self.parts[row], self.table.item(row, 11).text() or None)
        path, image = self._crop_image(row)
        if image is None:
            self.preview.show_text("no crop kept for this result" if not path else f"crop file missing:\n{path}")
            self.preview_text.setText("")
            return
        detector, drawn = self.boxes[row]
        self.preview.show_crop(image, detector, drawn)
        self.review_bar.set_boxes(drawn)  # reviewed again, the part keeps the boxes it was reviewed with
        t = self.table
        self.preview_text.setText(f"<b>{t.item(row, 3).text()}</b> ({t.item(row, 4).text()}) on board "
                                  f"{t.item(row, 1).text()}: {t.item(row, 6).text()}, score {t.item(row, 7).text()}"
                                  + (f"<br>compared with the approved make {make}" if (make := t.item(row, MAKE)
                                                                                      .text()) else "")
                                  + f"<br><small>{path}</small>")

    def open_crop(self, row: int) -> QDialog | None:
        path, image = self._crop_image(row)
        if not path:
            self.status.setText("no crop was kept for this result (--keep-crops failed keeps failed parts only)")
            return None
        if image is None:
            self.status.setText(f"the crop file {path} is missing or unreadable")
            return None
        dialog = QDialog(self)
        dialog.setWindowTitle(f"{self.table.item(row, 3).text()} on board {self.table.item(row, 1).text()}")
        label = QLabel()
        label.setPixmap(bgr_pixmap(image).scaled(320, 320, Qt.AspectRatioMode.KeepAspectRatio,
                                                 Qt.TransformationMode.FastTransformation))
        v = QVBoxLayout(dialog)
        v.addWidget(label)
        v.addWidget(QLabel(f"{self.table.item(row, 6).text()} ({self.table.item(row, 5).text()}), "
                           f"score {self.table.item(row, 7).text()}\n{path}"))
        dialog.show()
        self.dialog = dialog
        return dialog


    def open_report(self, row: int) -> QDialog | None:
        """The plots of the expert version that called the row's part, in a dialog (or the reason there are none)."""
        if not 0 <= row < self.table.rowCount():
            self.status.setText("select a result first")
            return None
        expert, weights = self.table.item(row, 8).text(), self.table.item(row, 9).text()
        files, why = self.backend.expert_report(expert, weights)
        if not files:
            self.status.setText(why)
            return None
        dialog = QDialog(self)
        dialog.setWindowTitle(f"{expert} version {weights}")
        h = QHBoxLayout(dialog)
        for path in files:
            label = QLabel()
            label.setPixmap(QPixmap(str(path)).scaledToWidth(REPORT_WIDTH, Qt.TransformationMode.SmoothTransformation))
            label.setToolTip(str(path))
            h.addWidget(label)
        dialog.show()
        self.dialog = dialog
        return dialog


def _panel_cell(panel: PanelResult | None, ref: str) -> tuple[str, str]:
    """(the part's board on its panel, `2 of 6` or `frame`; that board's verdict), both empty off a panel."""
    if panel is None:
        return "", ""
    k = panel.position_of(ref)
    return ("frame" if k == FRAME else f"{k} of {panel.boards}"), ("fail" if k in panel.failed else "pass")


def _detector_box(part: Any) -> Box | None:  # noqa: ANN401 - a stored part or the kiosk's view of one
    """The box the part's detector drew (crop pixels), where it drew one."""
    if getattr(part, "box_x0", None) is None:
        return None
    return (part.box_x0, part.box_y0, part.box_x1, part.box_y1)


def _review_text(review: Any) -> str:  # noqa: ANN401 - a Review row or None
    if review is None:
        return ""
    text = review.call.replace("_", " ")
    return f"{text}: {review.correct_class}" if review.correct_class else text


def _utc(dt: QDateTime) -> datetime:
    """The edit's local time as UTC, which is what the database stores."""
    return datetime.fromtimestamp(dt.toSecsSinceEpoch(), tz=timezone.utc)


def _local(ts: datetime) -> str:
    aware = ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)
    return aware.astimezone().strftime("%Y-%m-%d %H:%M:%S")


