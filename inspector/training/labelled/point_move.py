"""A move the plant made off teaching's operating point, and what a retraining does with it.

A taught expert is served at the point teaching's rule chose, unless the plant moved it (`board tune`, an escape
rate, `zoo operate`): to call fewer false calls on its line, or to catch a defect it let through. A retraining
chooses the new weights' point again by teaching's rule (a fine-tune moves the scale of the scores) and by default
keeps the plant's move on top of it, since the reason for it (the line's light, the plant's escape rate) is still
there. Where the move made up for what the reviews have now taught (the false calls it hid are trained on), the
kept move over-corrects; `zoo train --taught-point` leaves it behind, and the version records the move it left.
Either way the retraining also scores the same new weights the other way round (`other_way`: the margin, the held-out
recall and false calls, the gate), so the engineer chooses on figures rather than retraining to see them.
"""
from __future__ import annotations

LEAVE = "zoo train --taught-point"
NONE = 1e-9  # a move smaller than this is none


def kept_says(offset: float, what: str) -> str:
    """Said where a move is kept: how far, and how to leave it behind."""
    return (f"{what} sits {offset:+.3f} from teaching's (a move the plant made: a tune, an escape rate) and the new "
            f"one keeps that ({LEAVE} leaves it behind, where these reviews taught what it made up for)")


def left_says(offset: float, what: str) -> str:
    """Said where a move is left behind (`--taught-point`)."""
    return (f"{what} sits {offset:+.3f} from teaching's (a move the plant made); left behind ({LEAVE}): the new "
            "weights serve at teaching's rule alone")


def other_way_says(kept: bool, point: float, passed: bool, sets: str, what: str = "margin") -> str:
    """The same new weights scored the other way round: keeping the plant's move (`kept`) or leaving it behind, at
    `point` (the `what`: a classifier's margin, a detector's threshold); `sets`: their held-out figures, said."""
    way = "keeping the plant's move (zoo train --no-taught-point)" if kept else \
        f"leaving the plant's move behind ({LEAVE})"
    return (f"the other way, {way}: {what} {point:.3f}; {sets}; recall gate {'passed' if passed else 'REFUSED'} "
            f"(the same weights: retrain with --{'no-' if kept else ''}taught-point to serve them so)")
