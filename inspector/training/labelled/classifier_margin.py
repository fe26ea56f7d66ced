"""A retrained classifier's own margin: chosen again for its weights by teaching's rule, and scored cross-fitted.

Why: a fine-tune moves the whole scale of the log-odds of good, so the margin the served weights were chosen at
means another thing for the new ones. Until 2026-12-05 the new weights were shifted onto the served scale (one
shift, fitted at the false-call budget's point) and kept the served margin; at a margin far from that point (a
board's guarded margin, -7.84 on SnapperGPS) the shift moved by log-odds from one half of the held-out crops to the
other, and the held-out recall with it (docs/pages/results/boards.md). Now the new weights get the margin teaching
would have chosen for them (trainer.served_threshold: the budget on the held-out good crops, guarded by resampling
their identities), moved by whatever moved the type's margin off teaching's (a board tune, an escape rate), and the
version carries it as its operating point (experts/operating.py: activation serves it). It is scored cross-fitted:
the held-out identities (a part's crops go together) are shared out in two halves, a margin chosen on each, every
crop called at the one chosen on the other half: a margin scored on the crops it was chosen on flatters itself.
The served weights are scored the same way beside them (`old_calls`): their margin was chosen on the taught held-out
crops themselves, so called at it there they are scored in-sample (false calls at the budget by construction, recall
off either way) beside the new weights' out-of-sample figure, and the gate weighed unlike figures (SnapperGPS's
crystal, 2026-12-05: the served weights found 57.1% at their served margin and 70.1% cross-fitted, so new weights at
67.4% cross-fitted passed a gate they now fail; docs/pages/ml/labelled-images.md).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from .metrics import identity_halves
from .point_move import NONE, kept_says
from .trainer import Crops, served_threshold


@dataclass(frozen=True)
class NewMargin:
    margin: float  # served with the new weights: teaching's rule on all the held-out crops, plus `offset`
    offset: float  # how far the served margin sits from teaching's (a tune, an escape rate), kept
    flags: np.ndarray  # each held-out crop flagged by the new weights, cross-fitted where it could be
    half_margins: tuple[float, float] | None  # chosen on each half (offset included); None: not cross-fitted
    why: str  # said to the engineer


def crop_identities(crops: Crops) -> list[str]:
    """Each crop's identity, or where none is known a hash of its pixels (each crop then its own)."""
    if crops.identities is not None:
        return list(crops.identities)
    return [hashlib.sha256(np.ascontiguousarray(im).tobytes()).hexdigest() for im in crops.images]


def cross_fitted_calls(odds: np.ndarray, heldout: Crops, budget: float, seed: int,
                       offset: float = 0.0) -> tuple[np.ndarray, tuple[float, float]] | None:
    """Each held-out crop flagged at the margin teaching's rule chooses on the other half of the identities (plus
    `offset`), and the two margins; None where a half holds no good crop or no defect to choose on."""
    identities = crop_identities(heldout)
    defective = heldout.labels != 0
    half = np.array(identity_halves(identities, defective), dtype=np.int64)
    if any(not ((half == h) & defective).any() or not ((half == h) & ~defective).any() for h in (0, 1)):
        return None
    chosen = [served_threshold(odds[half == h], heldout.labels[half == h],
                               [n for n, k in zip(identities, half == h) if k], budget, seed) + offset for h in (0, 1)]
    return odds < np.where(half == 0, chosen[1], chosen[0]), (chosen[0], chosen[1])


def new_margin(odds: np.ndarray, heldout: Crops, served: float, taught: float | None, budget: float,
               seed: int) -> NewMargin:
    """The new weights' margin from their held-out log-odds of good (`odds`), and their cross-fitted calls.
    `served`: the margin the type is served at; `taught`: the one teaching chose (None: unknown, no offset)."""
    offset = 0.0 if taught is None else served - float(taught)
    margin = served_threshold(odds, heldout.labels, crop_identities(heldout), budget, seed) + offset
    defective = heldout.labels != 0
    moved = "; " + kept_says(offset, "the type's margin") if abs(offset) > NONE else ""
    rule = (f"margin {margin:.3f}, teaching's rule on {int((~defective).sum())} good and {int(defective.sum())} "
            f"defective held-out crops (false calls within {100 * budget:g}% for 95% of resamples of their parts)"
            + moved)
    fitted = cross_fitted_calls(odds, heldout, budget, seed, offset)
    if fitted is None:
        return NewMargin(margin, offset, odds < margin, None,
                         f"{rule}; scored on the crops it was chosen on (a half of them holds no good crop or no "
                         "defect: too few parts to choose on each half): optimistic")
    flags, chosen = fitted
    return NewMargin(margin, offset, flags, chosen,
                     f"{rule}; each held-out crop called at the margin chosen on the other half of the parts "
                     f"({chosen[0]:.3f}, {chosen[1]:.3f}): what the rule does on crops it was not chosen on")


def old_calls(odds: np.ndarray, heldout: Crops, served: float, fit: NewMargin, budget: float,
              seed: int) -> tuple[np.ndarray, str]:
    """The served weights' held-out calls from their log-odds of good (`odds`), scored as the new weights' were
    (`fit`): cross-fitted at teaching's rule on the other half plus the same offset where theirs were, else at the
    `served` margin (as the new were at theirs: both on the crops it was chosen on); and what was done, said."""
    fitted = None if fit.half_margins is None else cross_fitted_calls(odds, heldout, budget, seed, fit.offset)
    if fitted is None:
        return odds < served, f"old weights: served at margin {served:.3f}, scored there"
    flags, chosen = fitted
    return flags, (f"old weights: served at margin {served:.3f}, chosen on held-out crops among these (a figure there "
                   "is in-sample, unlike the new weights'), so scored as the new are: at the margins the rule chooses "
                   f"on the other half ({chosen[0]:.3f}, {chosen[1]:.3f})")
