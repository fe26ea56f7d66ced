"""What one reviewed part teaches its detector: the boxes of its crop, in the detector's own classes.

The demo's detectors verify a body (in place or reversed): every part they saw is a box of one of the two, the
detector's own box where its call was right, else the body where the recipe puts it. A detector taught from labelled
images that **finds** (every class a defect, training/labelled/teach_detector.py) learns otherwise: a good part is a
clean image (no box at all), a defect is the box the detector itself drew on the part, under the class the operator
confirmed. Where the reviewer drew the defects' boxes on the kept crop (results/review_boxes.py), those boxes teach
instead of the detector's, every one under its own class (the review's where it names none): an escape has no other, a
confirmed defect the detector boxed wrong is put right, and a part with two defects teaches both (the detector's one
box would teach the other as background). A part with no box at all (the classifier decided it, or an escape nobody
boxed) is left out of the detector's training set, never guessed at: it is `Unboxed` (its class, no box), a crop
retraining scores image by image (does the detector call the part at all) and never trains on. A taught detector that
**verifies** (`--good`: a body of its good class passes) learns every crop as one body: under its good class for a
good part, under the confirmed class for a defect, boxed where the reviewer drew it (one body: a review of more boxes
cannot teach it, said), else where the detector itself boxed the body confidently (whatever class it named: a
verifier's box finds the body, its class is what a review corrects); a part it found no confident body on, with no box
drawn, is `Unboxed` as well.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..routing.rules import ComponentRule
from .review_boxes import Box, ReviewBox
from .schema import ComponentResult

DEMO_DETECTOR_NAMES = ("in_place", "reversed")
OUTSIDE_SHARE = 0.5  # a drawn box with less of its area inside the crop frames nothing there
CLEAN = "no defect"  # a finding detector's label for a crop without boxes (manifest and counts)

Row = tuple[int, float, float, float, float]  # class, cx, cy, w, h normalised to the crop


@dataclass(frozen=True)
class DetectorLabels:
    label: str  # what the manifest and the counts call the crop
    rows: tuple[Row, ...]
    boxed_by: str | None = None  # whose box it is: "detector", "reviewer", "recipe" (the body where it is placed)


@dataclass(frozen=True)
class Unboxed:
    """A reviewed part of a detector's class that carries no box to teach by: what it is (`label`), why no box
    (`why`, what to do). Nothing to train on, but the detector's call of the whole crop can still be scored."""
    label: str
    why: str


def demo_labels(part: ComponentResult, comp: ComponentRule, margin: int, w: int, h: int,
                truth: str, drawn: Sequence[ReviewBox] = ()) -> DetectorLabels | str | None:
    """A demo detector's body box (the reviewer's `drawn` one first), None when the part's truth is not one it
    knows (a classifier's defect), or why the drawn boxes cannot teach."""
    if truth not in ("ok", "polarity"):
        return None
    label = DEMO_DETECTOR_NAMES[1] if truth == "polarity" else DEMO_DETECTOR_NAMES[0]
    body = _one_body(drawn, comp.detector or "the demo detector", truth)
    if isinstance(body, str):
        return body
    if body is not None:
        inside = _inside(body, w, h, "the reviewer drew")
        return inside if isinstance(inside, str) else \
            DetectorLabels(label, ((DEMO_DETECTOR_NAMES.index(label), *_normalised(inside, w, h)),), "reviewer")
    called_right = (truth == "polarity" and part.defect_class == "polarity") or \
                   (truth == "ok" and part.verdict == "pass")
    if called_right and part.box_x0 is not None:
        box, by = _normalised((part.box_x0, part.box_y0, part.box_x1, part.box_y1), w, h), "detector"
    else:  # the body where the recipe puts it (a part judged in place is within its tolerance of there)
        bw, bh = comp.size
        box, by = ((bw // 2 + margin) / w, (bh // 2 + margin) / h, 0.78 * bw / w, bh / h), "recipe"
    return DetectorLabels(label, ((DEMO_DETECTOR_NAMES.index(label), *box),), by)


def finding_labels(part: ComponentResult, detector: str, classes: tuple[str, ...], w: int, h: int,
                   truth: str, drawn: Sequence[ReviewBox] = ()) -> DetectorLabels | Unboxed | str:
    """A finding detector's boxes of the part (none for a good one): the reviewer's `drawn` boxes, each under its
    own class or else the review's (`truth`), else the one the detector drew where it called the defect; `Unboxed`
    where neither; or why the part cannot teach it."""
    if truth == "ok":
        return DetectorLabels(CLEAN, ())
    if truth not in classes:
        return (f"{truth!r} is not a class {detector} finds ({', '.join(classes)}): its crop teaches that detector "
                "nothing")
    if drawn:
        rows = []
        for b in drawn:
            name = b.defect or truth
            if name not in classes:
                return (f"the box {b.says()} the reviewer drew names {name!r}, not a class {detector} finds "
                        f"({', '.join(classes)}): review it again with one of those (or none, for the review's)")
            inside = _inside(b.at, w, h, "the reviewer drew")
            if isinstance(inside, str):
                return inside
            rows.append((classes.index(name), *_normalised(inside, w, h)))
        return DetectorLabels(truth, tuple(rows), "reviewer")
    called = part.expert == detector and part.verdict == "fail"  # a pass's best box is a guess
    chosen = _chosen(part, detector, None, called, w, h, (
        f"{detector} called no defect on this part (its classifier decided it, or the detector missed it): draw the "
        "defect's box on the crop in the review (dashboard history tab, or the review's \"box\") to teach it"))
    return _labelled(chosen, truth, classes, w, h)


def verifying_labels(part: ComponentResult, detector: str, classes: tuple[str, ...], w: int, h: int,
                     truth: str, drawn: Sequence[ReviewBox] = ()) -> DetectorLabels | Unboxed | str:
    """A verifying detector's body box of the part under the class it really is (`classes[0]` its good one),
    `Unboxed` where no box is known, or why the part cannot teach it."""
    if truth == "ok":
        name = classes[0]
    elif truth in classes[1:]:
        name = truth
    else:
        return (f"{truth!r} is not a class {detector} verifies ({classes[0]} against {', '.join(classes[1:])}): its "
                "crop teaches that detector nothing")
    body = _one_body(drawn, detector, name)
    if isinstance(body, str):
        return body
    confident = part.expert == detector and part.defect_class != "unverified"
    chosen = _chosen(part, detector, body, confident, w, h, (
        f"{detector} boxed no body on this part with confidence (its classifier decided it, or its best box was "
        "under the threshold): draw the body's box on the crop in the review (a defect's review; dashboard history "
        "tab, or the review's \"box\") to teach it"))
    return _labelled(chosen, name, classes, w, h)


def _one_body(drawn: Sequence[ReviewBox], detector: str, name: str) -> Box | str | None:
    """A verifier's body as the reviewer drew it (None: not drawn), or why the boxes drawn cannot be one: a verifier
    sees one body a crop, under the class the review says it is."""
    if len(drawn) > 1:
        return (f"{detector} verifies one body a crop, but the review drew {len(drawn)} boxes: review it again with "
                "the body's box alone")
    if drawn and drawn[0].defect not in (None, name):
        return (f"the box {drawn[0].says()} names {drawn[0].defect!r}, but {detector}'s body here is {name!r} (the "
                "review's class): leave the box's class out")
    return drawn[0].at if drawn else None


def _chosen(part: ComponentResult, detector: str, drawn: Box | None, trusted: bool, w: int, h: int,
            missing: str) -> tuple[Box, str] | Unboxed | str:
    """(the box to teach by, whose: the reviewer's `drawn` one, else the detector's where `trusted`), clipped to
    the crop; `Unboxed` (the label filled in by the caller) where there is neither; why not where the box lies
    mostly outside the crop."""
    if drawn is not None:
        box, by = _inside(drawn, w, h, "the reviewer drew"), "reviewer"
    elif trusted and part.box_x0 is not None:
        box, by = _inside((part.box_x0, part.box_y0, part.box_x1, part.box_y1), w, h, f"{detector} drew"), "detector"
    else:
        return Unboxed("", missing)
    return box if isinstance(box, str) else (box, by)


def _labelled(chosen: tuple[Box, str] | Unboxed | str, name: str, classes: tuple[str, ...], w: int,
              h: int) -> DetectorLabels | Unboxed | str:
    """The crop's labels under `name` from what `_chosen` found."""
    if isinstance(chosen, str):
        return chosen
    if isinstance(chosen, Unboxed):
        return Unboxed(name, chosen.why)
    return DetectorLabels(name, ((classes.index(name), *_normalised(chosen[0], w, h)),), chosen[1])


def _inside(box: Box, w: int, h: int, whose: str) -> Box | str:
    """`box` clipped to the crop, or why it frames nothing there (less than OUTSIDE_SHARE of it inside)."""
    area = (box[2] - box[0]) * (box[3] - box[1])
    x0, y0, x1, y1 = (min(max(v, 0.0), side) for v, side in zip(box, (w, h, w, h)))
    if area <= 0 or (x1 - x0) * (y1 - y0) < OUTSIDE_SHARE * area:
        return (f"the box {whose} ({box[0]:.0f}, {box[1]:.0f})-({box[2]:.0f}, {box[3]:.0f}) lies mostly outside the "
                f"crop ({w}x{h} px): not a box to teach by")
    return (x0, y0, x1, y1)


def _normalised(box: Box, w: int, h: int) -> tuple[float, float, float, float]:
    """YOLO's centre and size, as shares of the crop."""
    x0, y0, x1, y1 = box
    return ((x0 + x1) / 2 / w, (y0 + y1) / 2 / h, (x1 - x0) / w, (y1 - y0) / h)
