"""A review's boxes: where each defect is on the part's kept crop, as the reviewer drew them (crop pixels, the frame
of the part's own box).

Why several: a part can carry more than one defect (bridges on two pairs of a QFP's pins, a void and a spur in one
window). A detector that finds defects is taught every box of its crop and everything outside them as clean
(results/detector_labels.py), so a second defect left out of the review would teach it that such a defect is
background. Each box may name its own class (a bridge and a missing fillet on one part); without one it is the
review's. The boxes a reviewer drew are the crop's whole truth: they replace the box the detector drew, never add to
it. Stored with the review: the first in reviews.box_* (schema 0012, what an older release reads), all of them as
JSON in reviews.boxes (0013).
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 on the kept crop
BOX_MAX = 100_000.0  # px: a crop's side is far below it; a box beyond it is not on one
BOX_LEAST = 1.0  # px: a box narrower or lower frames nothing
MOST_BOXES = 64  # a crop with more defects than this is not a part to teach by box


class BoxRefused(ValueError):
    """A box that frames nothing on a crop, or boxes a review cannot carry; the message says which and why."""


@dataclass(frozen=True)
class ReviewBox:
    at: Box
    defect: str | None = None  # the class of the defect it frames; None: the review's

    def to_json(self) -> dict[str, Any]:
        return {"box": list(self.at), **({"class": self.defect} if self.defect is not None else {})}

    def says(self) -> str:
        """As a person reads it: (x0, y0)-(x1, y1) and its class where it names one."""
        x0, y0, x1, y1 = self.at
        return f"({x0:.0f}, {y0:.0f})-({x1:.0f}, {y1:.0f})" + (f" {self.defect}" if self.defect else "")


def boxes_json(boxes: Sequence[ReviewBox]) -> list[dict[str, Any]]:
    """The boxes as JSON (the API, the audit trail, the stored column)."""
    return [b.to_json() for b in boxes]


def box_of(raw: Any) -> Box:  # noqa: ANN401 - JSON
    """Four numbers [x0, y0, x1, y1] as a box; ValueError when they are not."""
    if not isinstance(raw, (list, tuple)) or len(raw) != 4 or any(isinstance(v, bool) for v in raw):
        raise ValueError(f"a box is four numbers [x0, y0, x1, y1], not {raw!r}")
    x0, y0, x1, y1 = (float(v) for v in raw)
    return (x0, y0, x1, y1)


def review_box_of(raw: Any) -> ReviewBox:  # noqa: ANN401 - JSON
    """One of a review's boxes from JSON: [x0, y0, x1, y1], or {"box": [x0, y0, x1, y1], "class": optional}."""
    if isinstance(raw, dict):
        unknown = set(raw) - {"box", "class"}
        if unknown or "box" not in raw:
            raise ValueError(f'a box is [x0, y0, x1, y1] or {{"box": [x0, y0, x1, y1], "class": optional}}, not '
                             f"{raw!r}")
        defect = raw.get("class")
        return ReviewBox(box_of(raw["box"]), None if defect in (None, "") else str(defect))
    return ReviewBox(box_of(raw))


def boxes_of(doc: dict[str, Any]) -> tuple[ReviewBox, ...]:
    """A review's boxes from its JSON: "boxes" (a list), or "box" (one, as clients before several were sent);
    ValueError for both, or for anything that is not boxes."""
    if doc.get("box") is not None and doc.get("boxes") is not None:
        raise ValueError('send the boxes as "boxes" alone ("box" is the one box of older clients)')
    if doc.get("box") is not None:
        return (review_box_of(doc["box"]),)
    raw = doc.get("boxes")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ValueError(f'"boxes" is a list of boxes, not {raw!r}')
    return tuple(review_box_of(b) for b in raw)


def check_boxes(boxes: Sequence[ReviewBox], call: str) -> None:
    """BoxRefused unless each box frames something on a crop (finite, from the crop's corner on, its far corner
    right of and below its near one), they are boxes of a defect (a false call's part was good), no more than
    MOST_BOXES and none twice."""
    if not boxes:
        return
    if call == "false_call":
        raise BoxRefused("a false call says the part was good: there is no defect to box (leave the boxes out)")
    if len(boxes) > MOST_BOXES:
        raise BoxRefused(f"{len(boxes)} boxes on one crop: at most {MOST_BOXES} (a part with more defects than that "
                         "is a scrap board, not one to teach a detector by)")
    for n, b in enumerate(boxes):
        x0, y0, x1, y1 = b.at
        which = f"box {list(b.at)}" if len(boxes) == 1 else f"box {n + 1} {list(b.at)}"
        if not all(math.isfinite(v) for v in b.at) or min(b.at) < 0 or max(b.at) > BOX_MAX:
            raise BoxRefused(f"{which} is not on a crop: each of x0, y0, x1, y1 is a pixel position from 0 to "
                             f"{BOX_MAX:g}")
        if x1 - x0 < BOX_LEAST or y1 - y0 < BOX_LEAST:
            raise BoxRefused(f"{which} frames nothing: x1 must exceed x0 and y1 exceed y0 by at least {BOX_LEAST:g} "
                             "px (the crop's top left corner is 0, 0)")
        if b.at in [o.at for o in boxes[:n]]:
            raise BoxRefused(f"{which} is drawn twice: one box a defect")


def first_columns(boxes: Sequence[ReviewBox]) -> tuple[float | None, float | None, float | None, float | None]:
    """reviews.box_* (0012): the first box, what a release before 0013 reads; none without boxes."""
    return boxes[0].at if boxes else (None, None, None, None)


def stored_text(boxes: Sequence[ReviewBox]) -> str | None:
    """reviews.boxes (0013): all of them as JSON; NULL without boxes."""
    return json.dumps(boxes_json(boxes)) if boxes else None


def read_stored(text: str | None, first: Box | None) -> tuple[ReviewBox, ...]:
    """A stored review's boxes: reviews.boxes where it was written and its first box is reviews.box_*'s, else the
    one box of reviews.box_* (a review stored before 0013, or reviewed again since by a release that writes only
    box_*: what that release stored is the review, and boxes left in reviews.boxes from before are not)."""
    if text and first is not None:
        boxes = tuple(review_box_of(b) for b in json.loads(text))
        if boxes and all(abs(a - b) <= 1e-6 for a, b in zip(boxes[0].at, first)):
            return boxes
    return (ReviewBox(first),) if first is not None else ()


def one_box_only(boxes: Sequence[ReviewBox]) -> bool:
    """What a database before 0013 can hold: at most one box, naming no class of its own."""
    return len(boxes) <= 1 and all(b.defect is None for b in boxes)
