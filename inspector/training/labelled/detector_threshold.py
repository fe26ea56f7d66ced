"""A taught detector's operating threshold, chosen on held-out images the way the line calls them.

A detector that finds flags an image when its best box reaches the threshold; one that verifies (its good class)
flags it unless its best box is of the good class and reaches it. Either way the threshold goes where at most the
false-call budget of the images without a defect is flagged and as many with one as that allows
(metrics.choose_threshold, on the confidence that decides the call). Teaching chooses it for new weights and
retraining again for the retrained ones, whose box scores sit on their own scale, so each version is served at its
own (experts/operating.py).

A threshold scored on the images it was chosen on flatters itself: it sits just past the highest clean image it
saw. `cross_fit` splits the held-out images in two halves (by identity, a board's images together; identities with
a defect and those without each shared out evenly, by a hash of the name, so the same images always fall the same
way) and chooses a threshold on each; every image scored at the one chosen on the other half is an honest estimate
of what the rule does on images it has not met.

A threshold an operator moved off teaching's (`zoo operate`, the versions tab) is a choice of the plant's that a
retraining must not drop: the new weights' scores sit on their own scale, so the move is carried where a box
confidence lives, in log-odds (a YOLO confidence is the sigmoid of its logit), as a taught classifier's margin
carries its own (classifier_margin.py).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .boxes import Box
from .detection import Found, defective, good_body, ignored_only, score
from .metrics import choose_threshold, identity_halves

FLOOR, CEILING = 1e-4, 1.0  # a box confidence
EDGE = 1e-6  # a confidence this near 0 or 1 has its log-odds taken there (those of 0 and 1 are infinite)
FALSE_CALL_BUDGET = 0.01  # of the held-out images without a defect, unless teaching was given another


@dataclass(frozen=True)
class ChosenThreshold:
    threshold: float
    chosen: bool  # False: `fallback` kept (said in `why`)
    why: str


@dataclass(frozen=True)
class CrossFit:
    halves: tuple[int, ...]  # each image's half, 0 or 1
    chosen: tuple[float, float]  # the threshold chosen on half 0, on half 1: each half is scored at the other's


def logodds(confidence: float) -> float:
    p = min(max(confidence, EDGE), 1.0 - EDGE)
    return math.log(p / (1.0 - p))


def offset_of(served: float, taught: float | None) -> float:
    """How far (log-odds) the served threshold sits from the one teaching chose: a move the plant made (0 unknown)."""
    return 0.0 if taught is None else logodds(served) - logodds(taught)


def moved(threshold: float, offset: float) -> float:
    """`threshold` moved `offset` in log-odds, held within FLOOR..CEILING."""
    if offset == 0.0:
        return threshold
    return float(min(max(1.0 / (1.0 + math.exp(-(logodds(threshold) + offset))), FLOOR), CEILING))


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


def cross_fit(found: Sequence[Sequence[Found]], truth: Sequence[Sequence[Box]], mode: str, false_call_budget: float,
              identities: Sequence[str], offset: float = 0.0) -> CrossFit | str:
    """Two-fold cross-fitting of the threshold over the held-out images (module docstring), shared out by each
    one's identity (a board's images together: near-copies on both sides would let one half's threshold see the
    other's), identities with a defect and those without each evenly, by a hash of the name (the set may move
    without the halves changing); each half's threshold moved by `offset` (log-odds, a move the plant made); why
    not, where a half would lack a kind of image to choose by."""
    good = None if mode == "find" else 0
    kinds = [2 if ignored_only(b) else int(defective(b, good)) for b in truth]
    clean, bad = kinds.count(0), kinds.count(1)
    shared = identity_halves(identities, [k == 1 for k in kinds])
    if any(not any(k == kind and h == half for k, h in zip(kinds, shared)) for kind in (0, 1) for half in (0, 1)):
        return (f"{clean} {'clean' if good is None else 'good'} and {bad} defective held-out images of "
                f"{len(set(identities))} identities: too few to score each at a threshold chosen without it")
    chosen = []
    for half in (0, 1):
        at = [i for i in range(len(truth)) if shared[i] == half]
        chosen.append(moved(choose_detector_threshold([found[i] for i in at], [truth[i] for i in at], mode,
                                                      false_call_budget, 0.0).threshold, offset))
    return CrossFit(tuple(shared), (chosen[0], chosen[1]))


def cross_fitted(classes: tuple[str, ...], truth: Sequence[tuple[Box, ...]], found: Sequence[list[Found]],
                 fit: CrossFit, first: int = 0, good: int | None = None) -> tuple[int, int, int, int]:
    """The line's image counts of these images, each at the threshold `fit` chose on the other half: (with defects
    flagged, with defects, clean flagged, clean). `first`: where these images start among those `fit` shared out."""
    out = [0, 0, 0, 0]
    for half in (0, 1):
        at = [i for i in range(len(truth)) if fit.halves[first + i] == half]
        s = score(classes, [truth[i] for i in at], [found[i] for i in at], fit.chosen[1 - half], good=good)
        for k, v in enumerate((s.flagged_with_defects, s.with_defects, s.flagged_clean, s.clean)):
            out[k] += v
    return out[0], out[1], out[2], out[3]
