"""Registration: the transform from a board's recipe to the image a camera took of it, fitted on fiducials.

Every AOI machine registers a board before it inspects it: a conveyor places
boards a few pixels and a fraction of a degree off, and crops cut at nominal
positions would then show every part displaced. Each fiducial is looked for
within its search radius by normalised cross-correlation (indifferent to gain
and contrast) and refined to a fraction of a pixel by a background-subtracted
centroid. A similarity, affine or homography (a tilted camera) is fitted by
least squares; when the marks disagree beyond the recipe's tolerance and one
mark more than the transform needs was found, the one whose omission fits best
is left out. A homography fits any four marks exactly, so with only four its
perspective is checked instead: how far it bends the marks away from the best
affine fit, which a real tilt keeps to a few pixels and a wrong mark does not.
A mark not found within its search radius sends the whole board through a
coarse search first (every mark's candidates over a wide window at half
resolution, the shift most marks agree on), so a board placed further off is
still found. A mark not found, or marks that do not agree, fail the board with
the reason naming the mark: it is not inspected part by part.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from functools import lru_cache

import cv2
import numpy as np

from ..routing.fiducials import TRANSFORMS, Fiducial, FiducialRules

MIN_SCORE = 0.55  # normalised correlation of a mark with its template below which it counts as not found


class RegistrationFailed(ValueError):
    """The board cannot be registered; `str()` is the board-level reason stored with it. `found`: the marks found
    (image px), for whoever watches many boards' marks (inspector/ingest/transform_watch.py)."""

    def __init__(self, message: str, found: dict[str, tuple[float, float]] | None = None) -> None:
        super().__init__(message)
        self.found = dict(found or {})


RICHER = {"similarity": ("affine", "homography"), "affine": ("homography",), "homography": ()}


@dataclass(frozen=True)
class BetterFit:
    """A transform richer than the rule set's that fits one board's marks within the rule set's tolerances."""

    transform: str
    residual_px: float  # what it leaves; four marks fit any homography exactly: then the bend it needs instead
    given_px: float  # what the rule set's transform leaves
    exact: bool  # as many marks as it needs: it fits any marks, so one board cannot tell it from a bad mark
    shape: tuple[float, float]  # what it adds, in px at the marks' span: a homography's perspective (x, y), an
    # affine's stretch and shear; a tilted camera asks the same of every board, a dirty mark a different one

    def words(self) -> str:
        left = (f"needing {self.residual_px:.1f} px of perspective" if self.exact and self.transform == "homography"
                else f"within {self.residual_px:.2f} px")
        return f"the marks fit {'an' if self.transform == 'affine' else 'a'} {self.transform} {left}"


@dataclass(frozen=True)
class Registration:
    matrix: tuple[float, ...]  # recipe px -> image px, row-major: 2x3 (similarity, affine) or 3x3 (homography)
    residual_px: float  # largest distance between a mark used and where the fitted transform puts it
    found: dict[str, tuple[float, float]] = field(default_factory=dict)  # image px of every mark found
    left_out: tuple[str, ...] = ()  # marks found but disagreeing with the others, not used in the fit
    coarse_shift: tuple[float, float] | None = None  # the coarse search's shift, when the board lay beyond search_px

    @property
    def homography(self) -> np.ndarray:
        """The transform as a 3x3 matrix, whichever kind was fitted."""
        return as_homography(self.matrix)

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
    found, missing = _find_all(gray, rules.marks)
    shift = None
    if missing:
        shift = coarse_shift(gray, rules)
        if shift is not None:
            moved = tuple(dataclasses.replace(m, x=int(round(m.x + shift[0])), y=int(round(m.y + shift[1])))
                          for m in rules.marks)
            found, missing = _find_all(gray, moved)
    if missing:
        name, where = missing
        mark = next(m for m in rules.marks if m.name == name)
        beyond = (f"the board lies within {mark.search_px:g} px of its place (a coarse search over "
                  f"{coarse_reach(rules):.0f} px found no position most marks agree on)" if shift is None else
                  f"the board, found {math.hypot(*shift):.0f} px off its place, is whole in the image")
        raise RegistrationFailed(f"registration failed: fiducial {name} not found ({where}); check that the mark is "
                                 f"clean and uncovered and {beyond}")
    reg = fit_marks(rules, found)
    return dataclasses.replace(reg, coarse_shift=shift) if shift is not None else reg


def _find_all(gray: np.ndarray, marks: tuple[Fiducial, ...]) -> tuple[dict[str, tuple[float, float]],
                                                                      tuple[str, str] | None]:
    """Every mark's centre, or the first mark not found and why."""
    found: dict[str, tuple[float, float]] = {}
    for mark in marks:
        where = find_mark(gray, mark)
        if isinstance(where, str):
            return found, (mark.name, where)
        found[mark.name] = where
    return found, None


def fit_marks(rules: FiducialRules, found: dict[str, tuple[float, float]]) -> Registration:
    """The transform from the marks' nominal places to where they were found, leaving out at most one bad mark."""
    nominal = {m.name: (float(m.x), float(m.y)) for m in rules.marks}
    names = list(found)
    matrix, residual, worst = _fit(names, nominal, found, rules.transform)
    if residual <= rules.max_residual_px:
        if rules.transform == "homography" and len(names) == rules.minimum:
            _check_perspective(rules, names, nominal, found)
        return Registration(_flat(matrix), residual, dict(found))
    if len(names) - 1 > rules.minimum:  # a fit without one mark can still be checked against the others
        best = min(((_fit([n for n in names if n != drop], nominal, found, rules.transform), drop) for drop in names),
                   key=lambda t: t[0][1])
        (m2, r2, _), dropped = best
        if r2 <= rules.max_residual_px:
            return Registration(_flat(m2), r2, dict(found), (dropped,))
    better = better_fit(rules, found)
    if better is None:
        advice = f"check mark {worst} for dirt or damage, or the board for warp"
    elif better.exact:  # four marks: a tilt and one bad mark look alike on one board
        advice = (f"check mark {worst} for dirt or damage, or the board for warp; or, if board after board is refused "
                  f"like this, the camera is not square to the board: {better.words()}: set `transform: "
                  f"{better.transform}` under the rule set's fiducials, or calibrate the camera (inspector camera "
                  f"calibrate --plane)")
    else:
        advice = (f"{better.words()}: the camera is not square to the board (or the board is stretched): set "
                  f"`transform: {better.transform}` under the rule set's fiducials, or calibrate the camera "
                  f"(inspector camera calibrate --plane)")
    raise RegistrationFailed(f"registration failed: the fiducials disagree by {residual:.2f} px (most: {worst}), "
                             f"over the recipe's max_residual_px {rules.max_residual_px:g}; {advice}", found)


def better_fit(rules: FiducialRules, found: dict[str, tuple[float, float]]) -> BetterFit | None:
    """The simplest transform richer than the rule set's that fits these marks clearly better (see `richer_fits`)."""
    return next((f for f in richer_fits(rules, found).values() if f is not None), None)


def richer_fits(rules: FiducialRules, found: dict[str, tuple[float, float]]) -> dict[str, BetterFit | None]:
    """Each transform richer than the rule set's, simplest first, fitted to these marks: a BetterFit where it fits
    them clearly better than the rule set's (within max_residual_px and at most half what the rule set's leaves;
    with just the marks it needs, which it fits whatever they are: a homography within max_perspective_px of an
    affine, an affine never), else None. All None when the rule set's own leaves at most half its max_residual_px
    (nothing to mend)."""
    out: dict[str, BetterFit | None] = dict.fromkeys(RICHER[rules.transform])
    nominal = {m.name: (float(m.x), float(m.y)) for m in rules.marks}
    names = [n for n in found if n in nominal]
    if len(names) < 3:
        return out
    _, given, _ = _fit(names, nominal, found, rules.transform)
    if given <= rules.max_residual_px / 2:
        return out
    src = np.array([nominal[n] for n in names], np.float64)
    span = (float(np.ptp(src[:, 0])) or 1.0, float(np.ptp(src[:, 1])) or 1.0)
    for kind in out:
        if len(names) >= TRANSFORMS[kind]:
            out[kind] = _fit_as(kind, names, nominal, found, float(given), span, rules)
    return out


def _fit_as(kind: str, names: list[str], nominal: dict[str, tuple[float, float]],
            found: dict[str, tuple[float, float]], given: float, span: tuple[float, float],
            rules: FiducialRules) -> BetterFit | None:
    try:
        matrix, left, _ = _fit(names, nominal, found, kind)
    except RegistrationFailed:  # marks on a line fit no homography
        return None
    exact = len(names) == TRANSFORMS[kind]
    if kind == "homography":
        h = as_homography(matrix)
        shape = (float(h[2, 0] * span[0] ** 2), float(h[2, 1] * span[1] ** 2))  # px of keystone across the span
        if exact:
            _, bend, _ = _fit(names, nominal, found, "affine")  # the bend from an affine it needs instead
            return BetterFit(kind, float(bend), given, True, shape) if bend <= rules.max_perspective_px else None
    else:
        if exact:  # three marks fit any affine: it tells nothing
            return None
        a = matrix[:, :2]
        scale = max(span)
        shape = (float((a[0, 0] - a[1, 1]) / 2 * scale), float((a[0, 1] + a[1, 0]) / 2 * scale))
    if left > rules.max_residual_px or left > given / 2:
        return None
    return BetterFit(kind, float(left), given, False, shape)


def _check_perspective(rules: FiducialRules, names: list[str], nominal: dict[str, tuple[float, float]],
                       found: dict[str, tuple[float, float]]) -> None:
    """Four marks fit any homography: refuse one that bends them further from an affine than a tilt can.

    With four marks an affine fit leaves the same residual at each, so which mark is bad cannot be told.
    """
    _, bend, _ = _fit(names, nominal, found, "affine")
    if bend > rules.max_perspective_px:
        raise RegistrationFailed(f"registration failed: the four fiducials need {bend:.1f} px of perspective, over the "
                                 f"recipe's max_perspective_px {rules.max_perspective_px:g}; one of "
                                 f"{', '.join(names)} is dirty, damaged or mistaken, or the camera is tilted further "
                                 f"(calibrate it: inspector camera calibrate --plane; a fifth mark lets a bad one be "
                                 f"named and left out)")


def _fit(names: list[str], nominal: dict[str, tuple[float, float]], found: dict[str, tuple[float, float]],
         kind: str) -> tuple[np.ndarray, float, str]:
    src = np.array([nominal[n] for n in names], np.float64)
    dst = np.array([found[n] for n in names], np.float64)
    matrix = fit_transform(src, dst, kind)
    err = np.hypot(*(map_points(matrix, src) - dst).T)
    i = int(np.argmax(err))
    return matrix, float(err[i]), names[i]


def map_points(matrix: np.ndarray | tuple[float, ...], pts: np.ndarray) -> np.ndarray:
    """Nx2 points through a 2x3 or 3x3 transform (with the projective divide)."""
    h = as_homography(matrix)
    p = np.asarray(pts, np.float64) @ h[:, :2].T + h[:, 2]
    return p[:, :2] / p[:, 2:3]


def as_homography(matrix: np.ndarray | tuple[float, ...] | list[float]) -> np.ndarray:
    """A 2x3 or 3x3 transform (array or row-major values) as a 3x3 array."""
    m = np.asarray(matrix, np.float64).reshape(-1)
    if m.size == 6:
        return np.vstack([m.reshape(2, 3), [0.0, 0.0, 1.0]])
    if m.size == 9:
        return m.reshape(3, 3)
    raise ValueError(f"a transform has 6 (2x3) or 9 (3x3) values, got {m.size}")


def is_affine(matrix: np.ndarray) -> bool:
    """True when a 3x3 transform has no perspective (its last row is 0 0 1): warpAffine will do."""
    return bool(abs(matrix[2, 0]) < 1e-12 and abs(matrix[2, 1]) < 1e-12 and abs(matrix[2, 2] - 1) < 1e-12)


def warp_inverse(image: np.ndarray, to_image: np.ndarray, size: tuple[int, int], border: int = cv2.BORDER_CONSTANT,
                 border_value: tuple[int, ...] | int = 0) -> np.ndarray:
    """The `size` (w, h) picture whose pixel p is image pixel to_image(p): affine or perspective, whichever it is."""
    h = as_homography(to_image)
    flags = cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP
    if is_affine(h):
        return cv2.warpAffine(image, h[:2], size, flags=flags, borderMode=border, borderValue=border_value)
    return cv2.warpPerspective(image, h, size, flags=flags, borderMode=border, borderValue=border_value)


def fit_transform(src: np.ndarray, dst: np.ndarray, kind: str) -> np.ndarray:
    """Least-squares matrix with dst ~ M(src): a similarity (a, b, tx, ty) or a full affine (2x3), or a homography
    (3x3, normalised to h33 = 1)."""
    n = len(src)
    if kind == "homography":
        h, _ = cv2.findHomography(src.astype(np.float64), dst.astype(np.float64), 0)
        if h is None:
            raise RegistrationFailed("registration failed: the fiducials found fit no homography (three of them "
                                     "lie on a line?); check the marks and the rule set's fiducial places")
        return h / h[2, 2]
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
    raise ValueError(f"unknown transform {kind!r}; use similarity, affine or homography")


def _flat(matrix: np.ndarray) -> tuple[float, ...]:
    return tuple(float(v) for v in matrix.reshape(-1))


COARSE_SCALE = 0.5  # the coarse search runs at half resolution
COARSE_PEAKS = 4  # candidates per mark (marks look alike: a mark's window may hold another mark or a round pad)


def coarse_reach(rules: FiducialRules) -> float:
    """How far from its place the coarse search looks for a board: a fifth of the marks' spread, 4x search_px at
    least."""
    xs, ys = [m.x for m in rules.marks], [m.y for m in rules.marks]
    spread = max(max(xs) - min(xs), max(ys) - min(ys))
    return max(4 * max(m.search_px for m in rules.marks), spread / 5)


def coarse_shift(gray: np.ndarray, rules: FiducialRules) -> tuple[float, float] | None:
    """The board's shift from its place that most marks agree on, from each mark's best candidates in a wide window
    at half resolution; None when fewer marks than the transform needs agree."""
    s = COARSE_SCALE
    small = cv2.resize(gray, None, fx=s, fy=s, interpolation=cv2.INTER_AREA).astype(np.float32)
    reach = coarse_reach(rules)
    votes: list[list[tuple[float, float]]] = []
    for mark in rules.marks:
        t = cv2.resize(mark_template(mark.shape, mark.size, mark.reach), None, fx=s, fy=s, interpolation=cv2.INTER_AREA)
        half = t.shape[0] // 2
        r = int(math.ceil(reach * s))
        cx, cy = int(round(mark.x * s)), int(round(mark.y * s))
        x0, y0 = max(0, cx - r - half), max(0, cy - r - half)
        x1, y1 = min(small.shape[1], cx + r + half + 1), min(small.shape[0], cy + r + half + 1)
        if x1 - x0 < t.shape[1] or y1 - y0 < t.shape[0]:
            votes.append([])
            continue
        scores = cv2.matchTemplate(small[y0:y1, x0:x1], t, cv2.TM_CCOEFF_NORMED)
        cands = []
        for _ in range(COARSE_PEAKS):
            _, score, _, (px, py) = cv2.minMaxLoc(scores)
            if not np.isfinite(score) or score < MIN_SCORE:
                break
            cands.append(((x0 + px + half) / s - mark.x, (y0 + py + half) / s - mark.y))
            cv2.circle(scores, (px, py), max(2, int(mark.size * s)), -1.0, -1)  # suppress this peak's neighbourhood
        votes.append(cands)
    tol = 3 + max(m.size for m in rules.marks) / 2  # px: marks of one board move alike, give or take a small turn
    best: tuple[int, tuple[float, float]] | None = None
    for cands in votes:
        for d in cands:
            agree = [min(c, key=lambda e: math.dist(e, d)) for c in votes if c and
                     min(math.dist(e, d) for e in c) <= tol]
            if best is None or len(agree) > best[0]:
                best = (len(agree), (float(np.mean([a[0] for a in agree])), float(np.mean([a[1] for a in agree]))))
    if best is None or best[0] < rules.minimum:
        return None
    return best[1]


def find_mark(gray: np.ndarray, mark: Fiducial) -> tuple[float, float] | str:
    """The mark's centre in image px, or why it was not found."""
    template = mark_template(mark.shape, mark.size, mark.reach)
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
    return mark_centre(gray, x0 + px + half, y0 + py + half, mark)


def mark_centre(gray: np.ndarray, x: int, y: int, mark: Fiducial) -> tuple[float, float] | str:
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
def mark_template(shape: str, size: int, reach: float) -> np.ndarray:
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
