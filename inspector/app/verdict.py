"""From what the experts said to a part's verdict and defect class.

The classifier names gross defects; when it passes the part and the route
has a detector, the detector's best box decides polarity (its class) and
alignment (its centre against the crop's centre, within the rule's tolerance
in board pixels). No confident detection is "unverified", a failure: a part
the line could not confirm is never passed. A verifying detector taught the
plant's own classes (`zoo train --new --kind detector --good CLASS`) fails a
part whose best box is any class but its good one, under that class's name;
one that finds fails a part on any confident box.
"""
from __future__ import annotations

from collections.abc import Callable

from ..coserve.online.request import RequestResult
from ..experts.base import Prediction
from ..experts.zoo import Zoo
from ..results.records import PartRecord
from ..results.reviews import PART_DEFECTS
from ..routing.rules import CLASSIFIER_CLASSES, DETECTOR_CLASSES, ComponentRule


def part_verdict(result: RequestResult, ref: str, comp: ComponentRule, zoo: Zoo, margin: int,
                 crop_size: tuple[int, int] | None = None) -> PartRecord:
    """`crop_size` (w, h): the crop the experts were served, where the detector's box is read back to (default:
    the window the rule cuts, the footprint and its margin)."""
    def rec(expert: str, verdict: str, defect: str, score: float | None, box=None) -> PartRecord:  # noqa: ANN001
        entry = zoo.entries.get(expert)
        return PartRecord(ref, comp.name, expert, entry.weights_sha256 if entry else None, verdict, defect, score,
                          box)

    if result.error is not None:
        rec_ = rec(comp.classifier if not result.steps else result.steps[-1][0], "error", "error", None)
        rec_.error = result.error
        return rec_
    expert, cls = result.steps[0]
    if not cls.passed:
        return ranked(rec(expert, "fail", class_name(zoo, expert, cls.label), cls.score), cls, zoo, expert)
    if len(result.steps) < 2:
        return ranked(rec(expert, "pass", "ok", cls.score), cls, zoo, expert)
    expert, det = result.steps[1]
    arch = zoo.architecture(expert)
    box = None
    if det.box is not None:  # input pixels back to the crop's, through the detector's fitting (squash, letterbox)
        x, y, w, h = det.box
        sx, sy, ox, oy = arch.unfit(crop_size or (comp.size[0] + 2 * margin, comp.size[1] + 2 * margin))
        box = ((x - w / 2) * sx + ox, (y - h / 2) * sy + oy, (x + w / 2) * sx + ox, (y + h / 2) * sy + oy)
    if getattr(arch, "mode", "verify") == "find":  # every class a defect: a confident box fails the part
        return rec(expert, "pass", "ok", det.score, box) if det.passed else \
            rec(expert, "fail", class_name(zoo, expert, det.label, DETECTOR_CLASSES), det.score, box)
    threshold = getattr(arch, "threshold", 0.5)
    if det.score < threshold:
        return rec(expert, "fail", "unverified", det.score, box)
    if det.label != 0:  # a confident body of another class than good: the demo's reversed one, a taught one's own
        name = class_name(zoo, expert, det.label, DETECTOR_CLASSES)
        demo = own_classes(zoo, expert) is None  # the demo's: written with its two classes (or, older, none)
        return rec(expert, "fail", "polarity" if demo and name == "reversed" else name, det.score, box)
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    bx, by = comp.body_geometry[:2]  # where the footprint puts the body about the window's centre (0, 0: centred)
    expect_x, expect_y = comp.size[0] // 2 + margin + bx, comp.size[1] // 2 + margin + by
    if abs(cx - expect_x) > comp.align_tolerance_px or abs(cy - expect_y) > comp.align_tolerance_px:
        return rec(expert, "fail", "shifted", det.score, box)
    return rec(expert, "pass", "ok", det.score, box)


def ranked(record: PartRecord, cls: Prediction, zoo: Zoo, expert: str) -> PartRecord:
    """The record with its classifier's log-odds of good and likeliest defect, where it has an operating point."""
    if cls.good_logodds is not None:
        record.good_logodds = cls.good_logodds
        record.likeliest = class_name(zoo, expert, cls.likeliest_defect if cls.likeliest_defect is not None else -1)
    return record


def classes_of(zoo: Zoo) -> Callable[[str], tuple[str, ...] | None]:
    """Each expert's own class names (good first) where it was taught them, else None (the demo's): what a review's
    correct class is checked against. A detector that finds has no good class of its own (every class it boxes is a
    defect): 'ok' stands first for it."""
    finders = finding_detectors(zoo)

    def of(expert: str) -> tuple[str, ...] | None:
        if expert in finders:
            return ("ok", *finders[expert])
        return own_classes(zoo, expert)
    return of


def own_classes(zoo: Zoo, expert: str) -> tuple[str, ...] | None:
    """The class names `expert` was taught (good first), or None for the demo's experts (their six classes, their
    detectors' two, or none written): any part class of the demo's is theirs."""
    entry = zoo.entries.get(expert)
    own = tuple(entry.classes) if entry is not None and entry.classes else None
    return None if own in (CLASSIFIER_CLASSES, DETECTOR_CLASSES) else own


def review_classes(zoo: Zoo | None) -> Callable[[str], tuple[str, ...]]:
    """The defect classes a review of a part each expert decided may name (the dashboard's choice): its own where
    it was taught them, else the demo's."""
    of = classes_of(zoo) if zoo is not None else None

    def named(expert: str) -> tuple[str, ...]:
        own = of(expert) if of is not None else None
        return own[1:] if own else PART_DEFECTS
    return named


def finding_detectors(zoo: Zoo) -> dict[str, tuple[str, ...]]:
    """The detectors taught their own classes that find (every class a defect), with those classes: the dataset
    export labels their crops by the boxes they drew (results/detector_labels.py)."""
    return {name: tuple(e.classes) for name, e in zoo.entries.items()
            if e.role == "detector" and e.classes and e.spec.get("mode") == "find"}


def class_name(zoo: Zoo, expert: str, label: int, demo: tuple[str, ...] = CLASSIFIER_CLASSES) -> str:
    """An expert's label by its own classes (a taught expert has the plant's: training/labelled), else the demo
    experts' (`demo`)."""
    entry = zoo.entries.get(expert)
    names = entry.classes if entry is not None and entry.classes else demo
    return names[label] if 0 <= label < len(names) else f"class {label}"
