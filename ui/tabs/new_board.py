"""New board: a plant's own board from its CAD to the line, the way an AOI is programmed.

Import the CAD (inspector/board; either side, a centroid file with its profile, the import's notes shown), add
golden photos and see every part's window drawn where the registration put it (click a spot on the photo, then the
same spot on the CAD drawing, three times or more, where the outline does not register it; a tray's boards each
drawn and listed), teach with a progress bar (on every board of a tray of golden boards when asked), read the
validation table, pass the false calls of boards known good by lower thresholds within the recall allowed
(board_tune_panel.py), and make the taught board the line's (from its next start: a new board brings its own
experts). The slow steps run off the GUI thread (worker.Job).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QMouseEvent, QResizeEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inspector.access.roles import Permission

from ..style import ERROR_TEXT, bgr_pixmap
from ..worker import OneJobAtATime
from .board_tune_panel import TunePanel

PICTURE_PX = 420  # the longer side of each picture shown
EPOCH = re.compile(r"^epoch (\d+)/(\d+)")
STEPS = ("registered", "crops:", "epoch", "validation")  # what teaching says, in order (progress before epochs)
VALIDATION = ("Type", "Parts", "Held out", "Good", "Defects", "Threshold", "Recall", "False calls")  # teaching's
CHANGES = ("Part", "Change", "Was", "Now")  # a revision's (board/revision.py), in the same table


class Progress(QObject):
    """Teaching's messages, from its thread to the GUI's (a queued signal)."""
    said = Signal(str)


class ClickPicture(QLabel):
    """A picture that reports where it was clicked, in the pixels of the image it shows. It fits the room the tab
    leaves it, at most PICTURE_PX a side."""

    clicked = Signal(float, float)

    def __init__(self) -> None:
        super().__init__("")
        self.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.setMinimumSize(PICTURE_PX // 2, PICTURE_PX // 2)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Ignored)  # the pixmap never grows the tab
        self.scale = 1.0
        self.image: np.ndarray | None = None

    def show_image(self, image: np.ndarray) -> None:
        self.image = image
        self._fit()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        if self.image is not None:
            self._fit()

    def _fit(self) -> None:
        assert self.image is not None
        h, w = self.image.shape[:2]
        room = min(self.width() / w, self.height() / h) if self.width() > 1 and self.height() > 1 else 1.0
        self.scale = min(PICTURE_PX / max(h, w), room)
        shown = cv2.resize(self.image, None, fx=self.scale, fy=self.scale, interpolation=cv2.INTER_AREA)
        self.setPixmap(bgr_pixmap(shown))

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt's name
        if self.pixmap() is not None and not self.pixmap().isNull():
            p = event.position()
            self.clicked.emit(p.x() / self.scale, p.y() / self.scale)
        super().mousePressEvent(event)


class NewBoardTab(OneJobAtATime, QWidget):
    job_name = "new-board"

    def __init__(self, backend: Any, work_root: Path) -> None:
        super().__init__()
        self.backend, self.work_root = backend, Path(work_root)
        self.rules_path: Path | None = None
        self.taught: Any = None  # teaching's answer (app/board_teach.py BoardTaught)
        # the line's board to be: (a taught or revised rule set, its zoo), or the name of a revised set an attached
        # kiosk wrote into its rule folder
        self.ready: tuple[Path, Path] | str | None = None
        self.points: list[tuple[tuple[float, float], tuple[float, float]]] = []
        self._photo_point: tuple[float, float] | None = None
        self._overlay_scale = 1.0  # the photo shown is the overlay: the photo at this scale
        self.progress_signal = Progress()
        self.progress_signal.said.connect(self._progress)

        self.cad, cad_btn = self._file_field("a KiCad .kicad_pcb, an Eagle .brd, IPC-2581, an ODB++ job (its folder "
                                             "or .tgz) or a centroid file", "CAD or centroid file")
        self.step = QLineEdit()
        self.step.setPlaceholderText("an ODB++ job's step, where several place parts (the board, or its panel)")
        self.profile, profile_btn = self._file_field("a centroid file's profile: its columns, units, bottom x "
                                                     "(optional)", "centroid profile (YAML)")
        self.gerber = QLineEdit()
        self.gerber.setPlaceholderText("a centroid file's Gerbers (a folder or .zip): every part's pads and the "
                                       "board's edge (optional)")
        gerber_btn = QPushButton("Folder…")
        gerber_btn.clicked.connect(self._browse_gerbers)
        self.bom, bom_btn = self._file_field("the bill of materials (CSV or a workbook): which parts are fitted, what "
                                             "each is (optional)", "bill of materials (CSV, TXT, .xlsx, .xls or .ods)")
        self.bom_profile, bom_profile_btn = self._file_field("the BOM's profile: its columns' own names (optional)",
                                                             "BOM profile (YAML)")
        self.library, lib_btn = self._file_field("the plant's package library (optional)", "package library (YAML)")
        self.scale = QDoubleSpinBox(decimals=2, minimum=1.0, maximum=200.0, value=20.0, suffix=" px/mm")
        self.side = QComboBox()
        self.side.addItems(["top", "bottom"])
        self.side.setToolTip("The side the camera sees: the bottom's rule set is the board turned over about its "
                             "vertical axis, as the camera over it sees it")
        self.before_through_hole = QCheckBox("before through-hole")
        self.before_through_hole.setToolTip("The station stands before the through-hole parts go in (an AOI after "
                                            "paste or reflow): they are not inspected, except those placed in paste")
        self.pin_in_paste = QLineEdit()
        self.pin_in_paste.setPlaceholderText("J1, J2")
        self.pin_in_paste.setToolTip("Through-hole parts the placement machine puts in paste before reflow (a "
                                     "connector's legs): inspected before the through-hole parts too")
        self.pin_in_paste.setEnabled(False)
        self.before_through_hole.toggled.connect(self.pin_in_paste.setEnabled)
        self.fitted_later = QLineEdit()
        self.fitted_later.setPlaceholderText("BT1, HS1")
        self.fitted_later.setToolTip("Parts fitted after this station (by hand, a press, a later line: a battery, a "
                                     "heat sink): not inspected here")
        self.import_btn = QPushButton("Import")
        self.import_btn.clicked.connect(self.import_board)
        self.summary = QLabel("Import a board's CAD to begin.")
        self.summary.setWordWrap(True)

        self.photos = QListWidget()
        self.photos.setMaximumHeight(70)
        add_btn = QPushButton("Add golden photos…")
        add_btn.clicked.connect(self._add_photos)
        self.camera_btn = QPushButton("Take from the line's camera")
        self.camera_btn.setToolTip("The line camera's newest frame (a board put under it) as a golden photo that says "
                                   "the settings the camera exposed it with: teaching asks the camera for them")
        self.camera_btn.clicked.connect(self.take_photo)
        self.register_btn = QPushButton("Register")
        self.register_btn.clicked.connect(self.register)
        self.save_points_btn = QPushButton("Save the picked points")
        self.save_points_btn.clicked.connect(self.save_points)
        self.photo = ClickPicture()
        self.photo.clicked.connect(self._photo_clicked)
        self.board = ClickPicture()
        self.board.clicked.connect(self._board_clicked)
        self.registration = QLabel("")
        self.registration.setWordWrap(True)

        self.teach_btn = QPushButton("Teach")
        self.teach_btn.clicked.connect(self.teach)
        self.epochs = QDoubleSpinBox(decimals=0, minimum=1, maximum=200, value=30, suffix=" epochs")
        self.every_board = QCheckBox("Every board of a photo")
        self.every_board.setToolTip("A tray of golden boards: each board a golden photo shows is a golden board. "
                                    "Unchecked, only the first board each photo registers is taken (a photo may "
                                    "hold boards that are not golden).")
        self.bar = QProgressBar()
        self.bar.setRange(0, 100)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.table = QTableWidget(0, len(VALIDATION))
        self._columns(VALIDATION)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.on_kiosk = hasattr(backend, "revise_line_board")  # attached: the kiosk revises the board it serves
        self.revise_btn = QPushButton("Revise the line's board" if self.on_kiosk else "Revise a taught board…")
        self.revise_btn.setToolTip(
            "The board imported here is a new revision (its CAD or BOM) of a board taught before: its taught experts "
            "serve it, and the places it changes get their golden windows from the photo selected in the list (a "
            "board built to the revision)" + (", or, with none listed, the newest board the kiosk's line inspected; "
                                              "the kiosk revises the board it serves" if self.on_kiosk else ""))
        self.revise_btn.clicked.connect(self._revise_chosen)
        self.photo_board = QSpinBox(minimum=0, maximum=99, prefix="board #")
        self.photo_board.setToolTip("Which board of the selected photo a revision takes its windows from, largest "
                                    "first, as Register lists them")
        self.activate_btn = QPushButton("Make it the line's board")
        self.activate_btn.clicked.connect(self.activate)
        self.tune_panel = TunePanel(backend)

        form = QFormLayout()
        row = QHBoxLayout()
        row.addWidget(self.cad, 1)
        row.addWidget(cad_btn)
        form.addRow("CAD", row)
        row = QHBoxLayout()  # one row for the three: each is for one kind of file only (a panel PC's 768 px)
        row.addWidget(self.step, 1)
        row.addWidget(self.profile, 1)
        row.addWidget(profile_btn)
        row.addWidget(self.bom_profile, 1)
        row.addWidget(bom_profile_btn)
        form.addRow("Step / profiles", row)
        row = QHBoxLayout()
        row.addWidget(self.gerber, 1)
        row.addWidget(gerber_btn)
        row.addWidget(self.bom, 1)
        row.addWidget(bom_btn)
        form.addRow("Gerbers / BOM", row)
        row = QHBoxLayout()
        row.addWidget(self.library, 1)
        row.addWidget(lib_btn)
        form.addRow("Library", row)
        row = QHBoxLayout()
        row.addWidget(self.scale)
        row.addWidget(QLabel("side"))
        row.addWidget(self.side)
        row.addWidget(self.before_through_hole)
        row.addWidget(QLabel("pin-in-paste"))
        row.addWidget(self.pin_in_paste)
        row.addWidget(QLabel("fitted later"))
        row.addWidget(self.fitted_later)
        row.addWidget(self.import_btn)
        row.addStretch(1)
        form.addRow("Camera scale", row)
        photos = QHBoxLayout()
        photos.addWidget(self.photos, 1)
        buttons = QVBoxLayout()
        for b in (add_btn, self.camera_btn, self.register_btn, self.save_points_btn):
            buttons.addWidget(b)
        photos.addLayout(buttons)
        pictures = QHBoxLayout()
        pictures.addWidget(self.photo, 1)
        pictures.addWidget(self.board, 1)
        teach = QHBoxLayout()
        teach.addWidget(self.epochs)
        teach.addWidget(self.every_board)
        teach.addWidget(self.teach_btn)
        teach.addWidget(self.revise_btn)
        teach.addWidget(self.photo_board)
        teach.addWidget(self.bar, 1)
        teach.addWidget(self.activate_btn)
        page = QWidget()  # scrolled: a board with many import notes needs more than a panel PC's 768 px
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(page)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)
        layout = QVBoxLayout(page)
        layout.addLayout(form)
        layout.addWidget(self.summary)
        layout.addLayout(photos)
        layout.addLayout(pictures, 2)
        layout.addWidget(self.registration)
        layout.addLayout(teach)
        layout.addWidget(self.status)
        results = QHBoxLayout()  # side by side: a panel PC's 768 px have no room for both stacked
        results.addWidget(self.table, 1)
        results.addWidget(self.tune_panel, 1)
        layout.addLayout(results, 1)
        self._enable()

    # -- state --------------------------------------------------------------------------------------
    def _enable(self) -> None:
        busy = self.busy
        imported = self.rules_path is not None
        self.import_btn.setEnabled(not busy)
        self.camera_btn.setEnabled(not busy and hasattr(self.backend, "camera_photo"))
        self.register_btn.setEnabled(imported and self.photos.count() > 0 and not busy)
        self.teach_btn.setEnabled(imported and self.photos.count() > 0 and not busy)
        self.save_points_btn.setEnabled(imported and len(self.points) >= 3)
        self.revise_btn.setEnabled(imported and not busy and (not self.on_kiosk or self.backend.may(Permission.RULES)))
        kiosks = isinstance(self.ready, str)  # a set in the kiosk's rule folder; else a local one, a kiosk cannot take
        self.activate_btn.setEnabled(self.ready is not None and not busy and self.backend.may(Permission.RULES)
                                     and hasattr(self.backend, "changeover" if kiosks else "activate_board"))

    def _say(self, text: str, error: bool = False) -> None:
        self.status.setStyleSheet(ERROR_TEXT if error else "")
        self.status.setText(text)


    def _file_field(self, placeholder: str, what: str) -> tuple[QLineEdit, QPushButton]:
        """A path's line edit and the Browse… button that fills it from a file dialog for `what`."""
        edit = QLineEdit()
        edit.setPlaceholderText(placeholder)
        button = QPushButton("Browse…")
        button.clicked.connect(lambda: self._browse(edit, what))
        return edit, button

    def _browse(self, edit: QLineEdit, what: str) -> None:
        path, _ = QFileDialog.getOpenFileName(self, f"Choose the {what}")
        if path:
            edit.setText(path)

    def _browse_gerbers(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Choose the folder of the board's Gerbers (or type a .zip)")
        if path:
            self.gerber.setText(path)

    def _add_photos(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self, "Golden photos", "", "Images (*.png *.jpg *.jpeg *.bmp *.tif)")
        self.add_photos([Path(p) for p in paths])

    def add_photos(self, paths: list[Path]) -> None:
        """Each photo listed, its tooltip the camera settings it says it was taken with (what teaching asks for)."""
        from inspector.camera.photo_settings import taken_with
        from inspector.yamlio import ConfigError

        for p in paths:
            try:
                taken = taken_with(p)
            except ConfigError as exc:
                self._list_photo(p, None, f"its camera settings cannot be read: {exc}")
            else:
                self._list_photo(p, taken)
        self._enable()

    def _list_photo(self, path: Path, taken: Any, unsaid: str = "it says no camera settings (not taken through "
                                                                  "the line's camera)") -> None:
        item = QListWidgetItem(str(path))
        item.setToolTip(taken.told() if taken is not None else unsaid)
        self.photos.addItem(item)

    def take_photo(self) -> None:
        """The line camera's newest frame added as a golden photo, saved under the tab's work folder."""
        out = self.work_root / "golden"
        self._run(lambda: self.backend.camera_photo(out), self._photo_taken)

    def _photo_taken(self, result: tuple[Path, Any]) -> None:
        path, taken = result
        self._list_photo(path, taken)  # what it says is known: not read back from the file
        self._enable()
        self._say(f"{path.name}: the line camera's newest frame, " + (
            f"{taken.told()} (teaching asks the camera for these)" if taken is not None else
            "from a camera that cannot say its settings (teaching leaves the rule set's camera settings as they are)"))

    def golden(self) -> list[Path]:
        return [Path(self.photos.item(i).text()) for i in range(self.photos.count())]

    # -- import -------------------------------------------------------------------------------------
    def import_board(self) -> None:
        from inspector.board.importing import import_board, recipe_name

        cad = Path(self.cad.text().strip())
        library, profile, gerber, bom, bom_profile = (_given(e) for e in (self.library, self.profile, self.gerber,
                                                                            self.bom, self.bom_profile))
        step = self.step.text().strip() or None
        side = self.side.currentText()
        if not cad.exists():
            self._say(f"{cad} does not exist: choose the board's CAD or centroid file (or an ODB++ job's or a "
                      "Gerber X3 set's folder)", error=True)
            return
        name = recipe_name(cad) if step is None else f"{recipe_name(cad)}-{step}"
        out = self.work_root / name / f"{name}.yaml"
        scale = self.scale.value()
        self._say(f"importing {cad.name}…")
        before, named, later = (self.before_through_hole.isChecked(), self.pin_in_paste.text().strip(),
                                self.fitted_later.text().strip())
        self._run(lambda: import_board(cad, out, scale, side, library, profile, name, step, gerber, bom,
                                       bom_profile, _station(before, named, later)),
                  lambda r: self._imported(out, side, *r))

    def _imported(self, out: Path, side: str, design: Any, imported: Any) -> None:
        from inspector.routing.rules import parse_rules

        inspected = sum(1 for f in imported.fates if f.inspected)
        left = "; ".join(f"{n} {why}" for why, n in imported.left_out().items())
        self.summary.setText(f"{design.source}: {len(design.parts)} parts, {inspected} inspected, "
                             f"{len(imported.types)} component types, {len(imported.fiducials)} fiducials"
                             + (f"; left out: {left}" if left else "") + f". Rule set: {out}"
                             + "".join(f"\nnote: {n}" for n in imported.notes))
        if not imported.rules_text:
            self._say(f"no part is inspected from the {side} side: nothing to teach", error=True)
            return
        self.rules_path, self.taught, self.ready, self.points = out, None, None, []
        self.board.show_image(cad_drawing(parse_rules(imported.rules_text, str(out))))
        self._say("imported: add golden photos and register them")

    # -- registration and picked points ------------------------------------------------------------
    def register(self) -> None:
        from inspector.app.board_photos import boards_of, overlay, overlay_scale, read_photo, registration_inputs
        from inspector.routing.rules import load_rules

        rules_path, path = self.rules_path, self.golden()[max(0, self.photos.currentRow())]

        def work() -> tuple[Path, float, str]:
            rules = load_rules(rules_path)
            photo = read_photo(path)
            found = list(boards_of(photo, path, rules, *registration_inputs(rules_path, rules)))
            drawn = overlay(photo, found, rules, rules_path.parent / "overlays" / f"{path.stem}.png")
            return drawn, overlay_scale(photo.shape), registered_text(path, found)

        self._run(work, self._registered)

    def _registered(self, result: tuple[Path, float, str]) -> None:
        drawn, self._overlay_scale, text = result
        image = cv2.imread(str(drawn), cv2.IMREAD_COLOR)
        if image is not None:
            self.photo.show_image(image)
        self.registration.setText(text)

    def _photo_clicked(self, x: float, y: float) -> None:
        self._photo_point = (x, y)
        self.registration.setText(f"photo point ({x:.0f}, {y:.0f}): now click the same spot on the CAD drawing")

    def _board_clicked(self, x: float, y: float) -> None:
        if self._photo_point is None:
            self.registration.setText("click the photo first, then the same spot on the CAD drawing")
            return
        px, py = self._photo_point  # on the overlay, the photo shrunk (board_photos.overlay): back to the photo's px
        self.points.append(((px / self._overlay_scale, py / self._overlay_scale), (x, y)))
        self._photo_point = None
        self.registration.setText(f"{len(self.points)} point(s) picked" + ("" if len(self.points) >= 3 else
                                                                         ": pick at least 3"))
        self._enable()

    def save_points(self) -> None:
        from inspector.app.board_photos import points_path, write_points

        path = write_points(points_path(self.rules_path), self.points)
        self._say(f"saved {len(self.points)} points to {path}: every photo of this camera registers on them")
        self.register()

    # -- teaching -----------------------------------------------------------------------------------
    def teach(self) -> None:
        from inspector.app.board_teach import BoardTeachPlan, teach_board

        rules = self.rules_path
        out = rules.with_name(rules.stem + ".taught.yaml")
        n = 1
        while (rules.parent / f"teach-{n}").exists():
            n += 1  # every teaching its own zoo: results name the experts that gave them
        plan = BoardTeachPlan(rules, self.golden(), rules.parent / f"teach-{n}", out, epochs=int(self.epochs.value()),
                              every_board=self.every_board.isChecked())
        self.bar.setValue(0)
        self._say("teaching…")
        self._run(lambda: teach_board(plan, self.progress_signal.said.emit), self._taught)

    def _progress(self, message: str) -> None:
        m = EPOCH.match(message)
        if m:
            done, total = int(m.group(1)), int(m.group(2))
            self.bar.setValue(10 + int(85 * done / max(1, total)))
        elif message.startswith("crops:"):
            self.bar.setValue(10)
        elif "registered" in message:
            self.bar.setValue(5)
        self.status.setText(message.splitlines()[0][:200])

    def _taught(self, taught: Any) -> None:
        from inspector.app.board_costs import percent

        self.taught, self.ready = taught, (taught.plan.out, taught.zoo)
        self._columns(VALIDATION)
        self.tune_panel.set_board(taught.plan.out, taught.zoo)
        self.bar.setValue(100)
        rows = [*taught.checks, taught.pooled]
        self.table.setRowCount(len(rows))
        for r, c in enumerate(rows):
            cells = (c.type, c.parts, c.heldout_parts, c.good, c.defects, f"{c.threshold:.2f}", percent(c.recall),
                     percent(c.false_calls))
            for col, v in enumerate(cells):
                self.table.setItem(r, col, QTableWidgetItem(str(v)))
        told = f"; {taught.presence.summary()} (counted in the table)" if taught.presence is not None else ""
        if taught.kinds:
            told += "; defects called by kind: " + ", ".join(f"{k.kind} {percent(k.recall)}" for k in taught.kinds)
        self._say(f"taught {len(taught.checks)} types in {taught.seconds['total']:.0f} s: {taught.plan.out} and its "
                  f"zoo {taught.zoo}{told}")

    def _columns(self, names: tuple[str, ...]) -> None:
        self.table.setRowCount(0)
        self.table.setColumnCount(len(names))
        self.table.setHorizontalHeaderLabels(list(names))

    # -- a revision of a taught board ----------------------------------------------------------------
    def _revise_chosen(self) -> None:
        if self.on_kiosk:
            self.revise_on_kiosk()
            return
        taught, _ = QFileDialog.getOpenFileName(self, "The taught rule set the line serves", str(self.work_root),
                                                "taught rule sets (*.taught.yaml *.yaml)")
        if not taught:
            return
        zoo = QFileDialog.getExistingDirectory(self, "Its zoo (the teaching's zoo folder)", str(Path(taught).parent))
        if zoo:
            self.revise(Path(taught), Path(zoo))

    def revise(self, taught: Path, zoo: Path) -> None:
        """The imported board made a revision of the taught board `taught` (served by `zoo`): off the GUI thread."""
        from inspector.app.board_revise import RevisePlan, revise_board

        rules = self.rules_path
        plan = RevisePlan(taught, rules, rules.with_name(rules.stem + ".taught.yaml"), self.chosen_photo(),
                          self.photo_board.value(), zoo=zoo)
        self._say("revising…")
        self._run(lambda: revise_board(plan, lambda _m: None), lambda revised: self._revised(revised, zoo))

    def revise_on_kiosk(self) -> None:
        """The attached kiosk revises the board it serves to the imported revision: off the GUI thread."""
        rules, photo, board = self.rules_path, self.chosen_photo(), self.photo_board.value()
        self._say("the kiosk is revising its board…")
        self._run(lambda: self.backend.revise_line_board(rules, photo, board), self._revised_on_kiosk)

    def chosen_photo(self) -> Path | None:
        """The photo selected in the list (the first where none is), None with none listed."""
        photos = self.golden()
        row = self.photos.currentRow()
        return photos[row] if 0 <= row < len(photos) else (photos[0] if photos else None)

    def _revised(self, revised: Any, zoo: Path) -> None:
        self.ready = (revised.out, zoo)
        self.tune_panel.set_board(revised.out, zoo)
        self._show_changes(revised.to_json(), revised.summary().splitlines())

    def _revised_on_kiosk(self, done: dict) -> None:
        self.ready = Path(done["file"]).name.removesuffix(".yaml")
        self._show_changes(done, [*done["notes"], f"the kiosk wrote {done['file']} into its rule folder: not served "
                                                   "until made the line's board"])

    def _show_changes(self, done: dict, notes: list[str]) -> None:
        """A revision's changes (its JSON: `changes`, `kept`) in the table, its notes below."""
        self._columns(CHANGES)
        rows = [(c["ref"], c["kind"], c["was"], c["now"]) for c in done["changes"]]
        self.table.setRowCount(len(rows))
        for r, cells in enumerate(rows):
            for col, v in enumerate(cells):
                self.table.setItem(r, col, QTableWidgetItem(str(v)))
        self._say(f"revised: {len(rows)} change(s), {len(done['kept'])} part(s) kept as taught; " + "; ".join(notes))

    def activate(self) -> None:
        if self.on_kiosk and not isinstance(self.ready, str):  # a board taught here: its zoo goes to the kiosk
            rules, zoo = self.ready
            self._say("installing the board and its zoo on the kiosk…")
            self._run(lambda: self.backend.activate_board(rules, zoo, "taught on the New board tab"), self._say)
            return
        try:
            if isinstance(self.ready, str):
                self._say(self.backend.changeover(self.ready, "revised on the New board tab"))
            else:
                self._say(self.backend.activate_board(*self.ready, "taught on the New board tab"))
        except (RuntimeError, ValueError, PermissionError) as exc:
            self._say(str(exc), error=True)

    def permit(self) -> None:
        self._enable()
        self.tune_panel.permit()


def registered_text(path: Path, found: list[Any]) -> str:
    """What the registration of a golden photo found: each board it registered (on what, how well) and each it
    refused with its reason; where none registered, how to register it by hand."""
    registered = [b for b in found if b.registration is not None]
    refused = "; ".join(f"#{b.index}: {b.reason}" for b in found if b.registration is None)
    if not registered:
        return (f"{path.name} did not register ({refused}): click a spot on the photo, then the same spot on the CAD "
                "drawing, three times or more, and save the points")
    if len(found) == 1:
        return f"{path.name}: registered {how(registered[0].registration)}"
    boards = "; ".join(f"#{b.index} {how(b.registration)}" for b in registered)
    text = (f"{path.name}: {len(registered)} of {len(found)} boards registered ({boards}"
            + (f"; refused {refused}" if refused else "") + ")")
    if len(registered) > 1:
        text += ": check “Every board of a photo” to teach on each of them, where every one is golden"
    return text


def how(reg: Any) -> str:
    """What registered a board and how well: its evidence where a residual says nothing (the marks found: a
    homography fits four exactly), else the residual left on the outline or the picked points."""
    if reg.evidence:
        return f"on its {reg.method} ({reg.evidence})"
    return f"on its {reg.method}, residual {reg.residual_mm:.2f} mm"


def cad_drawing(rules: Any) -> np.ndarray:
    """The board as the CAD lays it out: every inspected part's window on a plain board (for picking points)."""
    from inspector.routing.rules import body_box

    w, h = rules.board_size
    image = np.full((h, w, 3), (40, 70, 30), np.uint8)
    for comp, place in rules.placements():
        x0, y0, x1, y1 = body_box(comp, place, 0)
        cv2.rectangle(image, (x0, y0), (x1, y1), (200, 220, 200), max(1, round(max(w, h) / 400)))
    return image


def _given(edit: QLineEdit) -> Path | None:
    """The path a line edit holds, None where it is left empty (the field is optional)."""
    text = edit.text().strip()
    return Path(text) if text else None


def _station(before_through_hole: bool, pin_in_paste: str, fitted_later: str) -> Any:  # noqa: ANN401 - a Station
    """Where the station stands, as the tab says (the pin-in-paste field read only where it is before through-hole)."""
    from inspector.board.station import Station

    return Station.read(before_through_hole, pin_in_paste if before_through_hole else "", fitted_later,
                        ("pin-in-paste", "fitted later"))
