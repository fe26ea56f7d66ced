"""`inspector dataset export`: reviewed crops (or all kept crops) as training sets, with a manifest.

Layout under the output directory, one tree per expert (the rule sets say which classifier and detector a
component type routes to):

    classifiers/<expert>/{train,heldout}/<class>/<inspection>_<ref>.png         torchvision ImageFolder
    detectors/<expert>/images/{train,heldout}/<inspection>_<ref>.png            YOLO (Ultralytics) layout
    detectors/<expert>/labels/{train,heldout}/<inspection>_<ref>.txt            class cx cy w h, normalised
    detectors/<expert>/data.yaml, coco_{train,heldout}.json                     COCO instances beside it
    detectors/<expert>/unboxed/{train,heldout}/<class>/<inspection>_<ref>.png  a reviewed part of the detector's
                       class with no box to teach by (an escape nobody boxed): scored by its call, never trained on
    golden/<any crop's path above>     the golden board's window the part was compared with (a rule set with a
                       golden board: what a golden-comparison expert learns beside the crop; golden_windows.py)
    manifest.json      the source inspection ids, rule-set hashes, the weights hashes that made the calls,
                       every item with its label, where the label came from and its split, and every part
                       left out with the reason

Labels come from the review: a false call is a good part ("ok"); a confirmed defect is the class called or the one the
reviewer corrected it to; an escape is the class the reviewer named (an escape without one is left out: it cannot
label a crop). A detector's box is the one the reviewer drew on the crop where there is one, else the detector's own
where it called the defect (detector_labels.py; `boxed_by` in the manifest), and a part with neither is kept unboxed
(`unboxed` in the manifest says why and what to do). A reviewer who drew several boxes (a part with several defects)
has every one of them taught, each under its own class (results/review_boxes.py). Unreviewed parts (`include_all`)
carry the line's own call and say so. The split is fixed by each part's identity (a hash of inspection id and
designator), so exporting again after more reviews keeps every earlier part on its side: a held-out crop never leaks
into training.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import cv2
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..ingest.images import write_image
from ..routing.rules import CLASSIFIER_CLASSES, ComponentRule, RuleSet
from .detector_labels import (
    DEMO_DETECTOR_NAMES,
    DetectorLabels,
    Unboxed,
    demo_labels,
    finding_labels,
    verifying_labels,
)
from .golden_windows import GoldenWindows
from .review_boxes import ReviewBox
from .reviews import ClassesOf
from .schema import ComponentResult, Inspection, Review
from .store import Filters, ResultStore, board_filters

HELDOUT_PERCENT = 30
UNBOXED = "unboxed"  # a detector's crops without a box, beside its YOLO tree (no reader of that tree sees them)
GOLDEN = "golden"  # the golden windows' tree beside the crops': golden/<the crop's own path>


def split_of(inspection_id: str, ref: str, heldout_percent: int = HELDOUT_PERCENT) -> str:
    digest = hashlib.sha256(f"{inspection_id}/{ref}".encode()).digest()
    return "heldout" if int.from_bytes(digest[:4], "big") % 100 < heldout_percent else "train"


@dataclass
class ExportReport:
    out: Path
    items: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def counts(self) -> dict[str, dict[str, int]]:
        """expert -> 'split/label' -> crops ('split/label, no box' for a detector's unboxed ones)."""
        out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for item in self.items:
            out[item["expert"]][f"{item['split']}/{item['label']}" + (", no box" if "unboxed" in item else "")] += 1
        return {k: dict(v) for k, v in sorted(out.items())}


def export_dataset(store: ResultStore, out: Path, rule_sets: list[RuleSet], include_all: bool = False,
                   filters: Filters | None = None, heldout_percent: int = HELDOUT_PERCENT,
                   classes_of: ClassesOf | None = None,
                   finders: Mapping[str, tuple[str, ...]] | None = None) -> ExportReport:
    """Write the dataset under `out` (replacing a dataset written there before); what was written and left out.
    `classes_of` (from the zoo): an expert taught its own classes gets its crops under them, a good part under its
    good class; other experts' under the demo's classes. `finders`: the taught detectors that find and their
    classes (every one a defect): their crops are labelled by the boxes they drew (detector_labels.py)."""
    components = {c.name: (c, r) for r in rule_sets for c in r.components}
    out = Path(out)
    if (out / "manifest.json").is_file():
        shutil.rmtree(out)  # a dataset is exported whole; stale crops of an earlier export must not linger
    elif out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty and holds no dataset manifest; export into a new directory")
    out.mkdir(parents=True, exist_ok=True)
    report = ExportReport(out)
    coco: dict[tuple[str, str], dict[str, list]] = defaultdict(lambda: {"images": [], "annotations": []})
    names: dict[str, tuple[str, ...]] = {}  # detector -> the class names its tree is labelled in
    trees = _DetectorTrees(coco, names, classes_of, finders or {})
    windows = GoldenWindows()
    rulesets: set[str] = set()
    weights: dict[str, set[str]] = defaultdict(set)
    store.ready()
    with Session(store.engine) as s:
        q = select(Inspection, ComponentResult, Review).join(ComponentResult.inspection) \
            .outerjoin(Review, Review.component_result_id == ComponentResult.id)
        if not include_all:
            q = q.where(Review.id.is_not(None))
        q = store.reading_reviews(board_filters(q, store.searching(filters)))
        if filters is not None and filters.component:
            q = q.where(ComponentResult.component_type == filters.component)
        for insp, part, review in s.execute(q.order_by(ComponentResult.id)):
            why = _export_part(out, insp, part, review, components, heldout_percent, report, trees, windows,
                               classes_of)
            if why:
                report.skipped.append({"inspection_id": insp.uuid, "ref": part.ref, "reason": why})
                continue
            rulesets.add(f"{insp.recipe}:{insp.ruleset_version}")
            if part.weights_sha256:
                weights[part.expert].add(part.weights_sha256)
    for (expert, split), doc in coco.items():
        doc["categories"] = [{"id": i, "name": n} for i, n in enumerate(names[expert])]
        (out / "detectors" / expert / f"coco_{split}.json").write_text(json.dumps(doc), encoding="utf-8")
    for expert in {e for e, _ in coco}:
        listed = "".join(f"  {i}: {json.dumps(n)}\n" for i, n in enumerate(names[expert]))  # any script, quoted
        sides = "".join(f"{key}: images/{split}\n" for key, split in (("train", "train"), ("val", "heldout"))
                        if (expert, split) in coco)  # a side no crop fell on is not named (readers refuse a gap)
        (out / "detectors" / expert / "data.yaml").write_text(f"path: .\n{sides}names:\n{listed}", encoding="utf-8")
    manifest = {"format": 1, "created": datetime.now(timezone.utc).isoformat(), "database": store.safe_url,
                "reviewed_only": not include_all, "heldout_percent": heldout_percent,
                "rule_sets": sorted(rulesets), "weights": {k: sorted(v) for k, v in sorted(weights.items())},
                "inspections": sorted({i["inspection_id"] for i in report.items}),
                "items": report.items, "skipped": report.skipped}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return report


def _export_part(out: Path, insp: Inspection, part: ComponentResult, review: Review | None,
                 components: dict[str, tuple[ComponentRule, RuleSet]], heldout_percent: int, report: ExportReport,
                 trees: _DetectorTrees, windows: GoldenWindows, classes_of: ClassesOf | None = None) -> str | None:
    """Write one part's crop where its labels put it; the reason it was left out, or None."""
    if part.component_type not in components:
        return f"component type {part.component_type} is in none of the rule sets given (--rules)"
    comp, rules = components[part.component_type]
    truth, source = _truth(part, review)
    if truth is None:
        return source
    if not part.crop_path or not Path(part.crop_path).is_file():
        return ("no crop was kept of this part (the line keeps failed parts' crops; run it with --keep-crops all "
                "to review passes)")
    image = cv2.imread(part.crop_path, cv2.IMREAD_COLOR)
    if image is None:
        return f"the crop {part.crop_path} cannot be read as an image"
    split = split_of(insp.uuid, part.ref, heldout_percent)
    stem = f"{insp.uuid}_{part.ref}"
    common = {"inspection_id": insp.uuid, "ref": part.ref, "component_type": part.component_type,
              "split": split, "source": source, "called": part.defect_class, "weights_sha256": part.weights_sha256}
    cls_label = "ok" if truth == "polarity" else truth
    own = classes_of(comp.classifier) if classes_of is not None else None
    if own:  # a taught expert: its good class for a good part, its own defect classes
        cls_label = own[0] if cls_label == "ok" else cls_label
    written = len(report.items)
    if cls_label in (own or CLASSIFIER_CLASSES):
        path = out / "classifiers" / comp.classifier / split / cls_label / f"{stem}.png"
        _write_png(path, image)
        report.items.append({**common, "expert": comp.classifier, "role": "classifier", "label": cls_label,
                             "file": str(path.relative_to(out))})
    if comp.detector:
        h, w = image.shape[:2]
        drawn = review.drawn_boxes if review is not None else ()
        labels, why = trees.labels(part, comp, rules.crop_margin, w, h, truth, drawn)
        if why:
            report.skipped.append({"inspection_id": insp.uuid, "ref": part.ref, "expert": comp.detector,
                                   "reason": why})
        elif isinstance(labels, Unboxed):
            file = Path("detectors") / comp.detector / UNBOXED / split / labels.label / f"{stem}.png"
            _write_png(out / file, image)
            report.items.append({**common, "expert": comp.detector, "role": "detector", "label": labels.label,
                                 "file": str(file), "unboxed": labels.why})
        elif labels is not None:
            file = trees.write(out / "detectors" / comp.detector, comp.detector, split, stem, image, labels)
            report.items.append({**common, "expert": comp.detector, "role": "detector", "label": labels.label,
                                 "file": str(Path("detectors") / comp.detector / file),
                                 **({"boxed_by": labels.boxed_by} if labels.boxed_by else {})})
    if rules.golden and len(report.items) > written:  # what a golden-comparison expert learns beside the crop
        window = windows.cut(part, comp, rules, image)
        for item in report.items[written:]:
            if isinstance(window, str):
                item["golden_missing"] = window
            else:
                item["golden"] = str(Path(GOLDEN) / item["file"])
                _write_png(out / item["golden"], window)
    return None


class _DetectorTrees:
    """Each detector's crops as a YOLO set with its COCO twin, labelled in its own classes."""

    def __init__(self, coco: dict[tuple[str, str], dict[str, list]], names: dict[str, tuple[str, ...]],
                 classes_of: ClassesOf | None, finders: Mapping[str, tuple[str, ...]]) -> None:
        self.coco, self.names, self.classes_of, self.finders = coco, names, classes_of, finders

    def labels(self, part: ComponentResult, comp: ComponentRule, margin: int, w: int, h: int,
               truth: str, drawn: Sequence[ReviewBox] = ()) -> tuple[DetectorLabels | Unboxed | None, str | None]:
        """(the crop's labels, or its class without a box; None) or (None, why the detector cannot learn from it);
        (None, None): nothing to write and nothing to say (a demo detector and a classifier's defect). `drawn`:
        the reviewer's boxes."""
        detector = comp.detector or ""
        own = self.classes_of(detector) if self.classes_of is not None else None
        if detector in self.finders:
            classes = self.finders[detector]
            labels = finding_labels(part, detector, classes, w, h, truth, drawn)
        elif not own:
            classes = DEMO_DETECTOR_NAMES
            labels = demo_labels(part, comp, margin, w, h, truth, drawn)
        else:  # a taught verifier: its good class first
            classes = own
            labels = verifying_labels(part, detector, own, w, h, truth, drawn)
        self.names.setdefault(detector, classes)
        return (None, labels) if isinstance(labels, str) else (labels, None)

    def write(self, root: Path, detector: str, split: str, stem: str, image: Any,  # noqa: ANN401 - an image
              labels: DetectorLabels) -> Path:
        """The crop and its label file under `root`; its path there."""
        img_path = Path("images") / split / f"{stem}.png"
        _write_png(root / img_path, image)
        lbl = root / "labels" / split / f"{stem}.txt"
        lbl.parent.mkdir(parents=True, exist_ok=True)
        lbl.write_text("".join(f"{k} {' '.join(f'{v:.6f}' for v in box)}\n" for k, *box in labels.rows),
                       encoding="utf-8")
        doc = self.coco[(detector, split)]
        h, w = image.shape[:2]
        image_id = len(doc["images"]) + 1
        doc["images"].append({"id": image_id, "file_name": str(img_path), "width": w, "height": h})
        for k, cx, cy, bw, bh in labels.rows:
            doc["annotations"].append({"id": len(doc["annotations"]) + 1, "image_id": image_id, "category_id": k,
                                       "bbox": [(cx - bw / 2) * w, (cy - bh / 2) * h, bw * w, bh * h],
                                       "area": bw * w * bh * h, "iscrowd": 0})
        return img_path


def _truth(part: ComponentResult, review: Review | None) -> tuple[str | None, str]:
    """(what the part really is, where that comes from), or (None, why it cannot be labelled)."""
    if part.verdict == "error":
        return None, "the part was not inspected (error)"
    if review is None:
        return ("ok" if part.verdict == "pass" else part.defect_class), "line"
    if review.call == "false_call":
        return "ok", "review"
    if review.call == "escape":
        if review.correct_class is None:
            return None, "an escape without its class cannot label a crop: review it again with correct_class"
        return review.correct_class, "review"
    called = review.correct_class or part.defect_class
    if called == "unverified":
        return None, "a confirmed 'unverified' part names no class: review it again with correct_class"
    return called, "review"


def _write_png(path: Path, image: Any) -> None:  # noqa: ANN401 - an OpenCV image
    path.parent.mkdir(parents=True, exist_ok=True)
    write_image(path, image)
