"""The tilt three points cannot give, taken from the CAD's pad rims.

Three marks (or three picked points) fit an affine map, which a camera not square to the board bends: on a
hand-held photo the corner furthest from them lands a millimetre off, and windows cut there miss their parts. Every
homography that keeps the three points where they are is the affine map times one that scales the points'
homogeneous coordinates by 1, a and b (in the frame the three points span), so the tilt is two numbers. They are
chosen where the photo's edges agree best with where the CAD puts the pads' rims (edge_check.py), at the photo's own
resolution, over a coarse grid and then finer about its best. A best at the grid's edge is not taken: a tilt that
large is a wrong fit, not a camera.
"""
from __future__ import annotations

import math
from dataclasses import replace

import cv2
import numpy as np

from .edge_check import EdgeCheck
from .geometry import PxRect
from .register import Registration, corner_move

TILT_RANGE = 0.15  # ln a and ln b searched within +-this: a camera 1.16 times as far from one mark as another (a board
#                    spanning half the distance to the lens, tilted 19 degrees; a fifth of it, 53 degrees)
TILT_STEP = 0.025  # of the coarse grid, in ln a and ln b
FINE_ROUNDS = 2  # each a 7 x 7 grid about the best so far, at a third of the step before
MOST_SIDE = 1000  # px: the checked frame's longer side at most (the photo's resolution of the board, where less)


def through(affine: np.ndarray, points: np.ndarray, a: float, b: float) -> np.ndarray:
    """The homography that maps the three photo `points` (3 x 2) where `affine` does, with tilt (a, b)."""
    m = np.vstack([points.T, np.ones(3)])
    h = affine @ m @ np.diag([1.0, a, b]) @ np.linalg.inv(m)
    return h / h[2, 2]


def untilted(photo: np.ndarray, registration: Registration, targets: list[tuple[float, float]],
             size: tuple[int, int], outline: PxRect, edges: list[PxRect],
             energy: np.ndarray | None = None) -> tuple[Registration, str]:
    """`registration`, an affine map fitted on three points (`targets`: where they lie in the rule set's `size`
    frame), made the homography through the same points that agrees best with the CAD's edges (`edges`, as
    outline.py takes them); and what was done, for the registration's note. Kept as it is where no tilt agrees
    better or the best lies at the search's edge. `energy`: the photo's edge energy, where a caller has it."""
    affine = registration.homography
    inverse = np.linalg.inv(affine)
    points = cv2.perspectiveTransform(np.float64(targets).reshape(-1, 1, 2), inverse).reshape(-1, 2)
    side = min(MOST_SIDE, max(1, round(registration.photo_scale(size) * max(size))))
    check = EdgeCheck(photo, size, outline, edges, side, energy)
    flat = check(affine)
    best = (flat, 0.0, 0.0)
    steps = int(round(TILT_RANGE / TILT_STEP))
    coarse = [TILT_STEP * i for i in range(-steps, steps + 1)]
    for u in coarse:
        for v in coarse:
            best = max(best, (check(through(affine, points, math.exp(u), math.exp(v))), u, v))
    if max(abs(best[1]), abs(best[2])) >= TILT_RANGE - TILT_STEP / 2:
        return registration, (f"three points fit an affine map; the tilt that agrees best with the CAD's edges lies "
                              f"at the edge of what is searched (a {math.exp(best[1]):.2f}, b {math.exp(best[2]):.2f})"
                              ": not taken (a fourth mark or more picked points undo a tilt)")
    step = TILT_STEP
    for _ in range(FINE_ROUNDS):
        step /= 3
        u0, v0 = best[1], best[2]
        for du in range(-3, 4):
            for dv in range(-3, 4):
                u, v = u0 + du * step, v0 + dv * step
                best = max(best, (check(through(affine, points, math.exp(u), math.exp(v))), u, v))
    if best[1] == 0.0 and best[2] == 0.0:
        return registration, f"three points fit an affine map; no tilt agrees better with the CAD's edges ({flat:.2f})"
    h = through(affine, points, math.exp(best[1]), math.exp(best[2]))
    moved = corner_move(h @ inverse, size)  # the rule set's frame through the affine map's photo and back
    said = (f"three points fit an affine map; the camera's tilt taken from the CAD's edges (they agree {flat:.2f} "
            f"-> {best[0]:.2f}; a corner moved {moved:.1f} px)")
    return replace(registration, homography=h), said
