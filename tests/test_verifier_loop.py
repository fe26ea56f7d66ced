"""A detector taught to verify bodies (`--good`) learns from reviews: every reviewed crop is one body under the class
it really is, boxed where the reviewer drew it or where the detector boxed the body with confidence; `zoo train
--expert` retrains it and scores its images by its own calls. Real parts: a real YOLO verifier taught in the test
(its threshold at the median of its best boxes, so some bodies are left unverified), the real line into SQLite, the
export, Ultralytics' trainer."""
from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.experts.zoo import Zoo
from inspector.training.labelled.demo_boards import PANEL, PANEL_RULES, WINDOW, WINDOWS
from tests.serving_point import widest_gap

LAMINATE, COPPER = (40, 80, 40), (60, 160, 200)
CLASSES = ("good", "chipped")


def body(rng: np.random.Generator, chipped: bool) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """A window with one body (a copper block), a corner of it gone when chipped; its box."""
    image = np.full((WINDOW, WINDOW, 3), LAMINATE, np.uint8)
    w, h = int(rng.integers(28, 40)), int(rng.integers(16, 24))
    x, y = (WINDOW - w) // 2 + int(rng.integers(-3, 4)), (WINDOW - h) // 2 + int(rng.integers(-3, 4))
    image[y:y + h, x:x + w] = COPPER
    if chipped:
        image[y:y + h // 2, x + w - 10:x + w] = LAMINATE
    return np.clip(image + rng.normal(0, 4, image.shape), 0, 255).astype(np.uint8), (x - 1, y - 1, x + w + 1, y + h + 1)


def verify_set(root: Path, count: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    (root / "data.yaml").write_text("names: [good, chipped]\n")
    for i in range(count):
        image, (x1, y1, x2, y2) = body(rng, i % 2 == 1)
        cv2.imwrite(str(root / "images" / f"b{i:03d}__top.png"), image)
        (root / "labels" / f"b{i:03d}__top.txt").write_text(
            f"{i % 2} {(x1 + x2) / 2 / WINDOW:.5f} {(y1 + y2) / 2 / WINDOW:.5f} {(x2 - x1) / WINDOW:.5f} "
            f"{(y2 - y1) / WINDOW:.5f}\n")
    return root


def test_reviews_of_a_verifying_detector_label_each_crop_as_one_body_and_retrain_it(tmp_path: Path,
                                                                                      box_models: Path) -> None:
    from inspector.app.detector_loop_demo import _with_pass_all_classifier
    from inspector.app.line import LineConfig
    from inspector.app.run import open_source, run_line
    from inspector.app.service import ServiceConfig
    from inspector.app.verdict import classes_of, finding_detectors
    from inspector.ingest.crops import cut_board
    from inspector.results.dataset import export_dataset
    from inspector.results.review_boxes import ReviewBox
    from inspector.results.reviews import ReviewRequest, record_review
    from inspector.results.store import ResultStore, sqlite_url
    from inspector.routing.rules import parse_rules
    from inspector.training.labelled.detection import detect
    from inspector.training.labelled.evaluate import served_module
    from inspector.training.labelled.retrain_detector import retrain_taught_detector
    from inspector.training.labelled.teach_detector import TAUGHT_BOXES, DetectorPlan, teach_detector

    zoo_dir = tmp_path / "zoo"
    taught = teach_detector(DetectorPlan("det-v", verify_set(tmp_path / "set", 120, seed=0), zoo_dir, good="good",
                                         epochs=30, patience=30))
    assert taught.mode == "verify" and taught.heldout.good == 0
    point = taught.entry.versions[0]["operating"]  # chosen on its held-out bodies, served there
    assert 0 < point["threshold"] <= 1 and Zoo.load(zoo_dir).architecture("det-v").threshold == point["threshold"]
    _with_pass_all_classifier(zoo_dir)  # cls-WIN: every window goes on to the detector
    # an alignment check left wide: the detector's class and confidence decide
    text = PANEL_RULES.replace("DETECTOR", "det-v").replace("SIZE", str(taught.input_size))
    text = text.replace("    detector: det-v\n", "    detector: det-v\n    align_tolerance_px: 1000\n")
    rules = parse_rules(text, str(tmp_path / "v.yaml"))
    rng = np.random.default_rng(3)
    truth = {}
    (tmp_path / "panels").mkdir()
    # 24 panels: about 24 parts reviewed, so the reviewed held-out split (30%, by each inspection's id, which differs
    # from run to run) is never empty (with 8 panels it was, about one run in twenty)
    for b in range(24):
        panel = np.full((PANEL[1], PANEL[0], 3), LAMINATE, np.uint8)
        for k, (ref, (x, y)) in enumerate(WINDOWS.items()):
            chipped = (b + k) % 2 == 1
            window, box = body(rng, chipped)
            panel[y:y + WINDOW, x:x + WINDOW] = window
            truth[(f"p{b}.png", ref)] = ("chipped" if chipped else "ok", tuple(float(v) for v in box))
        cv2.imwrite(str(tmp_path / "panels" / f"p{b}.png"), panel)
    source = f"folder:{tmp_path / 'panels'}"
    # served between its best boxes on these windows near their median, so that it passes some bodies and leaves others
    # unverified (both kinds of call, and both kinds of label, for the loop under test)
    crops = [c.image for f in open_source(source, rules, 0, 0) for c in cut_board(f.image, rules)]
    arch, model = served_module(Zoo.load(zoo_dir), "det-v")
    best = sorted(max((f.score for f in found), default=0.0) for found in detect(arch, model, crops))
    doc = json.loads((zoo_dir / "manifest.json").read_text())
    det = next(e for e in doc["experts"] if e["name"] == "det-v")
    det["spec"]["threshold"] = widest_gap(best)
    (zoo_dir / "manifest.json").write_text(json.dumps(doc))
    zoo = Zoo.load(zoo_dir)
    assert finding_detectors(zoo) == {} and classes_of(zoo)("det-v") == CLASSES
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    run_line(rules, zoo, box_models, open_source(source, rules, 0, 0),
             ServiceConfig(LineConfig(device_mb=40), keep_crops="all"), store, tmp_path / "data", lambda _m: None)
    parts = [(insp, p) for insp in store.inspections() for p in insp.parts]
    assert {p.verdict for _, p in parts} == {"pass", "fail"} and all(p.expert == "det-v" for _, p in parts), \
        [(p.verdict, p.defect_class) for _, p in parts]
    of, drawn, reviewed = classes_of(zoo), {}, {}
    for n, (insp, p) in enumerate(parts):
        real, box = truth[(Path(insp.source).name, p.ref)]
        stem = f"{insp.uuid}_{p.ref}"
        if p.verdict == "fail" and real == "ok":
            req = ReviewRequest(insp.uuid, p.ref, "false_call", None, "qa")  # no box (a false call draws none)
        elif p.verdict == "fail":
            req = ReviewRequest(insp.uuid, p.ref, "confirmed", "chipped", "qa",
                                boxes=(ReviewBox(box),) if n % 2 else ())
        elif real == "chipped":
            req = ReviewRequest(insp.uuid, p.ref, "escape", "chipped", "qa", boxes=(ReviewBox(box),) if n % 3 else ())
        else:
            continue
        record_review(store, req, of)
        reviewed[stem] = (real, p)
        if req.boxes:
            drawn[stem] = req.boxes[0].at
    report = export_dataset(store, tmp_path / "dataset", [rules], classes_of=of, heldout_percent=30)
    tree = tmp_path / "dataset" / "detectors" / "det-v"
    assert (tree / "data.yaml").read_text().splitlines()[-2:] == ['  0: "good"', '  1: "chipped"']
    items = [i for i in report.items if i["expert"] == "det-v" and "unboxed" not in i]
    # reviewed: bodies it boxed with confidence (a chipped one called so) and bodies it left unverified
    assert items and drawn and {p.defect_class for _, p in reviewed.values()} >= {"unverified", "chipped"}
    for item in items:
        stem = Path(item["file"]).stem
        real, part = reviewed[stem]
        k, cx, cy, w, h = (float(v) for v in (tree / "labels" / item["split"] / f"{stem}.txt").read_text().split())
        width, height = cv2.imread(str(tmp_path / "dataset" / item["file"])).shape[1::-1]
        assert item["label"] == ("good" if real == "ok" else "chipped") and k == CLASSES.index(item["label"])
        x0, y0, x1, y1 = drawn[stem] if stem in drawn else (part.box_x0, part.box_y0, part.box_x1, part.box_y1)
        assert item["boxed_by"] == ("reviewer" if stem in drawn else "detector")
        assert (cx * width, cy * height) == pytest.approx(((x0 + x1) / 2, (y0 + y1) / 2), abs=0.01)
    # a part the detector boxed with confidence (it passed it: an escape) teaches by that box whatever class it named;
    # one it left unverified teaches only by a box the reviewer drew, else is kept without a box (what it is, why)
    assert {Path(i["file"]).stem for i in items} == {stem for stem, (_real, p) in reviewed.items()
                                                       if stem in drawn or p.defect_class != "unverified"}
    missed = [x for x in report.items if x.get("expert") == "det-v" and "unboxed" in x]
    assert missed and all("boxed no body on this part with confidence" in x["unboxed"] for x in missed)
    assert {Path(x["file"]).stem for x in missed} == {stem for stem, (_real, p) in reviewed.items()
                                                      if stem not in drawn and p.defect_class == "unverified"}
    assert all(x["label"] == ("good" if reviewed[Path(x["file"]).stem][0] == "ok" else "chipped") for x in missed)
    assert not [x for x in report.skipped if x.get("expert") == "det-v"]
    r = retrain_taught_detector(zoo, "det-v", tmp_path / "dataset", 1, 0, lambda _m: None)
    entry = Zoo.load(zoo_dir).entries["det-v"]
    assert [v["origin"] for v in entry.versions] == [TAUGHT_BOXES, "retrained from reviews"]
    assert set(r.scores) == {"reviewed held-out", "taught held-out", "reviewed unboxed"}
    # the bodies it left unverified, scored by each version's call: the served weights flagged every one (a body
    # under the threshold is never passed), a good one among them a false call
    unboxed_old, unboxed_new = r.scores["reviewed unboxed"]
    assert unboxed_old.crops == len(missed) == unboxed_new.crops
    assert unboxed_old.found == unboxed_old.defects and unboxed_old.false_calls == unboxed_old.good
    assert unboxed_old.defects == sum(x["label"] == "chipped" for x in missed)
    added = entry.versions[1]  # the old weights scored where served, the new at their own threshold
    assert added["served_threshold"] == det["spec"]["threshold"] and added["operating"] == {"threshold":
                                                                                           added["threshold"]}
    reviewed_old, _ = r.scores["reviewed held-out"]
    # a verifier's images counted by its calls: every held-out reviewed crop is a body, good or chipped
    assert reviewed_old.crops == sum(1 for i in items if i["split"] == "heldout")
    assert reviewed_old.defects == sum(1 for i in items if i["split"] == "heldout" and i["label"] == "chipped")
