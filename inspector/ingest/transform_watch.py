"""Whether the line's boards say that the rule set's registration transform is the wrong model of its camera.

One board's marks cannot tell a tilted camera from a dirty mark: four marks fit any homography, and one mark off by
d bends them d/4 from an affine. Many boards can: a tilt asks the same perspective of every board, dirt asks a
different one of each, and a camera does not tilt board by board. The watch keeps the last boards whose marks were
all found, refused or not (a tilt that stays under max_residual_px still lets boards through with false alarms),
and says once, when most of them are fitted by a richer transform asking the same of each, which transform and the
command that fixes it, in the log; the line keeps its sentence for /health and the dashboard. A whole window of boards
that later asks for nothing of the kind (the camera squared again) withdraws it, and the log says so.
"""
from __future__ import annotations

import logging
import math
import threading
from collections import deque
from dataclasses import dataclass
from statistics import median

from ..routing.fiducials import FiducialRules
from .registration import BetterFit, richer_fits

log = logging.getLogger(__name__)

WINDOW = 12  # boards remembered
MIN_BOARDS = 6  # boards with every mark found before anything is said
MOST = 0.6  # share of them a richer transform must fit
SAME = 0.25  # each board's ask within this share of the boards' median ask: the same tilt board after board (dirt
# asks a different amount, often the other way, of each board)


@dataclass(frozen=True)
class TransformHint:
    transform: str
    boards: int  # boards a richer transform fitted, of
    seen: int  # the boards remembered
    given_px: float  # the median residual the rule set's transform leaves on them
    refused: int  # of them, refused

    def sentence(self) -> str:
        article = "an" if self.transform == "affine" else "a"
        return (f"the camera looks tilted (not square to the board): {self.boards} of the last {self.seen} boards' "
                f"fiducials fit {article} {self.transform} asking the same of each, where the rule set's transform "
                f"leaves {self.given_px:.2f} px ({self.refused} refused); set `transform: {self.transform}` under the "
                f"rule set's fiducials, or calibrate the camera: inspector camera calibrate --plane")


class TransformWatch:
    """Fed every board whose marks were all found; `hint` once the boards agree, until the rule set changes or a
    whole window of boards asks for no richer transform. Says both in the log."""

    def __init__(self) -> None:
        # each board's fits by every richer transform (fitted once, when it comes), and whether it was refused
        self._seen: deque[tuple[dict[str, BetterFit | None], bool]] = deque(maxlen=WINDOW)
        self.rules: FiducialRules | None = None  # the fiducials the boards seen were registered on
        self._lock = threading.Lock()
        self.hint: TransformHint | None = None

    def see(self, rules: FiducialRules, found: dict[str, tuple[float, float]], refused: bool) -> TransformHint | None:
        """One board's marks; returns the hint when this board is the one that makes it (said once)."""
        if len(found) < len(rules.marks):
            return None
        fits = richer_fits(rules, found)
        with self._lock:
            if rules is not self.rules:  # another rule set (or the same edited): what was seen no longer applies
                self.rules, self.hint = rules, None
                self._seen.clear()
            self._seen.append((fits, refused))
            if len(self._seen) < MIN_BOARDS:
                return None
            if self.hint is not None:  # said; withdrawn once a whole window of boards no longer asks for it at all
                kind = self.hint.transform
                if len(self._seen) == WINDOW and not any(f[kind] for f, _ in self._seen):
                    self.hint = None  # the camera was squared (or calibrated into the frames)
                    log.info("registration: the last %d boards' fiducials no longer say the camera is tilted", WINDOW)
                return None
            for kind in fits:  # the simplest that the boards agree on
                self.hint = _judge(kind, [(f[kind], r) for f, r in self._seen])
                if self.hint is not None:
                    log.warning("registration: %s", self.hint.sentence())
                    return self.hint
            return None


def _judge(kind: str, seen: list[tuple[BetterFit | None, bool]]) -> TransformHint | None:
    fits = [(f, refused) for f, refused in seen if f is not None]
    if len(fits) < MOST * len(seen):
        return None
    centre = (median(f.shape[0] for f, _ in fits), median(f.shape[1] for f, _ in fits))
    norm = math.hypot(*centre)
    if norm == 0:
        return None
    agree = sum(1 for f, _ in fits if math.dist(f.shape, centre) <= SAME * norm)
    if agree < MOST * len(seen):
        return None
    given = median(f.given_px for f, _ in fits)
    return TransformHint(kind, len(fits), len(seen), given, sum(1 for _, r in fits if r))

