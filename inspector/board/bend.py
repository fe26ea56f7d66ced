"""What a homography leaves: a smooth bend of the board in the photo, measured on the golden board and undone.

A homography is exact for a flat board seen through a pinhole. A phone's lens, or a line camera's that was not
corrected, bends straight lines, and a board bows a little; either leaves a registered board a few pixels off the
golden one, in a pattern that varies smoothly across it (SnapperGPS's `assembled2.jpg`: 2-5 px at 20 px/mm, one
way over its upper third and the other way over its lower). A 0402 is 20 px long there: cut 4 px off its window,
a good part reads as shifted.

The shift is measured tile by tile (phase correlation of standardised greys, overlapping tiles, those without
texture or a clear peak left out) and a cubic in x and y is fitted to it robustly. A part really placed off moves
one tile's content, not the board's: against a field fitted over dozens of tiles it is an outlier, dropped, and a
cubic cannot bend to follow it, so a shifted part stays shifted. The bend is kept only where it leaves clearly less
shift than the homography alone, and where it is no larger than a lens bends a board; otherwise the registration
stands as it was and says why.
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

TILES = 8  # a side of the board holds this many tiles (they overlap by half: twice as many along it)
DEGREE = 3  # of the polynomial the field is fitted with: a lens's barrel and a bow, not a part's shift
MIN_TEXTURE = 0.2  # std of a standardised tile below which it is plain mask and says nothing about a shift
MIN_RESPONSE = 0.15  # phase correlation's peak below which a tile's shift is not taken
MAX_SHARE = 0.25  # of a tile: a larger shift is a mismatch (a different part, a repeated pattern), not a bend
MAX_BEND = 0.02  # of the board's longer side: a bend further than this is not a lens's, and is not taken
MIN_GAIN_PX = 0.3  # px of the image frame the bend must take off the median shift to be kept
ROUNDS = 3  # of the robust fit: each drops the tiles far from the last fit


@dataclass(frozen=True)
class Bend:
    """A smooth displacement over an image frame of `size` (width, height): the golden board's pixel (x, y) shows
    in the homography-warped photo at (x, y) + field(x, y)."""
    size: tuple[int, int]
    coefficients: np.ndarray  # 2 x terms: dx's and dy's, over x and y scaled to [-1, 1]
    extent: tuple[float, float, float, float]  # x0, y0, x1, y1: the tiles' centres; beyond, the field is its edge's

    def field(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(dx, dy) at each (x, y): a polynomial is not extrapolated past the tiles it was fitted on."""
        x0, y0, x1, y1 = self.extent
        terms = _terms(np.clip(x, x0, x1), np.clip(y, y0, y1), self.size)
        return terms @ self.coefficients[0], terms @ self.coefficients[1]

    def undo(self, warped: np.ndarray) -> np.ndarray:
        """`warped` (the photo through the homography, this frame's size) with the bend taken out."""
        w, h = self.size
        ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
        dx, dy = self.field(xs.ravel(), ys.ravel())
        return cv2.remap(warped, xs + dx.reshape(h, w).astype(np.float32), ys + dy.reshape(h, w).astype(np.float32),
                         cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)

    @property
    def largest_px(self) -> float:
        """The furthest the bend moves a pixel of the frame (sampled on a grid), px."""
        w, h = self.size
        ys, xs = np.mgrid[0:h:max(1, h // 32), 0:w:max(1, w // 32)].astype(np.float64)
        dx, dy = self.field(xs.ravel(), ys.ravel())
        return float(np.hypot(dx, dy).max())


def _terms(x: np.ndarray, y: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The monomials x^i y^j, i + j <= DEGREE, of x and y scaled to [-1, 1] over `size`: N x terms."""
    u = np.asarray(x, np.float64) / max(1, size[0] - 1) * 2 - 1
    v = np.asarray(y, np.float64) / max(1, size[1] - 1) * 2 - 1
    return np.stack([u ** i * v ** j for i in range(DEGREE + 1) for j in range(DEGREE + 1 - i)], axis=-1)


def tile_shifts(reference: np.ndarray, live: np.ndarray, tile: tuple[int, int] | None = None,
                min_response: float = MIN_RESPONSE, max_share: float = MAX_SHARE) -> tuple[np.ndarray, np.ndarray]:
    """(tile centres N x 2, shifts N x 2): where each textured tile of the standardised grey `reference` shows in
    `live` (same size), in px, for tiles whose shift is clear. Tiles of `tile` (width, height) side by side, or by
    default squares a TILES-th of the shorter side overlapping by half."""
    h, w = reference.shape
    if tile is None:
        side = max(16, min(h, w) // TILES) // 2 * 2
        (tw, th), (sx, sy) = (side, side), (side // 2, side // 2)
    else:
        (tw, th), (sx, sy) = tile, tile
    window = cv2.createHanningWindow((tw, th), cv2.CV_32F)
    centres, shifts = [], []
    for y in range(0, h - th + 1, sy):
        for x in range(0, w - tw + 1, sx):
            a = reference[y:y + th, x:x + tw].copy()  # copies: phaseCorrelate writes into views
            b = live[y:y + th, x:x + tw].copy()
            if a.std() < MIN_TEXTURE or b.std() < MIN_TEXTURE:
                continue
            (dx, dy), response = cv2.phaseCorrelate(a, b, window)
            if response < min_response or np.hypot(dx, dy) > max_share * min(tw, th):
                continue
            centres.append((x + tw / 2 - 0.5, y + th / 2 - 0.5))
            shifts.append((dx, dy))
    return np.array(centres, np.float64).reshape(-1, 2), np.array(shifts, np.float64).reshape(-1, 2)


def fit_bend(centres: np.ndarray, shifts: np.ndarray, size: tuple[int, int]) -> Bend | None:
    """The cubic field through the tiles' shifts, fitted robustly; None with too few tiles to fit it."""
    terms = _terms(centres[:, 0], centres[:, 1], size)
    if len(centres) < 2 * terms.shape[1]:
        return None
    keep = np.ones(len(centres), bool)
    coefficients = np.zeros((2, terms.shape[1]))
    for _ in range(ROUNDS):
        if keep.sum() < 2 * terms.shape[1]:
            return None
        coefficients = np.linalg.lstsq(terms[keep], shifts[keep], rcond=None)[0].T
        off = np.hypot(*(terms @ coefficients.T - shifts).T)
        spread = 1.4826 * np.median(off[keep])
        keep = off <= max(1.0, 3 * spread)
    return Bend(size, coefficients, (*centres.min(axis=0), *centres.max(axis=0)))


def measure_bend(reference: np.ndarray, live: np.ndarray) -> tuple[Bend | None, float, float, str]:
    """(the bend to undo or None, median tile shift before, after, a note): `reference` and `live` standardised
    greys of one frame, the golden board and the registered photo."""
    size = (reference.shape[1], reference.shape[0])
    centres, shifts = tile_shifts(reference, live)
    before = float(np.median(np.hypot(*shifts.T))) if len(shifts) else 0.0
    bend = fit_bend(centres, shifts, size)
    if bend is None:
        return None, before, before, f"no bend fitted ({len(shifts)} tiles show a clear shift)"
    largest = bend.largest_px
    if largest > MAX_BEND * max(size):
        return None, before, before, f"a bend of {largest:.1f} px is not a lens's (kept unbent)"
    _, after_shifts = tile_shifts(reference, bend.undo(live))
    after = float(np.median(np.hypot(*after_shifts.T))) if len(after_shifts) else before
    if after > before - MIN_GAIN_PX:
        return None, before, before, f"no bend kept (it leaves {after:.1f} px of {before:.1f})"
    return bend, before, after, f"unbent up to {largest:.1f} px (shift left {before:.1f} -> {after:.1f} px)"
