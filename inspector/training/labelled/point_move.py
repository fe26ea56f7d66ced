"""A move the plant made off teaching's operating point, and what a retraining does with it.

A taught expert is served at the point teaching's rule chose, unless the plant moved it (`board tune`, an escape
rate, `zoo operate`): to call fewer false calls on its line, or to catch a defect it let through. A retraining
chooses the new weights' point again by teaching's rule (a fine-tune moves the scale of the scores) and by default
keeps the plant's move on top of it, since the reason for it (the line's light, the plant's escape rate) is still
there. Where the move made up for what the reviews have now taught (the false calls it hid are trained on), the
kept move over-corrects; `zoo train --taught-point` leaves it behind, and the version records the move it left.
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
