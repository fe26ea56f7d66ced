"""The silkscreen the renderer prints: each part's outline, kept out of the other parts' windows.

A CAD tool and the board house clip silkscreen off other parts' lands, so a real board never prints one part's
outline along its neighbour's joints; drawn there, a close neighbour's line reads as a solder bridge in the window
of every 0805 beside another (coldfire's C211 and C214).
"""
from __future__ import annotations

import cv2
import numpy as np

from ..routing.rules import RuleSet, body_box

SILKSCREEN_BGR = (225, 230, 225)
SILK_MARGIN = 3  # px between a body and its silkscreen outline


def draw_silkscreen(image: np.ndarray, rules: RuleSet) -> None:
    """Each part's outline, SILK_MARGIN px around its body, left out of every other part's window (its body and
    the rule set's crop margin, and a pixel more for where registration cuts it)."""
    outlines, windows, near = _silk_layout(rules)
    for (x0, y0, x1, y1), others in zip(outlines, near):
        if not len(others):
            cv2.rectangle(image, (int(x0), int(y0)), (int(x1), int(y1)), SILKSCREEN_BGR, 1)
            continue
        line = np.zeros((y1 - y0 + 1, x1 - x0 + 1), np.uint8)
        cv2.rectangle(line, (0, 0), (int(x1 - x0), int(y1 - y0)), 255, 1)
        for wx0, wy0, wx1, wy1 in windows[others]:
            line[max(0, wy0 - y0):max(0, wy1 - y0 + 1), max(0, wx0 - x0):max(0, wx1 - x0 + 1)] = 0
        ys, xs = np.nonzero(line)
        ys, xs = ys + y0, xs + x0
        inside = (ys >= 0) & (ys < image.shape[0]) & (xs >= 0) & (xs < image.shape[1])
        image[ys[inside], xs[inside]] = SILKSCREEN_BGR


def clips_silkscreen(rules: RuleSet) -> bool:
    """Whether some part's outline crosses another part's window, so render version 2 (synthetic.RENDER_VERSION)
    draws the board otherwise than version 1 did (zoo keys name the render version only where it does: the demo
    zoo's stands)."""
    return any(len(others) for others in _silk_layout(rules)[2])


def _silk_layout(rules: RuleSet) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Every part's outline box and window (inclusive px boxes) and, per part, the other parts whose windows its
    outline crosses."""
    placed = list(rules.placements())
    if not placed:
        return np.zeros((0, 4), int), np.zeros((0, 4), int), []
    outlines = np.array([body_box(c, p, SILK_MARGIN) for c, p in placed])
    windows = np.array([body_box(c, p, rules.crop_margin + 1) for c, p in placed])
    near = []
    for i, (x0, y0, x1, y1) in enumerate(outlines):
        hit = np.flatnonzero((windows[:, 0] <= x1) & (windows[:, 2] >= x0) & (windows[:, 1] <= y1)
                             & (windows[:, 3] >= y0))
        near.append(hit[hit != i])
    return outlines, windows, near
