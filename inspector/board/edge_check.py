"""How well a board fitted on a photo agrees with where its CAD puts edges: the pads' rims, as the outline's turn is
chosen (outline.py's measure), computed from the photo's edges found once so that thousands of fits can be scored
(a constellation of marks, a tilt three marks leave open)."""
from __future__ import annotations

import math

import cv2
import numpy as np

from .geometry import PxRect
from .outline import edge_energy, edge_template


class EdgeCheck:
    """The agreement of a homography (photo px -> the rule set's `size` frame) with the CAD's edges, on the frame
    reduced to `side` px along its longer side (a wrong constellation is far off: a coarse frame tells it; a tilt
    moves a corner by a few pixels: the photo's own resolution does)."""

    def __init__(self, photo: np.ndarray, size: tuple[int, int], outline: PxRect, edges: list[PxRect],
                 side: int, energy: np.ndarray | None = None) -> None:
        """`energy`: the photo's edge_energy where a check on another frame has it already."""
        f = min(1.0, side / max(size))
        self.size = (max(1, round(size[0] * f)), max(1, round(size[1] * f)))
        template, inside = edge_template(self.size, tuple(v * f for v in outline),
                                         [tuple(v * f for v in e) for e in edges])
        on = inside > 0
        t = template[on]
        self.count = len(t)
        self.inside = on.astype(np.float32)
        self.t = np.zeros(template.shape, np.float32)  # standardised inside the outline, 0 outside: its sum with the
        self.t[on] = (t - t.mean()) / max(float(t.std()), 1e-6)  # photo's edges is their covariance, whatever
        #                                                          their mean
        self.to_small = np.diag([f, f, 1.0])
        self.energy = edge_energy(photo) if energy is None else energy

    def __call__(self, homography: np.ndarray) -> float:
        warped = cv2.warpPerspective(self.energy, self.to_small @ homography, self.size, flags=cv2.INTER_AREA)
        e = cv2.GaussianBlur(warped, (0, 0), 2)
        inside = cv2.multiply(e, self.inside)
        mean = float(np.vdot(e, self.inside)) / self.count
        spread = math.sqrt(max(0.0, float(np.vdot(e, inside)) / self.count - mean * mean))
        return float(np.vdot(e, self.t)) / (spread * self.count) if spread > 1e-6 else 0.0
