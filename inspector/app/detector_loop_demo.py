"""`inspector retrain-demo --taught-detector`: the review-and-retrain loop of a detector taught from labelled boxes.

1. **Teach.** A finding detector is taught (`zoo train --new --kind detector`'s own path) from a YOLO set of
   synthetic bare boards (training/labelled/demo_boards.py: voids and spurs, boxed).
2. **The line meets a new look.** Panels of two windows run through the real line into a SQLite database; half
   the windows carry round holes the set never showed (a design's vias): the detector calls some of them voids.
   And a defect it never saw: a share of the voids are narrow gaps through the lower bar, which it misses
   (escapes).
   The windows' classifier passes every window on, so the detector alone decides, as on a bare-board line.
3. **Review.** An operator (scripted, with the truth an operator sees) reviews every flagged window, a false call
   or a confirmed defect of the class it has, and every missed defect as an escape. The operator draws the box of
   every defect on the window, each under its own class (results/review_boxes.py), on an escape, and on a confirmed
   defect unless the window holds that one defect and the detector's box is on it (BOX_RIGHT of overlap or more).
4. **Dataset and retrain.** `dataset export` labels the detector's crops by what it drew (results/
   detector_labels.py); `zoo train --expert` trains on from the served weights over its set and the reviews and
   scores old against new on both held-out sets (training/labelled/retrain_detector.py).
5. **After.** Old and new weights score the windows of panels nobody reviewed, each at the threshold it is served
   at (the new one's chosen on the held-out images by the retraining, carried by its version), and the new weights
   at the old one's too (`new, old's`: a version served at the threshold of the weights it replaced, as before
   2026-12-05): defect windows flagged, clean windows flagged with and without the new look, mAP.

Everything is written under the work directory; no shipped zoo is touched.
"""
from __future__ import annotations

import json
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..experts.resnet import ResNetClassifier
from ..experts.yolo import YoloDetector
from ..experts.zoo import MANIFEST, Zoo, write_expert
from ..results.dataset import export_dataset
from ..results.review_boxes import ReviewBox
from ..results.reviews import ReviewRequest, record_review
from ..results.store import ResultStore, sqlite_url
from ..routing.rules import parse_rules
from ..runtime.safetensors_io import parse
from ..training.labelled.boxes import Box
from ..training.labelled.demo_boards import (
    CLASSES,
    PANEL_RULES,
    cut_windows,
    narrow_void,
    write_panels,
    write_yolo_set,
)
from ..training.labelled.detection import DetectionScore, detect, iou, score
from ..training.labelled.retrain_detector import DETECTOR_EPOCHS, retrain_taught_detector
from ..training.labelled.teach_detector import DetectorPlan, teach_detector
from ..training.retrain import Retrained, format_scores
from .line import LineConfig
from .run import open_source, run_line
from .service import ServiceConfig
from .verdict import classes_of, finding_detectors

Say = Callable[[str], None]
DETECTOR, CLASSIFIER = "det-panel", "cls-WIN"
PASS_ALL = -1e5  # the windows' classifier's margin of good: every window goes on to the detector
BOX_RIGHT = 0.5  # overlap (IoU) with the defect at which the operator leaves the detector's box as it drew it


@dataclass(frozen=True)
class DetectorLoop:
    boards: int = 160  # labelled boards the detector is taught from
    panels: int = 100  # panels through the line, every call reviewed
    fresh: int = 100  # panels nobody reviewed, scored before and after
    look: float = 0.5  # the share of windows with the new look
    narrow_voids: float = 0.5  # the share of voids that are narrow gaps in the lower bar, never shown it
    boxes: bool = True  # the operator draws boxes (escapes, misplaced boxes); else reviews without any
    epochs: int = 30  # teaching's at most
    retrain_epochs: int = DETECTOR_EPOCHS
    seed: int = 0
    data: Path | None = None


@dataclass
class DetectorLoopReport:
    loop: DetectorLoop
    threshold: float = 0.0
    reviews: dict[str, int] = field(default_factory=dict)
    exported: dict[str, int] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)
    boxed_by: dict[str, int] = field(default_factory=dict)  # whose boxes the exported defects carry
    retrained: Retrained | None = None
    after: dict[str, dict[str, Any]] = field(default_factory=dict)  # old | new -> the fresh panels' figures
    times: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.retrained is not None and bool((self.retrained.gate or {}).get("passed"))

    def table(self) -> str:
        r = self.retrained
        rows = [f"taught {DETECTOR} from {self.loop.boards} labelled boards; the line's panels: {self.loop.panels}, "
                f"{100 * self.loop.look:.0f}% of windows with the new look (round holes), "
                f"{100 * self.loop.narrow_voids:.0f}% of voids narrow gaps in the lower bar (never taught); boxes "
                f"{'drawn by the operator' if self.loop.boxes else 'none drawn (--no-boxes)'}; served "
                f"threshold {self.threshold:.3f}",
                f"reviews: {self.reviews}",
                f"exported for {DETECTOR}: {self.exported}" + (f"; left out: {self.left_out}" if self.left_out else ""),
                f"boxes its defects are taught by: {self.boxed_by}",
                "", "retraining (old against new on held-out windows neither trained on):",
                format_scores(r) if r else "-", "",
                f"windows of {self.loop.fresh} panels nobody reviewed, flagged at each version's threshold:",
                f"{'weights':10} {'threshold':>9} {'mAP':>7} {'void AP':>8} {'spur AP':>8} {'defects, taught':>16} "
                f"{'narrow voids':>16} {'clean, new look':>16} {'clean, plain':>14}", "-" * 112]
        for name, a in self.after.items():
            rows.append(f"{name:10} {a['threshold']:>9.3f} {pct(a['map']):>7} {pct(a['ap']['void']):>8} "
                        f"{pct(a['ap']['spur']):>8} "
                        + " ".join(f"{a[k][0]:>7}/{a[k][1]:<3} {pct(share(a[k])):>6}"
                                   for k in ("defective", "narrow void", "holed"))
                        + f" {a['plain'][0]:>4}/{a['plain'][1]:<3} {pct(share(a['plain'])):>6}")
        rows.append("times: " + ", ".join(f"{k} {v:.0f} s" for k, v in self.times.items()))
        return "\n".join(rows)

    def to_json(self) -> dict[str, Any]:
        r = self.retrained
        return {"loop": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self.loop).items()},
                "threshold": self.threshold, "reviews": self.reviews, "exported": self.exported,
                "left_out": self.left_out, "boxed_by": self.boxed_by, "after": self.after, "times": self.times,
                "retrained": None if r is None else {"version": r.version["weights_sha256"], "gate": r.gate,
                                                     "scores": {k: {"old": o.to_json(), "new": n.to_json()}
                                                                for k, (o, n) in r.scores.items()}}}


def pct(v: float | None) -> str:
    return "-" if v is None or v != v else f"{100 * v:.1f}%"


def share(pair: list[int]) -> float | None:
    return pair[0] / pair[1] if pair[1] else None


def run_detector_loop(loop: DetectorLoop, models: Path, say: Say) -> DetectorLoopReport:
    if loop.data:
        Path(loop.data).mkdir(parents=True, exist_ok=True)
        return _run(loop, Path(loop.data), models, say)
    with tempfile.TemporaryDirectory(prefix="inspector-detector-loop-") as tmp:
        return _run(loop, Path(tmp), models, say)


def _run(loop: DetectorLoop, work: Path, models: Path, say: Say) -> DetectorLoopReport:
    earlier = [name for name in ("boards", "zoo", "line", "fresh", "dataset", "results.sqlite")
               if (work / name).exists()]
    if earlier:
        raise ValueError(f"{work} holds an earlier run of this demo ({', '.join(earlier)}): give an empty --data "
                         "directory, or remove that one")
    report = DetectorLoopReport(loop)
    t0 = time.perf_counter()
    zoo_dir = work / "zoo"
    taught = teach_detector(DetectorPlan(DETECTOR, write_yolo_set(work / "boards", loop.boards, loop.seed), zoo_dir,
                                         epochs=loop.epochs, patience=loop.epochs, seed=loop.seed), say)
    report.threshold = float(taught.entry.spec["threshold"])
    zoo = _with_pass_all_classifier(zoo_dir)
    report.times["teach"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    rules = parse_rules(PANEL_RULES.replace("DETECTOR", DETECTOR).replace("SIZE", str(taught.input_size)),
                        str(work / "panel.yaml"))
    truth = write_panels(work / "line", loop.panels, loop.seed + 1, look=loop.look, narrow_voids=loop.narrow_voids)
    store = ResultStore(sqlite_url(work / "results.sqlite"))
    say(f"the line: {loop.panels} panels, {100 * loop.look:.0f}% of windows with round holes it never saw")
    run_line(rules, zoo, models, open_source(f"folder:{work / 'line'}", rules, 0, 0),
             ServiceConfig(LineConfig(device_mb=40), keep_crops="all"), store, work / "data", lambda _m: None)
    report.times["line"] = time.perf_counter() - t0
    report.reviews = _review(store, zoo, truth, loop.boxes)
    t0 = time.perf_counter()
    exported = export_dataset(store, work / "dataset", [rules], classes_of=classes_of(zoo), heldout_percent=30,
                              finders=finding_detectors(zoo))
    report.exported = dict(sorted(exported.counts().get(DETECTOR, {}).items()))
    report.left_out = dict(Counter(s["reason"] for s in exported.skipped if s.get("expert") == DETECTOR))
    report.boxed_by = dict(Counter(i["boxed_by"] for i in exported.items if i.get("boxed_by")))
    report.retrained = retrain_taught_detector(zoo, DETECTOR, work / "dataset", loop.retrain_epochs, loop.seed, say)
    report.times["retrain"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    fresh = write_panels(work / "fresh", loop.fresh, loop.seed + 2, look=loop.look, narrow_voids=loop.narrow_voids)
    windows = cut_windows(work / "fresh", fresh)
    zoo = Zoo.load(zoo_dir)
    arch = zoo.architecture(DETECTOR)
    assert isinstance(arch, YoloDetector)
    served, added = zoo.entries[DETECTOR].weights_sha256, report.retrained.version["weights_sha256"]
    old, own = arch.threshold, float(report.retrained.version["operating"]["threshold"])
    # the new weights also at the old threshold: what serving a version at its own threshold changes, same run
    for name, sha, thresholds in (("old", served, (old,)), ("new", added, (own, old))):
        file = next(v["file"] for v in zoo.entries[DETECTOR].versions if v["weights_sha256"] == sha)
        module = arch.materialize(parse((zoo_dir / file).read_bytes()), torch.device("cpu"))
        found = detect(arch, module, windows)
        for threshold in thresholds:
            row = f"{name}, old's" if name == "new" and threshold != own else name
            report.after[row] = {**_after(found, list(fresh.values()), threshold), "threshold": threshold}
    report.times["after"] = time.perf_counter() - t0
    return report


def _with_pass_all_classifier(zoo_dir: Path) -> Zoo:
    """The zoo with the windows' classifier: one that passes every window on (the detector alone decides)."""
    manifest = json.loads((zoo_dir / MANIFEST).read_text(encoding="utf-8"))
    gate = ResNetClassifier(10, 32, 2, good_margin=PASS_ALL)
    manifest["experts"].append(asdict(write_expert(zoo_dir, CLASSIFIER, "classifier", gate.spec(),
                                                   gate.random_state(0))))
    (zoo_dir / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return Zoo.load(zoo_dir)


def _review(store: ResultStore, zoo: Zoo, truth: dict, draw: bool = True) -> dict[str, int]:
    """Every flagged window reviewed (a false call, or confirmed under the class it has, the called one where it
    has that), every missed defect an escape; with `draw`, every defect's box drawn under its class (the rule set
    cuts each window whole: window pixels are crop pixels) on an escape and on a confirmed defect, unless the
    detector's one box is on the window's one defect; the calls made."""
    of, calls = classes_of(zoo), Counter()
    for insp in store.inspections():
        for p in insp.parts:
            boxes, _holed = truth[(Path(insp.source).name, p.ref)]
            kinds = sorted({CLASSES[b[0]] for b in boxes})
            drawn = _drawn(boxes) if draw else ()
            if p.verdict == "fail" and not boxes:
                req = ReviewRequest(insp.uuid, p.ref, "false_call", None, "demo")
            elif p.verdict == "fail":
                called = p.defect_class if p.defect_class in kinds else kinds[0]
                right = p.box_x0 is not None and len(drawn) == 1 and iou(
                    Box(0, p.box_x0, p.box_y0, p.box_x1, p.box_y1), Box(0, *drawn[0].at)) >= BOX_RIGHT
                req = ReviewRequest(insp.uuid, p.ref, "confirmed", called, "demo", boxes=() if right else drawn)
            elif boxes:
                req = ReviewRequest(insp.uuid, p.ref, "escape", kinds[0], "demo", boxes=drawn)
            else:
                continue
            record_review(store, req, of)
            calls[req.call + (f", {len(req.boxes)} boxes" if len(req.boxes) > 1 else ", boxed" if req.boxes
                              else "")] += 1
    return dict(calls)


def _drawn(boxes: list) -> tuple[ReviewBox, ...]:
    """The boxes an operator draws on a window: every defect's, under its class."""
    return tuple(ReviewBox((float(b[1]), float(b[2]), float(b[3]), float(b[4])), CLASSES[b[0]]) for b in boxes)


def _after(found: list, truth: list[tuple[list, bool]], threshold: float) -> dict[str, Any]:
    """The fresh windows' figures: mAP and each class's AP, and windows flagged (found, of) by kind."""
    s: DetectionScore = score(CLASSES, [tuple(Box(*b) for b in boxes) for boxes, _ in truth], found, threshold)
    flagged = [any(f.score >= threshold for f in fs) for fs in found]
    counts = {"defective": [0, 0], "narrow void": [0, 0], "holed": [0, 0], "plain": [0, 0]}
    for hit, (boxes, holed) in zip(flagged, truth):
        kind = "narrow void" if any(narrow_void(b) for b in boxes) else \
            "defective" if boxes else "holed" if holed else "plain"
        counts[kind][0] += int(hit)
        counts[kind][1] += 1
    return {"map": s.map, "ap": {c: s.per_class[c]["ap"] for c in CLASSES}, **counts}
