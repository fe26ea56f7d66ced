"""A taught detector's operating threshold, chosen on held-out images the way the line calls them.

A detector that finds flags an image when its best box reaches the threshold; one that verifies (its good class)
flags it unless its best box is of the good class and reaches it. Either way the threshold goes where at most the
false-call budget of the images without a defect is flagged and as many with one as that allows
(metrics.choose_threshold, on the confidence that decides the call). Teaching chooses it for new weights and
retraining again for the retrained ones, whose box scores sit on their own scale, so each version is served at its
own (experts/operating.py).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .boxes import Box
from .detection import Found, defective, good_body, ignored_only
from .metrics import choose_threshold

FLOOR, CEILING = 1e-4, 1.0  # a box confidence
FALSE_CALL_BUDGET = 0.01  # of the held-out images without a defect, unless teaching was given another


@dataclass(frozen=True)
class ChosenThreshold:
    threshold: float
    chosen: bool  # False: `fallback` kept (said in `why`)
    why: str


def verified(found: Sequence[Found], good: int = 0) -> float:
    """A verifier's confidence that the image shows a good body: its best box's score when that box is of the good
    class, else 0 (no body, or a body of another class)."""
    body = good_body(found, good)
    return body.score if body is not None else 0.0


def choose_detector_threshold(found: Sequence[Sequence[Found]], truth: Sequence[Sequence[Box]], mode: str,
                              false_call_budget: float, fallback: float) -> ChosenThreshold:
    """The threshold for boxes `found` on held-out images whose labelled boxes are `truth`, each image counted as
    detection.score counts it (ignored-only images in neither kind). Without both kinds the `fallback` is kept."""
    if len(found) != len(truth):
        raise ValueError(f"{len(found)} images of boxes found for {len(truth)} labelled")
    good = None if mode == "find" else 0
    kept = [i for i, boxes in enumerate(truth) if not ignored_only(boxes)]
    bad = np.array([defective(truth[i], good) for i in kept], dtype=bool)
    if good is None:  # flagged at or above it: the best box's score
        confidence = np.array([max((f.score for f in found[i]), default=0.0) for i in kept])
        lacking, kinds = ("clean image", "image with a defect"), ("clean", "defective")
    else:  # flagged below it: the good body's confidence
        confidence = np.array([verified(found[i], good) for i in kept])
        lacking, kinds = ("held-out image of a good body", "held-out image of a defect"), ("good", "defective")
    if (~bad).sum() == 0 or bad.sum() == 0:
        missing = lacking[0] if (~bad).sum() == 0 else lacking[1]
        held = " held out" if good is None else ""
        return ChosenThreshold(fallback, False, f"no {missing}{held} to choose the threshold by: {fallback:.3f} kept")
    sign = -1.0 if good is None else 1.0
    t = sign * choose_threshold(sign * confidence[~bad], sign * confidence[bad], false_call_budget)
    threshold = float(np.clip(t, FLOOR, CEILING))
    return ChosenThreshold(threshold, True, f"{threshold:.3f}, chosen on {int((~bad).sum())} {kinds[0]} and "
                           f"{int(bad.sum())} {kinds[1]} held-out images (at most {100 * false_call_budget:g}% of "
                           "the ones without a defect flagged)")
