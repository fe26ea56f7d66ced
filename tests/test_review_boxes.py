"""A reviewer's box: where the defect is on a part's kept crop, drawn in the dashboard's history tab (or sent with a
review), stored with the review (schema 0012), and what teaches a finding detector an escape in the export.

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
from inspector.results.reviews import ReviewRefused, ReviewRequest, record_review  # noqa: E402
from inspector.results.schema import ComponentResult  # noqa: E402
from inspector.results.store import ResultStore, sqlite_url  # noqa: E402

from .test_results import board  # noqa: E402

CLASSES = ("void", "spur")


def _part(verdict: str, expert: str = "det-f", box: tuple | None = None) -> ComponentResult:
    x0, y0, x1, y1 = box or (None, None, None, None)
    return ComponentResult(ref="W1", component_type="WIN", expert=expert, verdict=verdict, defect_class="void",
                           box_x0=x0, box_y0=y0, box_x1=x1, box_y1=y1)


def test_a_review_box_is_four_pixels_of_a_defect_and_anything_else_is_refused_saying_why() -> None:
    req = ReviewRequest.parse(b'{"inspection_id": "u", "ref": "R1", "call": "escape", "correct_class": "spur", '
                              b'"box": [4, 5.5, 20, 30]}')
    assert req.box == (4.0, 5.5, 20.0, 30.0)
    assert req.audited()["box"] == [4.0, 5.5, 20.0, 30.0]
    assert ReviewRequest.parse(b'{"inspection_id": "u", "ref": "R1", "call": "escape"}').box is None
    for box, says in (([1, 2, 3], "four numbers"), (["a", 1, 2, 3], "could not convert"),
                      ([True, 1, 2, 3], "four numbers"), ([5, 5, 5, 9], "frames nothing"),
                      ([9, 1, 2, 8], "frames nothing"), ([-1, 0, 4, 4], "not on a crop"),
                      ([0, 0, float("inf"), 4], "not on a crop")):
        body = json.dumps({"inspection_id": "u", "ref": "R1", "call": "confirmed", "box": box})
        with pytest.raises(ReviewRefused, match=says):
            ReviewRequest.parse(body.encode())
    with pytest.raises(ReviewRefused, match="no defect to box"):
        ReviewRequest("u", "R1", "false_call", box=(1, 1, 5, 5)).check()


def test_a_reviewers_box_is_stored_read_back_and_cleared_by_a_review_without_one(tmp_path: Path) -> None:
    from inspector.kiosk.results_api import review_json

    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    store.write([board("B1", defect="polarity")])
    (insp,) = store.inspections()
    stored = record_review(store, ReviewRequest(insp.uuid, "R1", "escape", "missing", "qa", box=(2, 3, 10, 12)))
    assert stored["box"] == (2, 3, 10, 12) and stored["before"] is None
    review = store.reviews_of([insp.uuid])[(insp.uuid, "R1")]
    assert review.drawn_box == (2, 3, 10, 12) and review_json(review)["box"] == [2, 3, 10, 12]
    out = io.StringIO()
    store.export_csv(out)  # the CSV's last column, in crop pixels
    assert {r["ref"]: r["review_box"] for r in csv.DictReader(io.StringIO(out.getvalue()))} == {
        "R1": "2.0 3.0 10.0 12.0", "D1": ""}
    again = record_review(store, ReviewRequest(insp.uuid, "R1", "escape", "missing", "qa"))
    assert again["before"]["box"] == [2, 3, 10, 12]
    assert store.reviews_of([insp.uuid])[(insp.uuid, "R1")].drawn_box is None
    assert review_json(store.reviews_of([insp.uuid])[(insp.uuid, "R1")])["box"] is None


def test_a_finding_detector_learns_the_reviewers_box_first_and_an_escape_only_from_one() -> None:
    drawn = (4.0, 6.0, 20.0, 14.0)
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
    # clipped to the crop where it overhangs a little; refused where it lies mostly outside
    over = finding_labels(_part("pass", expert="cls-WIN"), "det-f", CLASSES, 40, 20, "spur", (30.0, 10.0, 44.0, 20.0))
    assert over.rows[0][1] + over.rows[0][3] / 2 == pytest.approx(1.0)
    outside = finding_labels(_part("pass", expert="cls-WIN"), "det-f", CLASSES, 40, 20, "spur", (35, 0, 80, 20))
    assert isinstance(outside, str) and "mostly outside the crop (40x20 px)" in outside
    assert finding_labels(_part("fail"), "det-f", CLASSES, 40, 20, "ok", drawn).label == CLEAN


def test_a_verifying_detector_learns_each_crop_as_one_body_under_the_class_it_really_is() -> None:
    from inspector.results.detector_labels import verifying_labels

    bodies = ("good", "chipped")
    called = _part("fail", expert="det-v", box=(8.0, 4.0, 30.0, 16.0))
    called.defect_class = "chipped"  # a confident box of the wrong class: a false call
    false_call = verifying_labels(called, "det-v", bodies, 40, 20, "ok")
    assert false_call.label == "good" and false_call.boxed_by == "detector"  # its box found the body
    assert false_call.rows == ((0, 19 / 40, 10 / 20, 22 / 40, 12 / 20),)
    assert verifying_labels(called, "det-v", bodies, 40, 20, "chipped", (4, 2, 36, 18)).boxed_by == "reviewer"
    weak = _part("fail", expert="det-v", box=(0.0, 0.0, 5.0, 5.0))
    weak.defect_class = "unverified"  # its best box under the threshold: no body vouched for
    unboxed = verifying_labels(weak, "det-v", bodies, 40, 20, "ok")  # kept as what it is, without a box
    assert isinstance(unboxed, Unboxed) and unboxed.label == "good"
    assert "boxed no body on this part with confidence" in unboxed.why
    assert verifying_labels(weak, "det-v", bodies, 40, 20, "chipped", (4, 2, 36, 18)).label == "chipped"
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


def _drag(qtbot, widget, a: tuple[float, float], b: tuple[float, float]) -> None:  # noqa: ANN001
    """Press at crop pixel `a`, move and release at crop pixel `b` on the picker, as a hand would."""
    rect, scale = widget._frame()
    at = [QPoint(round(rect.x() + x * scale), round(rect.y() + y * scale)) for x, y in (a, b)]
    qtbot.mousePress(widget, Qt.MouseButton.LeftButton, pos=at[0])
    qtbot.mouseMove(widget, at[1])
    qtbot.mouseRelease(widget, Qt.MouseButton.LeftButton, pos=at[1])


@pytest.mark.usefixtures("collect_in_the_gui_thread")  # conftest.py: as the dashboard collects
def test_a_box_dragged_on_the_crop_goes_with_the_review_in_crop_pixels(qtbot, tmp_path: Path) -> None:
    tab, store = _history_with_kept_crops(qtbot, tmp_path)
    rows = {tab.table.item(r, 3).text(): r for r in range(tab.table.rowCount())}
    tab.table.setCurrentCell(rows["D1"], 0)  # the failed diode: its detector's box shown, no review box yet
    picker, bar = tab.preview, tab.review_bar
    assert picker.detector_box == (1.0, 2.0, 11.0, 8.0) and picker.box is None and not picker.pixmap().isNull()
    assert bar.box is None and not bar.clear_box_btn.isEnabled()
    _drag(qtbot, picker, (48, 8), (62, 32))
    assert picker.box is not None and bar.box == picker.box
    assert picker.box == pytest.approx((48, 8, 62, 32), abs=1.0)  # crop pixels, whatever size it is shown at
    assert "goes with a defect's review" in bar.box_label.text()
    qtbot.mouseClick(bar.confirm_btn, Qt.MouseButton.LeftButton)
    assert bar.status.text().startswith("stored:"), bar.status.text()
    uuid = tab.parts[rows["D1"]][0]
    assert store.reviews_of([uuid])[(uuid, "D1")].drawn_box == pytest.approx(picker.box)
    # another part: no box carried over; a click that drags nothing draws none
    tab.table.setCurrentCell(rows["R1"], 0)
    assert bar.box is None and picker.box is None and picker.detector_box is None
    _drag(qtbot, picker, (10, 10), (10.5, 10.5))
    assert picker.box is None
    _drag(qtbot, picker, (2, 2), (30, 30))
    qtbot.mouseClick(bar.clear_box_btn, Qt.MouseButton.LeftButton)
    assert bar.box is None and picker.box is None
    _drag(qtbot, picker, (-50, -50), (20, 18))  # dragged from beyond the crop: held to its edge
    assert picker.box == pytest.approx((0, 0, 20, 18), abs=1.0)
    bar.correct.setCurrentText("missing")
    qtbot.mouseClick(bar.escape_btn, Qt.MouseButton.LeftButton)
    assert bar.status.text().startswith("stored:"), bar.status.text()
    assert store.reviews_of([uuid])[(uuid, "R1")].drawn_box == pytest.approx(picker.box)
    # the diode again: the box it was reviewed with is shown and kept for a review again
    tab.table.setCurrentCell(rows["D1"], 0)
    assert picker.box == pytest.approx((48, 8, 62, 32), abs=1.0) and bar.box == picker.box
    tab.search()  # a new search reads it from the database
    tab.table.setCurrentCell(rows["D1"], 0)
    assert picker.box == pytest.approx((48, 8, 62, 32), abs=1.0)
    # reviewed again as a false call: no box goes with it, the stored one is cleared and none is shown
    qtbot.mouseClick(bar.false_btn, Qt.MouseButton.LeftButton)
    assert bar.status.text().startswith("stored:"), bar.status.text()
    assert store.reviews_of([uuid])[(uuid, "D1")].drawn_box is None and picker.box is None and bar.box is None
    tab.table.setCurrentCell(rows["R1"], 0)
    tab.table.setCurrentCell(rows["D1"], 0)
    assert picker.box is None and picker.detector_box is not None


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
    record_review(store, ReviewRequest(insp.uuid, "D1", "confirmed", None, "qa", box=(4, 2, 24, 22)))
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
