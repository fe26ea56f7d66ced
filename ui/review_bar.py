"""The operator's review of one part's call, shared by the line and history tabs: confirmed defect, false call
or escape, optionally with the correct class. The backend stores it (the local database, or the kiosk's
POST /reviews with the signed-in person's token) under the signed-in name; a review that contradicts the part's
verdict is refused with the reason. A person who may change rules can approve a flagged part as another make of it
(a second source: its kept crop becomes an approved window of that part, routing/alternates.py). Where the tab shows
the part's crop, the boxes drawn on it (ui/crop_picker.py) go with a confirmed defect or an escape: where each defect
is (a part may carry several), which a detector that finds defects needs to learn an escape. A box takes the class
chosen under "really:" as it is drawn (none: the review's), so two defects of two classes are two boxes drawn with
the class changed between them."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtWidgets import QComboBox, QGroupBox, QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout

from inspector.access.roles import Permission
from inspector.results.review_boxes import ReviewBox
from inspector.results.reviews import PART_DEFECTS, ReviewRefused, ReviewRequest

SAME_CLASS = "class as called"


class ReviewBar(QGroupBox):
    def __init__(self, backend: Any) -> None:  # noqa: ANN401 - a Local- or AttachedBackend
        super().__init__("Review this call")
        self.backend = backend
        self.part: tuple[str, str, str, str] | None = None  # inspection id, ref, verdict, the deciding expert
        self.on_stored: Callable[[str], None] | None = None  # the review as a table shows it, once stored
        self.boxes: tuple[ReviewBox, ...] = ()  # drawn on the crop (crop px), sent with a defect
        self.on_clear_boxes: Callable[[], None] | None = None  # the crop's picker forgets the boxes too
        self.box_label = QLabel("")
        self.box_label.setWordWrap(True)
        self.clear_box_btn = QPushButton("Clear boxes")
        self.clear_box_btn.setToolTip("review without boxes (the detector's own box, where it drew one, teaches); a "
                                      "right click on one box takes that one away")
        self.clear_box_btn.clicked.connect(self.clear_boxes)
        self.confirm_btn = QPushButton("Confirmed defect")
        self.false_btn = QPushButton("False call")
        self.escape_btn = QPushButton("Escape (missed)")
        self.approve_btn = QPushButton("Approve this make")
        self.approve_btn.setToolTip("the part is another make of the same part, approved for this board: its crop "
                                    "becomes an approved look of this part (a change of the rule set, audited)")
        self.make = QLineEdit(placeholderText="make (part no.)")  # names the approved window and the stored results
        self.make.setToolTip("optional: the approved make's part number; the results of every part compared with "
                             "it name it (else the board's id names the window)")
        self.make.setMaximumWidth(130)
        self.correct = QComboBox()
        self._classes_of: str | None = ""  # the expert whose classes the choice lists ("": none listed yet)
        self.reviewer = QLineEdit(placeholderText="reviewer")  # the signed-in name, not free text
        self.reviewer.setReadOnly(True)
        self.reviewer.setMaximumWidth(110)
        self.status = QLabel("select a part to review its call")
        self.status.setWordWrap(True)
        self.confirm_btn.clicked.connect(lambda: self.review("confirmed"))
        self.false_btn.clicked.connect(lambda: self.review("false_call"))
        self.escape_btn.clicked.connect(lambda: self.review("escape"))
        self.approve_btn.clicked.connect(self.approve)
        buttons = QHBoxLayout()
        for w in (self.confirm_btn, self.false_btn, self.escape_btn):
            buttons.addWidget(w)
        details = QHBoxLayout()
        details.addWidget(QLabel("really:"))
        details.addWidget(self.correct, 1)
        details.addWidget(self.reviewer)
        boxed = QHBoxLayout()
        boxed.addWidget(self.box_label, 1)
        boxed.addWidget(self.clear_box_btn)
        v = QVBoxLayout(self)
        v.addLayout(buttons)
        v.addLayout(details)
        v.addLayout(boxed)
        last = QHBoxLayout()
        last.addWidget(self.status, 1)
        last.addWidget(self.make)
        last.addWidget(self.approve_btn)
        v.addLayout(last)
        self.box_label.hide()  # shown where the tab has a crop to draw on (take_boxes)
        self.clear_box_btn.hide()
        self.set_boxes(())
        self.set_part(None)

    def set_part(self, part: tuple[str, str, str, str] | None, reviewed: str | None = None) -> None:
        """The part the buttons act on: a failed part can be confirmed or a false call, a passed one an escape;
        the classes offered are those of the expert that decided it (a taught expert's own)."""
        if part != self.part:
            self.set_boxes(())  # boxes drawn on another part's crop
        self.part = part
        verdict = part[2] if part else None
        self._list_classes(part[3] if part else None)
        allowed = self.backend.may(Permission.REVIEW)
        self.confirm_btn.setEnabled(allowed and verdict == "fail")
        self.false_btn.setEnabled(allowed and verdict == "fail")
        self.escape_btn.setEnabled(allowed and verdict == "pass")
        self.approve_btn.setEnabled(self.backend.may(Permission.RULES) and verdict == "fail")
        self.make.setEnabled(self.approve_btn.isEnabled())
        if part is None:
            self.status.setText("select a part to review its call")
        elif verdict == "error":
            self.status.setText(f"{part[1]} was not inspected (error): nothing to review")
        else:
            self.status.setText(f"{part[1]}: called {verdict}" + (f"; reviewed: {reviewed}" if reviewed else ""))

    def _list_classes(self, expert: str | None) -> None:
        if expert == self._classes_of:
            return
        self._classes_of = expert
        self.correct.clear()
        self.correct.addItem(SAME_CLASS)
        try:
            self.correct.addItems(list(self.backend.review_classes(expert) if expert else PART_DEFECTS))
        except RuntimeError:  # a kiosk out of reach: the demo's, and the kiosk names the expert's own if refused
            self._classes_of = ""
            self.correct.addItems(list(PART_DEFECTS))

    def set_boxes(self, boxes: tuple[ReviewBox, ...]) -> None:
        """The boxes drawn on the part's crop (none: no box), sent with a confirmed defect or an escape."""
        self.boxes = tuple(boxes)
        self.clear_box_btn.setEnabled(bool(boxes))
        listed = "; ".join(b.says() for b in boxes)
        self.box_label.setText("no box: drag one on the crop where each defect is" if not boxes else
                               f"{len(boxes)} boxes go with a defect's review: {listed}" if len(boxes) > 1 else
                               f"box {listed} goes with a defect's review; drag another for a second defect")

    def box_class(self) -> str | None:
        """The class a box drawn now takes: the one chosen under "really:" (None: the review's)."""
        chosen = self.correct.currentText()
        return None if chosen in ("", SAME_CLASS) else chosen

    def take_boxes(self, clear: Callable[[], None]) -> None:
        """The tab shows the part's crop to draw boxes on: say the boxes, and `clear` forgets them there too."""
        self.on_clear_boxes = clear
        self.box_label.show()
        self.clear_box_btn.show()

    def clear_boxes(self) -> None:
        self.set_boxes(())
        if self.on_clear_boxes is not None:
            self.on_clear_boxes()

    def permit(self) -> None:
        """The signed-in person reviews under their own name."""
        who = self.backend.identity
        self.reviewer.setText(who.name if who else "")
        self.set_part(self.part)

    def review(self, call: str) -> str:
        if self.part is None:
            return ""
        chosen = self.correct.currentText()
        correct = None if chosen == SAME_CLASS or call == "false_call" else chosen
        try:
            req = ReviewRequest(self.part[0], self.part[1], call, correct, self.reviewer.text().strip(),
                                boxes=() if call == "false_call" else self.boxes)
            req.check()
            text = self.backend.review(req)
        except (ReviewRefused, ValueError, RuntimeError) as exc:
            text = f"not stored: {exc}"
        else:
            if not req.boxes and self.boxes:  # not sent (a false call's part was good): not kept either
                self.clear_boxes()
            if self.on_stored is not None:
                shown = call.replace("_", " ")
                self.on_stored(f"{shown}: {correct}" if correct else shown)
        self.status.setText(text)
        return text

    def approve(self) -> str:
        if self.part is None:
            return ""
        try:
            text = self.backend.approve_alternate(self.part[0], self.part[1], make=self.make.text().strip() or None)
        except (ValueError, RuntimeError, PermissionError) as exc:
            text = f"not approved: {exc}"
        self.status.setText(text)
        return text
