"""What one reviewed part teaches its detector: the boxes of its crop, in the detector's own classes.

The demo's detectors verify a body (in place or reversed): every part they saw is a box of one of the two, the
detector's own box where its call was right, else the body where the recipe puts it. A detector taught from
labelled images that **finds** (every class a defect, training/labelled/teach_detector.py) learns otherwise: a
good part is a clean image (no box at all), a defect is the box the detector itself drew on the part, under the
class the operator confirmed. A part the detector drew nothing on (the classifier decided it, or an escape) has no
box to teach with: it is left out of the detector's set and said, never guessed at.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..routing.rules import ComponentRule
from .schema import ComponentResult

DEMO_DETECTOR_NAMES = ("in_place", "reversed")
OUTSIDE_SHARE = 0.5  # a drawn box with less of its area inside the crop frames nothing there
CLEAN = "no defect"  # a finding detector's label for a crop without boxes (manifest and counts)

Row = tuple[int, float, float, float, float]  # class, cx, cy, w, h normalised to the crop


@dataclass(frozen=True)
class DetectorLabels:
    label: str  # what the manifest and the counts call the crop
    rows: tuple[Row, ...]


def demo_labels(part: ComponentResult, comp: ComponentRule, margin: int, w: int, h: int,
                truth: str) -> DetectorLabels | None:
    """A demo detector's body box, or None when the part's truth is not one it knows (a classifier's defect)."""
    if truth not in ("ok", "polarity"):
        return None
    called_right = (truth == "polarity" and part.defect_class == "polarity") or \
                   (truth == "ok" and part.verdict == "pass")
    if called_right and part.box_x0 is not None:
        x0, y0, x1, y1 = part.box_x0, part.box_y0, part.box_x1, part.box_y1
        box = ((x0 + x1) / 2 / w, (y0 + y1) / 2 / h, (x1 - x0) / w, (y1 - y0) / h)
    else:  # the body where the recipe puts it (a part judged in place is within its tolerance of there)
        bw, bh = comp.size
        box = ((bw // 2 + margin) / w, (bh // 2 + margin) / h, 0.78 * bw / w, bh / h)
    label = DEMO_DETECTOR_NAMES[1] if truth == "polarity" else DEMO_DETECTOR_NAMES[0]
    return DetectorLabels(label, ((DEMO_DETECTOR_NAMES.index(label), *box),))


def finding_labels(part: ComponentResult, detector: str, classes: tuple[str, ...], w: int, h: int,
                   truth: str) -> DetectorLabels | str:
    """A finding detector's boxes of the part (none for a good one), or why the part cannot teach it."""
    if truth == "ok":
        return DetectorLabels(CLEAN, ())
    if truth not in classes:
        return (f"{truth!r} is not a class {detector} finds ({', '.join(classes)}): its crop teaches that detector "
                "nothing")
    if part.expert != detector or part.verdict != "fail" or part.box_x0 is None:  # a pass's best box is a guess
        return (f"{detector} called no defect on this part (its classifier decided it, or the detector missed it): "
                "box the defect in a labelling tool and add the crop to the detector's set to teach it")
    drawn = (part.box_x1 - part.box_x0) * (part.box_y1 - part.box_y0)
    x0, y0, x1, y1 = (min(max(v, 0.0), side) for v, side in ((part.box_x0, w), (part.box_y0, h), (part.box_x1, w),
                                                             (part.box_y1, h)))
    if drawn <= 0 or (x1 - x0) * (y1 - y0) < OUTSIDE_SHARE * drawn:
        return (f"the box {detector} drew ({part.box_x0:.0f}, {part.box_y0:.0f})-({part.box_x1:.0f}, "
                f"{part.box_y1:.0f}) lies mostly outside the crop ({w}x{h} px): not a box to teach by")
    return DetectorLabels(truth, ((classes.index(truth), (x0 + x1) / 2 / w, (y0 + y1) / 2 / h, (x1 - x0) / w,
                                   (y1 - y0) / h),))
