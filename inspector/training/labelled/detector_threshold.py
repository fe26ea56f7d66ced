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
from .detection import Found
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
    best = max(found, key=lambda f: f.score, default=None)
    return best.score if best is not None and best.kind == good else 0.0


def choose_detector_threshold(found: Sequence[Sequence[Found]], truth: Sequence[Sequence[Box]], mode: str,
                              false_call_budget: float, fallback: float) -> ChosenThreshold:
    """The threshold for boxes `found` on held-out images whose labelled boxes are `truth` (ignored ones aside).

    find: an image with no labelled box is clean, one with a scored box defective. verify (class 0 good): an image
    is good when it has scored boxes and all are good, defective when any is of another class or none is labelled.
    Without both kinds the `fallback` is kept."""
    if len(found) != len(truth):
        raise ValueError(f"{len(found)} images of boxes found for {len(truth)} labelled")
    scored = [[b for b in boxes if not b.ignore] for boxes in truth]
    if mode == "find":
        clean = np.array([not boxes for boxes in truth])  # an image of ignored boxes only is neither
        dirty = np.array([bool(s) for s in scored])
        best = np.array([max((f.score for f in fs), default=0.0) for fs in found])
        if not clean.any() or not dirty.any():
            return ChosenThreshold(fallback, False, f"no {'clean image' if not clean.any() else 'image with a defect'}"
                                   f" held out to choose the threshold by: {fallback:.3f} kept")
        t = -choose_threshold(-best[clean], -best[dirty], false_call_budget)  # flagged at or above it
        kinds = f"{int(clean.sum())} clean and {int(dirty.sum())} defective held-out images"
    else:
        good = np.array([bool(s) and all(b.kind == 0 for b in s) for s in scored])
        bad = np.array([not s and not boxes or any(b.kind != 0 for b in s) for s, boxes in zip(scored, truth)])
        if not good.any() or not bad.any():
            lacking = "of a good body" if not good.any() else "of a defect"
            return ChosenThreshold(fallback, False, f"no held-out image {lacking} to choose the threshold by: "
                                   f"{fallback:.3f} kept")
        confidence = np.array([verified(fs) for fs in found])
        t = choose_threshold(confidence[good], confidence[bad], false_call_budget)  # flagged below it
        kinds = f"{int(good.sum())} good and {int(bad.sum())} defective held-out images"
    threshold = float(np.clip(t, FLOOR, CEILING))
    return ChosenThreshold(threshold, True, f"{threshold:.3f}, chosen on {kinds} (at most "
                           f"{100 * false_call_budget:g}% of the ones without a defect flagged)")
