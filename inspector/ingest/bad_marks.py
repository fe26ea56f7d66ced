"""A panel's bad marks: which of its boards the board maker marked as x-outs on their bad-mark pads.

Each pad's window (routing/panel.BadMarks: its size, at the pad's centre carried through the board's registration
where it has one) is read as its mean luminance. A pad reads marked when a dark mark took more than `contrast` of
a clean pad's luminance away (or a light mark filled more than `contrast` of the headroom above it). The clean pad
is the golden board's, where the rule set has one; otherwise the panel's own pads are the reference: the lightest
of them for dark marks, the darkest for light ones. So without a golden board a panel needs one clean board to read
the others against (a panel of x-outs only is never built), and a panel of one board reads its mark only with one.
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from ..routing.panel import BadMarks


def pad_levels(image: np.ndarray, marks: BadMarks, to_image: np.ndarray | None = None) -> dict[int, float]:
    """Each pad's mean luminance (0..255) in `image`; `to_image` maps recipe px to image px (a 3x3 homography)."""
    grey = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY) if image.ndim == 3 else image
    half_w, half_h = marks.size[0] // 2, marks.size[1] // 2
    out = {}
    for k, (x, y) in marks.at.items():
        if to_image is not None:
            u, v, w = to_image @ np.array([x, y, 1.0])
            x, y = u / w, v / w
        cx, cy = int(round(x)), int(round(y))
        window = grey[max(0, cy - half_h):cy + half_h + 1, max(0, cx - half_w):cx + half_w + 1]
        out[k] = float(window.mean()) if window.size else float("nan")
    return out


@dataclass(frozen=True)
class PadReading:
    """One board's pad as read: its level, the clean pad's it was read against, the share the mark took."""

    board: int
    level: float  # mean luminance, 0..255 (nan: the pad lies off the image)
    clean: float
    taken: float  # a dark mark: the share of the clean pad's light gone; a light one: of its headroom filled
    marked: bool


def read_pads(image: np.ndarray, marks: BadMarks, to_image: np.ndarray | None = None,
              golden: np.ndarray | None = None) -> list[PadReading]:
    """Every pad of the panel as read, in board order (see the module's note for the clean pad's level)."""
    levels = pad_levels(image, marks, to_image)
    seen = [v for v in levels.values() if v == v]
    if not seen:
        return []
    if golden is not None:
        clean = pad_levels(golden, marks)
    else:
        one = max(seen) if marks.mark == "dark" else min(seen)
        clean = {k: one for k in levels}
    out = []
    for k, level in sorted(levels.items()):
        ref = clean[k]
        if level != level or ref != ref:  # a pad off the image: nothing read, the board inspected
            out.append(PadReading(k, level, ref, float("nan"), False))
            continue
        taken = (ref - level) / max(ref, 1.0) if marks.mark == "dark" else (level - ref) / max(255.0 - ref, 1.0)
        out.append(PadReading(k, level, ref, taken, taken > marks.contrast))
    return out


def marked_boards(image: np.ndarray, marks: BadMarks, to_image: np.ndarray | None = None,
                  golden: np.ndarray | None = None) -> list[int]:
    """The boards whose pad reads marked, in order."""
    return [r.board for r in read_pads(image, marks, to_image, golden) if r.marked]
