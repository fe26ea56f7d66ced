"""Registration: the transform from a board's recipe to the image a camera took of it, fitted on fiducials.

Every AOI machine registers a board before it inspects it: a conveyor places
boards a few pixels and a fraction of a degree off, and crops cut at nominal
positions would then show every part displaced. Each fiducial is looked for
within its search radius by normalised cross-correlation (indifferent to gain
and contrast) and refined to a fraction of a pixel by a background-subtracted
centroid. A similarity or affine transform is fitted by least squares; when the
marks disagree beyond the recipe's tolerance and one mark more than the
transform needs was found, the one whose omission fits best is left out. A mark
not found, or marks that do not agree, fail the board with the reason: it is
not inspected part by part.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import cv2
import numpy as np

from ..routing.fiducials import Fiducial, FiducialRules

MIN_SCORE = 0.55  # normalised correlation of a mark with its template below which it counts as not found


class RegistrationFailed(ValueError):
    """The board cannot be registered; `str()` is the board-level reason stored with it."""


@dataclass(frozen=True)
class Registration:
    matrix: tuple[float, float, float, float, float, float]  # 2x3 row-major, recipe px -> image px
    residual_px: float  # largest distance between a mark used and where the fitted transform puts it
    found: dict[str, tuple[float, float]] = field(default_factory=dict)  # image px of every mark found
    left_out: tuple[str, ...] = ()  # marks found but disagreeing with the others, not used in the fit

    @property
    def array(self) -> np.ndarray:
        return np.array(self.matrix, np.float64).reshape(2, 3)

    @property
    def shift(self) -> tuple[float, float]:
        return self.matrix[2], self.matrix[5]

    @property
    def rotation_deg(self) -> float:
        return math.degrees(math.atan2(self.matrix[3], self.matrix[0]))

    @property
    def scale(self) -> float:
        return math.sqrt(abs(self.matrix[0] * self.matrix[4] - self.matrix[1] * self.matrix[3]))


def register(image: np.ndarray, rules: FiducialRules) -> Registration:
    """Find every mark of `rules` in `image` (BGR or grey) and fit the transform; raises RegistrationFailed."""
    gray = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    found: dict[str, tuple[float, float]] = {}
    for mark in rules.marks:
        where = find_mark(gray, mark)
        if isinstance(where, str):
            raise RegistrationFailed(f"registration failed: fiducial {mark.name} not found ({where}); check that "
                                     f"the mark is clean and uncovered and the board lies within {mark.search_px:g} px "
                                     f"of its place")
        found[mark.name] = where
    return fit_marks(rules, found)


def fit_marks(rules: FiducialRules, found: dict[str, tuple[float, float]]) -> Registration:
    """The transform from the marks' nominal places to where they were found, leaving out at most one bad mark."""
    nominal = {m.name: (float(m.x), float(m.y)) for m in rules.marks}
    names = list(found)
    matrix, residual, worst = _fit(names, nominal, found, rules.transform)
    if residual <= rules.max_residual_px:
        return Registration(_flat(matrix), residual, dict(found))
    if len(names) - 1 > rules.minimum:  # a fit without one mark can still be checked against the others
        best = min(((_fit([n for n in names if n != drop], nominal, found, rules.transform), drop) for drop in names),
                   key=lambda t: t[0][1])
        (m2, r2, _), dropped = best
        if r2 <= rules.max_residual_px:
            return Registration(_flat(m2), r2, dict(found), (dropped,))
    raise RegistrationFailed(f"registration failed: the fiducials disagree by {residual:.2f} px (most: {worst}), "
                             f"over the recipe's max_residual_px {rules.max_residual_px:g}; check the marks for "
                             f"dirt or damage, or the board for warp")


def _fit(names: list[str], nominal: dict[str, tuple[float, float]], found: dict[str, tuple[float, float]],
         kind: str) -> tuple[np.ndarray, float, str]:
    src = np.array([nominal[n] for n in names], np.float64)
    dst = np.array([found[n] for n in names], np.float64)
    matrix = fit_transform(src, dst, kind)
    pred = src @ matrix[:, :2].T + matrix[:, 2]
    err = np.hypot(*(pred - dst).T)
    i = int(np.argmax(err))
    return matrix, float(err[i]), names[i]


def fit_transform(src: np.ndarray, dst: np.ndarray, kind: str) -> np.ndarray:
    """Least-squares 2x3 matrix with dst ~ M @ [src, 1]: a similarity (a, b, tx, ty) or a full affine."""
    n = len(src)
    if kind == "similarity":
        a = np.zeros((2 * n, 4))
        a[0::2] = np.column_stack([src[:, 0], -src[:, 1], np.ones(n), np.zeros(n)])
        a[1::2] = np.column_stack([src[:, 1], src[:, 0], np.zeros(n), np.ones(n)])
        (p, q, tx, ty), *_ = np.linalg.lstsq(a, dst.reshape(-1), rcond=None)
        return np.array([[p, -q, tx], [q, p, ty]])
    if kind == "affine":
        a = np.column_stack([src, np.ones(n)])
        sol, *_ = np.linalg.lstsq(a, dst, rcond=None)
        return sol.T.copy()
    raise ValueError(f"unknown transform {kind!r}; use similarity or affine")


def _flat(matrix: np.ndarray) -> tuple[float, float, float, float, float, float]:
    return tuple(float(v) for v in matrix.reshape(-1))  # type: ignore[return-value]


def find_mark(gray: np.ndarray, mark: Fiducial) -> tuple[float, float] | str:
    """The mark's centre in image px, or why it was not found."""
    template = _template(mark.shape, mark.size, mark.reach)
    half = template.shape[0] // 2
    r = int(math.ceil(mark.search_px))
    x0, y0 = max(0, mark.x - r - half), max(0, mark.y - r - half)
    x1, y1 = min(gray.shape[1], mark.x + r + half + 1), min(gray.shape[0], mark.y + r + half + 1)
    if x1 - x0 < template.shape[1] or y1 - y0 < template.shape[0]:
        return "its search window lies outside the image"
    window = gray[y0:y1, x0:x1].astype(np.float32)
    scores = cv2.matchTemplate(window, template, cv2.TM_CCOEFF_NORMED)
    _, score, _, (px, py) = cv2.minMaxLoc(scores)
    if not np.isfinite(score) or score < MIN_SCORE:
        return f"best match {max(score, 0.0):.2f} of {MIN_SCORE} needed"
    return _centroid(gray, x0 + px + half, y0 + py + half, mark)


def _centroid(gray: np.ndarray, x: int, y: int, mark: Fiducial) -> tuple[float, float] | str:
    """Sub-pixel centre: the mark's brightness above its bare ring's, weighted by position (twice, re-centred)."""
    inner, outer = mark.size / 2 + 1.5, mark.reach
    r = int(math.ceil(outer))
    cx, cy = float(x), float(y)
    for _ in range(3):
        ix, iy = int(round(cx)), int(round(cy))
        if ix - r < 0 or iy - r < 0 or ix + r >= gray.shape[1] or iy + r >= gray.shape[0]:
            return "it lies at the edge of the image"
        patch = gray[iy - r:iy + r + 1, ix - r:ix + r + 1].astype(np.float64)
        dy, dx = np.mgrid[-r:r + 1, -r:r + 1]
        dist = np.hypot(dx + ix - cx, dy + iy - cy)
        ring = patch[(dist > inner) & (dist <= outer)]
        disc = dist <= inner
        w = patch[disc] - np.median(ring)
        mass = w.sum()
        if mass <= 0:
            return "it is not brighter than the board around it"
        cx, cy = ix + float((w * dx[disc]).sum() / mass), iy + float((w * dy[disc]).sum() / mass)
    return cx, cy


@lru_cache(maxsize=32)
def _template(shape: str, size: int, reach: float) -> np.ndarray:
    """A bright mark on its bare ring, softened a little like any lens, as float32."""
    side = 2 * int(math.ceil(reach)) + 1
    t = np.zeros((side, side), np.float32)
    c = side // 2
    if shape == "circle":
        cv2.circle(t, (c, c), size // 2, 1.0, -1)
    else:
        half = (size - 1) / 2
        cv2.rectangle(t, (int(c - half), int(c - half)), (int(c + half), int(c + half)), 1.0, -1)
    return cv2.GaussianBlur(t, (0, 0), 0.7)
