"""A reviewer's boxes: where each defect is on a part's kept crop, drawn in the dashboard's history tab (or sent with
a review), stored with the review (schema 0012 the first, 0013 all and their classes), and what teaches a finding
detector an escape in the export.

Real parts: SQLite stores, Alembic migrations, a real Qt event loop with mouse drags on the crop, PNG crops on disk.
"""
from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PySide6.QtCore import QPoint, Qt  # noqa: E402

from inspector.access.identity import Identity  # noqa: E402
from inspector.results.detector_labels import CLEAN, Unboxed, finding_labels  # noqa: E402
from inspector.results.review_boxes import ReviewBox  # noqa: E402
from inspector.results.reviews import ReviewRefused, ReviewRequest, record_review  # noqa: E402
from inspector.results.schema import ComponentResult  # noqa: E402
from inspector.results.store import ResultStore, sqlite_url  # noqa: E402

from .test_results import board  # noqa: E402

CLASSES = ("void", "spur")


def _part(verdict: str, expert: str = "det-f", box: tuple | None = None) -> ComponentResult:
    x0, y0, x1, y1 = box or (None, None, None, None)
    return ComponentResult(ref="W1", component_type="WIN", expert=expert, verdict=verdict, defect_class="void",
                           box_x0=x0, box_y0=y0, box_x1=x1, box_y1=y1)


def test_a_reviews_boxes_are_four_pixels_each_of_a_defect_and_anything_else_is_refused_saying_why() -> None:
    req = ReviewRequest.parse(b'{"inspection_id": "u", "ref": "R1", "call": "escape", "correct_class": "spur", '
                              b'"box": [4, 5.5, 20, 30]}')  # one box, as a client before several sends it
    assert req.boxes == (ReviewBox((4.0, 5.5, 20.0, 30.0)),)
    assert req.audited()["boxes"] == [{"box": [4.0, 5.5, 20.0, 30.0]}]
    assert req.to_json()["box"] == [4.0, 5.5, 20.0, 30.0] and "boxes" not in req.to_json()  # any kiosk since 0012
    two = ReviewRequest.parse(b'{"inspection_id": "u", "ref": "R1", "call": "escape", "correct_class": "spur", '
                              b'"boxes": [[4, 5, 20, 30], {"box": [30, 2, 38, 9], "class": "void"}]}')
    assert two.boxes == (ReviewBox((4, 5, 20, 30)), ReviewBox((30, 2, 38, 9), "void"))
    assert ReviewRequest.parse(two.to_json()) == two  # what the dashboard sends a kiosk, read back the same
    assert ReviewRequest.parse(b'{"inspection_id": "u", "ref": "R1", "call": "escape"}').boxes == ()
    for box, says in (([1, 2, 3], "four numbers"), (["a", 1, 2, 3], "could not convert"),
                      ([True, 1, 2, 3], "four numbers"), ([5, 5, 5, 9], "frames nothing"),
                      ([9, 1, 2, 8], "frames nothing"), ([-1, 0, 4, 4], "not on a crop"),
                      ([0, 0, float("inf"), 4], "not on a crop"), ({"box": [1, 1, 5, 5], "colour": 3}, "class")):
        body = json.dumps({"inspection_id": "u", "ref": "R1", "call": "confirmed", "boxes": [[0, 0, 9, 9], box]})
        with pytest.raises(ReviewRefused, match=says):
            ReviewRequest.parse(body.encode())
    with pytest.raises(ReviewRefused, match="box 2 .* is drawn twice"):
        ReviewRequest("u", "R1", "confirmed", boxes=(ReviewBox((1, 1, 5, 5)), ReviewBox((1, 1, 5, 5), "void"))).check()
    with pytest.raises(ReviewRefused, match='"boxes" alone'):
        ReviewRequest.parse(b'{"inspection_id": "u", "ref": "R1", "call": "escape", "box": [1, 1, 5, 5], '
                            b'"boxes": [[1, 1, 5, 5]]}')
    with pytest.raises(ReviewRefused, match="no defect to box"):
        ReviewRequest("u", "R1", "false_call", boxes=(ReviewBox((1, 1, 5, 5)),)).check()
    with pytest.raises(ReviewRefused, match="names 'ok', not the class of a defect"):
        ReviewRequest("u", "R1", "escape", boxes=(ReviewBox((1, 1, 5, 5), "ok"),)).check()
    with pytest.raises(ReviewRefused, match="at most 64"):
        ReviewRequest("u", "R1", "escape", boxes=tuple(ReviewBox((i, 0, i + 2, 2)) for i in range(65))).check()


def test_a_reviewers_boxes_are_stored_read_back_and_cleared_by_a_review_without_them(tmp_path: Path) -> None:
    from sqlalchemy import text

    from inspector.kiosk.results_api import review_json

    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    store.write([board("B1", defect="polarity")])
    (insp,) = store.inspections()
    boxes = (ReviewBox((2, 3, 10, 12)), ReviewBox((20, 4, 31, 9), "polarity"))
    stored = record_review(store, ReviewRequest(insp.uuid, "R1", "escape", "missing", "qa", boxes=boxes))
    assert stored["boxes"] == [{"box": [2, 3, 10, 12]}, {"box": [20, 4, 31, 9], "class": "polarity"}]
    assert stored["box"] == [2, 3, 10, 12] and stored["before"] is None
    review = store.reviews_of([insp.uuid])[(insp.uuid, "R1")]
    assert review.drawn_boxes == boxes and review_json(review)["boxes"] == stored["boxes"]
    assert review_json(review)["box"] == [2, 3, 10, 12]  # what a dashboard before several boxes reads
    with store.engine.connect() as c:  # what a release before 0013 reads: the first box
        assert tuple(c.execute(text("SELECT box_x0, box_y0, box_x1, box_y1 FROM reviews")).one()) == (2, 3, 10, 12)
    # reviewed again by a release before 0013, which writes box_* alone: its review stands, not the boxes left from
    # before in reviews.boxes
    for written, read in (((5, 5, 9, 9), (ReviewBox((5, 5, 9, 9)),)), ((None,) * 4, ())):
        with store.engine.begin() as c:
            c.execute(text("UPDATE reviews SET box_x0 = :a, box_y0 = :b, box_x1 = :c, box_y1 = :d"),
                      dict(zip("abcd", written)))
        assert store.reviews_of([insp.uuid])[(insp.uuid, "R1")].drawn_boxes == read
    with store.engine.begin() as c:
        c.execute(text("UPDATE reviews SET box_x0 = 2, box_y0 = 3, box_x1 = 10, box_y1 = 12"))
    out = io.StringIO()
    store.export_csv(out)  # the CSV's last column, in crop pixels, each box's own class after it
    assert {r["ref"]: r["review_box"] for r in csv.DictReader(io.StringIO(out.getvalue()))} == {
        "R1": "2.0 3.0 10.0 12.0; 20.0 4.0 31.0 9.0 polarity", "D1": ""}
    # a box's class is checked as the review's is, against the part's expert
    with pytest.raises(ReviewRefused, match="box .*'s class 'scratchy' is not one of the demo experts' classes"):
        record_review(store, ReviewRequest(insp.uuid, "R1", "escape", "missing", "qa",
                                           boxes=(ReviewBox((2, 3, 10, 12), "scratchy"),)))
    assert store.reviews_of([insp.uuid])[(insp.uuid, "R1")].drawn_boxes == boxes  # nothing lost
    again = record_review(store, ReviewRequest(insp.uuid, "R1", "escape", "missing", "qa"))
    assert again["before"]["boxes"] == stored["boxes"]
    assert store.reviews_of([insp.uuid])[(insp.uuid, "R1")].drawn_boxes == ()
    assert review_json(store.reviews_of([insp.uuid])[(insp.uuid, "R1")])["box"] is None


def test_a_finding_detector_learns_the_reviewers_boxes_first_and_an_escape_only_from_them() -> None:
    drawn = (ReviewBox((4.0, 6.0, 20.0, 14.0)),)
    boxed = finding_labels(_part("pass", expert="cls-WIN"), "det-f", CLASSES, 40, 20, "spur", drawn)
    assert boxed.label == "spur" and boxed.boxed_by == "reviewer"
    assert boxed.rows == ((1, 12 / 40, 10 / 20, 16 / 40, 8 / 20),)
    missed = finding_labels(_part("pass", expert="cls-WIN"), "det-f", CLASSES, 40, 20, "spur")
    assert isinstance(missed, Unboxed) and missed.label == "spur"  # an escape nobody boxed: what it is, no box
    assert "draw the defect's box on the crop" in missed.why
    # a confirmed defect the detector boxed wrong: the reviewer's box teaches, not the detector's
    wrong = _part("fail", box=(30.0, 0.0, 40.0, 5.0))
    assert finding_labels(wrong, "det-f", CLASSES, 40, 20, "void").boxed_by == "detector"
    put_right = finding_labels(wrong, "det-f", CLASSES, 40, 20, "void", drawn)
    assert put_right.boxed_by == "reviewer" and put_right.rows[0][1:] == boxed.rows[0][1:]
    # two defects on one part, of two classes: both taught, each under its own (the detector's one box would have
    # taught the other as background)
    both = finding_labels(wrong, "det-f", CLASSES, 40, 20, "void", (*drawn, ReviewBox((24, 2, 36, 10), "spur")))
    assert both.label == "void" and both.boxed_by == "reviewer"
    assert both.rows == ((0, 12 / 40, 10 / 20, 16 / 40, 8 / 20), (1, 30 / 40, 6 / 20, 12 / 40, 8 / 20))
    foreign = finding_labels(wrong, "det-f", CLASSES, 40, 20, "void", (*drawn, ReviewBox((24, 2, 36, 10), "bridge")))
    assert isinstance(foreign, str) and "names 'bridge', not a class det-f finds (void, spur)" in foreign
    # clipped to the crop where it overhangs a little; refused where it lies mostly outside
    over = finding_labels(_part("pass", expert="cls-WIN"), "det-f", CLASSES, 40, 20, "spur",
                          (ReviewBox((30.0, 10.0, 44.0, 20.0)),))
    assert over.rows[0][1] + over.rows[0][3] / 2 == pytest.approx(1.0)
    outside = finding_labels(_part("pass", expert="cls-WIN"), "det-f", CLASSES, 40, 20, "spur",
                             (*drawn, ReviewBox((35, 0, 80, 20))))
    assert isinstance(outside, str) and "mostly outside the crop (40x20 px)" in outside
    assert finding_labels(_part("fail"), "det-f", CLASSES, 40, 20, "ok").label == CLEAN


def test_a_verifying_detector_learns_each_crop_as_one_body_under_the_class_it_really_is() -> None:
    from inspector.results.detector_labels import verifying_labels

    bodies = ("good", "chipped")
    called = _part("fail", expert="det-v", box=(8.0, 4.0, 30.0, 16.0))
    called.defect_class = "chipped"  # a confident box of the wrong class: a false call
    false_call = verifying_labels(called, "det-v", bodies, 40, 20, "ok")
    assert false_call.label == "good" and false_call.boxed_by == "detector"  # its box found the body
    assert false_call.rows == ((0, 19 / 40, 10 / 20, 22 / 40, 12 / 20),)
    assert verifying_labels(called, "det-v", bodies, 40, 20, "chipped", (ReviewBox((4, 2, 36, 18)),)).boxed_by == \
        "reviewer"
    weak = _part("fail", expert="det-v", box=(0.0, 0.0, 5.0, 5.0))
    weak.defect_class = "unverified"  # its best box under the threshold: no body vouched for
    unboxed = verifying_labels(weak, "det-v", bodies, 40, 20, "ok")  # kept as what it is, without a box
    assert isinstance(unboxed, Unboxed) and unboxed.label == "good"
    assert "boxed no body on this part with confidence" in unboxed.why
    assert verifying_labels(weak, "det-v", bodies, 40, 20, "chipped", (ReviewBox((4, 2, 36, 18)),)).label == "chipped"
    # one body a crop, of the review's class: more boxes, or a box of another class, cannot teach it (said)
    two = verifying_labels(weak, "det-v", bodies, 40, 20, "chipped",
                           (ReviewBox((4, 2, 36, 18)), ReviewBox((1, 1, 3, 3))))
    assert isinstance(two, str) and "verifies one body a crop, but the review drew 2 boxes" in two
    other_class = verifying_labels(weak, "det-v", bodies, 40, 20, "chipped", (ReviewBox((4, 2, 36, 18), "good"),))
    assert isinstance(other_class, str) and "leave the box's class out" in other_class
    other = verifying_labels(called, "det-v", bodies, 40, 20, "missing")
    assert isinstance(other, str) and "not a class det-v verifies (good against chipped)" in other


def _history_with_kept_crops(qtbot, tmp_path: Path):  # noqa: ANN001, ANN202 - the tab and its store
    from inspector.app.controller import LineController, LineSetup
    from inspector.app.line import LineConfig
    from inspector.app.service import ServiceConfig
    from ui.backend import LocalBackend
    from ui.tabs.history import HistoryTab

    crop = np.full((40, 80, 3), 90, np.uint8)
    cv2.rectangle(crop, (50, 10), (60, 30), (0, 0, 255), -1)
    path = tmp_path / "crop.png"
    cv2.imwrite(str(path), crop)
    record = board("B1", defect="polarity")
    for part in record.parts:
        part.crop_path = str(path)
    db = sqlite_url(tmp_path / "r.sqlite")
    ResultStore(db).write([record])
    backend = LocalBackend(LineController(tmp_path / "models", tmp_path / "data", db),
                           LineSetup(service=ServiceConfig(LineConfig())))
    backend.identity = Identity("erin", "engineer", "the GUI tests")
    tab = HistoryTab(backend)
    tab.resize(1200, 700)
    qtbot.addWidget(tab)
    tab.show()
    qtbot.waitExposed(tab)
    assert tab.search() == 2
    return tab, backend.store()


def _on(widget, a: tuple[float, float]) -> QPoint:  # noqa: ANN001
    """Crop pixel `a` where the picker shows it."""
    rect, scale = widget._frame()
    return QPoint(round(rect.x() + a[0] * scale), round(rect.y() + a[1] * scale))


def _drag(qtbot, widget, a: tuple[float, float], b: tuple[float, float]) -> None:  # noqa: ANN001
    """Press at crop pixel `a`, move and release at crop pixel `b` on the picker, as a hand would."""
    at = [_on(widget, a), _on(widget, b)]
    qtbot.mousePress(widget, Qt.MouseButton.LeftButton, pos=at[0])
    qtbot.mouseMove(widget, at[1])
    qtbot.mouseRelease(widget, Qt.MouseButton.LeftButton, pos=at[1])


@pytest.mark.usefixtures("collect_in_the_gui_thread")  # conftest.py: as the dashboard collects
def test_boxes_dragged_on_the_crop_go_with_the_review_in_crop_pixels_each_of_the_class_chosen(
        qtbot, tmp_path: Path) -> None:  # noqa: ANN001
    tab, store = _history_with_kept_crops(qtbot, tmp_path)
    rows = {tab.table.item(r, 3).text(): r for r in range(tab.table.rowCount())}
    tab.table.setCurrentCell(rows["D1"], 0)  # the failed diode: its detector's box shown, no review box yet
    picker, bar = tab.preview, tab.review_bar
    assert picker.detector_box == (1.0, 2.0, 11.0, 8.0) and picker.boxes == () and not picker.pixmap().isNull()
    assert bar.boxes == () and not bar.clear_box_btn.isEnabled()
    _drag(qtbot, picker, (48, 8), (62, 32))
    assert len(picker.boxes) == 1 and bar.boxes == picker.boxes and picker.boxes[0].defect is None  # the review's
    assert picker.boxes[0].at == pytest.approx((48, 8, 62, 32), abs=1.0)  # crop pixels, whatever size it is shown at
    assert "goes with a defect's review; drag another for a second defect" in bar.box_label.text()
    bar.correct.setCurrentText("missing")  # a second defect, of another class: the box takes the class chosen now
    _drag(qtbot, picker, (2, 20), (20, 36))
    assert [b.defect for b in picker.boxes] == [None, "missing"] and bar.boxes == picker.boxes
    assert "2 boxes go with a defect's review" in bar.box_label.text() and "missing" in bar.box_label.text()
    _drag(qtbot, picker, (66, 2), (78, 12))
    qtbot.mouseClick(picker, Qt.MouseButton.RightButton, pos=_on(picker, (70, 6)))  # a right click takes it away
    assert len(picker.boxes) == 2 and bar.boxes == picker.boxes
    bar.correct.setCurrentText("polarity")
    qtbot.mouseClick(bar.confirm_btn, Qt.MouseButton.LeftButton)
    assert bar.status.text().startswith("stored:"), bar.status.text()
    uuid = tab.parts[rows["D1"]][0]
    kept = store.reviews_of([uuid])[(uuid, "D1")]
    assert kept.drawn_boxes == picker.boxes and kept.correct_class == "polarity"
    # another part: no box carried over; a click that drags nothing draws none
    tab.table.setCurrentCell(rows["R1"], 0)
    assert bar.boxes == () and picker.boxes == () and picker.detector_box is None
    _drag(qtbot, picker, (10, 10), (10.5, 10.5))
    assert picker.boxes == ()
    _drag(qtbot, picker, (2, 2), (30, 30))
    qtbot.mouseClick(bar.clear_box_btn, Qt.MouseButton.LeftButton)
    assert bar.boxes == () and picker.boxes == ()
    bar.correct.setCurrentIndex(0)  # the class as called: boxes of the review's class
    _drag(qtbot, picker, (-50, -50), (20, 18))  # dragged from beyond the crop: held to its edge
    assert picker.boxes[0].at == pytest.approx((0, 0, 20, 18), abs=1.0)
    bar.correct.setCurrentText("missing")
    qtbot.mouseClick(bar.escape_btn, Qt.MouseButton.LeftButton)
    assert bar.status.text().startswith("stored:"), bar.status.text()
    assert store.reviews_of([uuid])[(uuid, "R1")].drawn_boxes == picker.boxes
    # the diode again: the boxes it was reviewed with are shown and kept for a review again
    tab.table.setCurrentCell(rows["D1"], 0)
    assert picker.boxes == kept.drawn_boxes and bar.boxes == picker.boxes
    tab.search()  # a new search reads them from the database
    tab.table.setCurrentCell(rows["D1"], 0)
    assert picker.boxes == kept.drawn_boxes
    # reviewed again as a false call: no box goes with it, the stored ones are cleared and none is shown
    qtbot.mouseClick(bar.false_btn, Qt.MouseButton.LeftButton)
    assert bar.status.text().startswith("stored:"), bar.status.text()
    assert store.reviews_of([uuid])[(uuid, "D1")].drawn_boxes == () and picker.boxes == () and bar.boxes == ()
    tab.table.setCurrentCell(rows["R1"], 0)
    tab.table.setCurrentCell(rows["D1"], 0)
    assert picker.boxes == () and picker.detector_box is not None
    # both parts reviewed: the review queue (not reviewed) is empty, the reviewed ones are both
    tab.reviewed.setCurrentText("not reviewed")
    assert tab.search() == 0 and tab.table.rowCount() == 0
    tab.reviewed.setCurrentText("reviewed")
    assert tab.search() == 2


def test_the_export_labels_a_detectors_crop_by_the_reviewers_box_and_says_whose_boxes_it_wrote(
        tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """`dataset export` through the CLI: a confirmed polarity defect reviewed with a box teaches the demo detector
    that box (its label file), and the summary says whose boxes the detector's set carries."""
    from inspector.cli import main

    crop = np.full((24, 40, 3), 90, np.uint8)
    (tmp_path / "crops").mkdir()
    cv2.imwrite(str(tmp_path / "crops" / "d1.png"), crop)
    record = board("B1", defect="polarity")
    record.parts[1].crop_path = str(tmp_path / "crops" / "d1.png")
    db = sqlite_url(tmp_path / "r.sqlite")
    store = ResultStore(db)
    store.write([record])
    (insp,) = store.inspections()
    record_review(store, ReviewRequest(insp.uuid, "D1", "confirmed", None, "qa", boxes=(ReviewBox((4, 2, 24, 22)),)))
    rules = Path(__file__).resolve().parents[1] / "routing_rules" / "board_a.yaml"
    out = tmp_path / "dataset"
    assert main(["dataset", "export", "--out", str(out), "--db", db, "--rules", str(rules)]) == 0
    said = capsys.readouterr().out
    assert "boxes by reviewer 1" in said, said
    (item,) = [i for i in json.loads((out / "manifest.json").read_text())["items"] if i["role"] == "detector"]
    assert item["boxed_by"] == "reviewer" and item["label"] == "reversed"
    label = (out / item["file"].replace("/images/", "/labels/")).with_suffix(".txt").read_text().split()
    assert [float(v) for v in label] == pytest.approx([1, 14 / 40, 12 / 24, 20 / 40, 20 / 24])
    # one crop falls on one side: data.yaml names that side alone (naming an empty one made every reader refuse the
    # set, retraining included, whenever no reviewed crop fell on the held-out side)
    from inspector.training.labelled.box_sets import read_boxes

    tree = out / "detectors" / item["expert"]
    side = "val" if item["split"] == "heldout" else "train"
    assert f"{side}: images/{item['split']}" in (tree / "data.yaml").read_text()
    assert ("val:" in (tree / "data.yaml").read_text()) == (side == "val")
    assert [im.split for im in read_boxes(tree).images] == [side]
