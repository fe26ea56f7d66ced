"""A photo of a board registered to its CAD: the homography from photo pixels to the rule set's image frame.

Most of a plant's boards carry no fiducials, so a photo is registered the way an operator would line it up: on the
board's outline, or on three or more points picked once (saved with the recipe).

**Outline.** Found and fitted in board/outline.py: the board told from the photo's background by colour, its
sides fitted, its quarter turn the one the CAD's pads agree with.

**To a reference.** A board photo registered on its outline is then refined on the golden board itself (ECC,
homography, on standardised greys, so another light does not matter), which brings the board's own content, not
only its edge, into line; a refinement that does not converge keeps the outline's registration and says so. What
a homography cannot follow (a phone's lens, a bowed board) is then measured tile by tile and taken out
(board/bend.py).

**On the golden board alone.** Where each frame already holds the board about where the recipe puts it (a conveyor's
stop, a fixture with play) and there is nothing to find it by, the frame is aligned to the golden board directly:
the shift by phase correlation, then ECC on standardised greys, coarse to fine, on reduced copies so a frame costs
milliseconds, not a second. A board slides and turns on a conveyor, so that is the motion fitted first; an affine
map (a little scale or shear: another height) and then a homography (a tilted view) are taken only where each
leaves clearly less shift between the two in a grid of tiles, since a freer motion also fits a sparse board's
clutter. That shift, its median over the tiles, is the residual. A frame that does not correlate with the golden
board, or would need a corner moved further than a board could slide, is refused with the reason. (The bare-board
comparison's `ingest/difference.align` is the lighter cousin: one affine step, and the shift kept when ECC fails,
because there a board's differences are what is looked for; the line's registration must refuse instead of
guessing.)
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from .bend import Bend, measure_bend, tile_shifts

ALIGN_SIDE = 640  # px: the longer side of the reduced copies a frame is aligned to the golden board on
MIN_CORRELATION = 0.5  # ECC's correlation with the golden board below which a frame is not taken for the board
MAX_SLIDE = 0.10  # of the board's longer side: the furthest a corner may move when aligning on the golden board
# what a freer motion (affine over a slide and turn, then perspective) must take off the shift left tile by tile,
# px of the reduced copies: a freer motion also fits a sparse board's clutter, so it is kept only where the board's
# own content lines up better for it everywhere (a camera rectified at a scale a little off needs it)
MOTION_GAIN_PX = 0.05
PYRAMID = (0.25, 0.5, 1.0)  # of the reduced copies: the levels the slide is found on, coarse to fine
MIN_LEVEL_SIDE = 64  # px: a coarse level's shorter side at least this (fewer pixels align on clutter)
RESIDUAL_TILES = 4  # a grid of this many tiles a side measures what alignment left
RESIDUAL_RESPONSE = 0.1  # phase correlation's peak a tile's shift needs to count towards it


class RegistrationError(ValueError):
    """A photo that could not be registered; the message says why and what to do."""


@dataclass
class Registration:
    homography: np.ndarray  # 3x3, photo px -> image frame px
    method: str  # outline | outline+reference | points | golden
    residual_px: float  # median distance of the evidence from where the CAD puts it, image frame px
    residual_mm: float
    note: str = ""
    bend: Bend | None = None  # what the homography leaves, measured on the golden board (board/bend.py)
    evidence: str = ""  # how well it is founded, where a residual says nothing (a homography fits four marks exactly)

    def warp(self, photo: np.ndarray, size: tuple[int, int]) -> np.ndarray:
        """The photo in the rule set's frame (`size` = width, height): what the line cuts crops from."""
        warped = cv2.warpPerspective(photo, self.homography, size, flags=cv2.INTER_AREA,
                                     borderMode=cv2.BORDER_REPLICATE)
        return self.bend.undo(warped) if self.bend is not None and self.bend.size == size else warped

    def photo_scale(self, size: tuple[int, int]) -> float:
        """Photo px per image frame px at the frame's centre (`size` = width, height): under 1, the photo resolves
        the board more coarsely than the recipe's pixels, and the crops are upsampled."""
        cx, cy = size[0] / 2, size[1] / 2
        frame = np.array([[[cx, cy]], [[cx + 1, cy]], [[cx, cy + 1]]], np.float64)
        o, u, v = cv2.perspectiveTransform(frame, np.linalg.inv(self.homography)).reshape(3, 2)
        du, dv = u - o, v - o  # one frame px along x and along y, in the photo
        return float(np.sqrt(abs(du[0] * dv[1] - du[1] * dv[0])))

    def to_json(self) -> dict:
        return {"method": self.method, "residual_px": round(self.residual_px, 2),
                "residual_mm": round(self.residual_mm, 3), "homography": self.homography.round(6).tolist(),
                "bend_px": round(self.bend.largest_px, 1) if self.bend is not None else 0.0, "note": self.note}


def register_points(pairs: list[tuple[tuple[float, float], tuple[float, float]]], px_per_mm: float) -> Registration:
    """Picked points: (photo px, image frame px) pairs; 3 give an affine map, 4 or more a homography. The
    residual is the median distance of the points from where the map puts them (0 with exactly 3 or 4)."""
    if len(pairs) < 3:
        raise RegistrationError(f"{len(pairs)} picked point(s): pick at least 3 (4 or more fit a tilt exactly)")
    src = np.array([p for p, _ in pairs], np.float64)
    dst = np.array([q for _, q in pairs], np.float64)
    (ax, ay), (bx, by) = src[1] - src[0], src[2] - src[0]
    if abs(ax * by - ay * bx) < 1e-3 * max(1.0, np.ptp(src) ** 2):
        raise RegistrationError("the picked points lie on one line: pick points spread over the board")
    if len(pairs) == 3:
        h = np.vstack([cv2.getAffineTransform(src.astype(np.float32), dst.astype(np.float32)), [0, 0, 1]])
    else:
        h, _ = cv2.findHomography(src, dst, 0)
        if h is None:
            raise RegistrationError("the picked points give no homography: pick points spread over the board")
    mapped = cv2.perspectiveTransform(src.reshape(-1, 1, 2), h).reshape(-1, 2)
    residual = float(np.median(np.hypot(*(mapped - dst).T)))
    return Registration(h, "points", residual, residual / px_per_mm)


def standard_grey(image: np.ndarray) -> np.ndarray:
    grey = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY).astype(np.float32)
    grey = cv2.GaussianBlur(grey, (0, 0), 1.5)
    return (grey - grey.mean()) / max(1e-3, grey.std())


def corner_move(warp: np.ndarray, size: tuple[int, int]) -> float:
    """The furthest a corner of a `size` (width, height) image moves under the 3x3 `warp`, px."""
    w, h = size
    corners = np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float64).reshape(-1, 1, 2)
    return float(np.hypot(*(cv2.perspectiveTransform(corners, warp.astype(np.float64)) - corners).reshape(-1, 2).T)
                 .max())


def refine_on_reference(photo: np.ndarray, registration: Registration,
                        reference: np.ndarray, px_per_mm: float = 1.0) -> tuple[Registration, np.ndarray]:
    """`registration` brought into line with the golden board `reference` (image frame) by ECC on the photo's
    content, and the bend a homography leaves undone where one shows (board/bend.py); kept as it was (noted) where
    ECC does not converge or moves a corner by more than 5% of the board. The residual is then what is left against
    the golden board, tile by tile, not the outline's edge. Returned with the photo warped by it (the work is done
    here already: the line need not warp the frame again)."""
    size = (reference.shape[1], reference.shape[0])
    warped = registration.warp(photo, size)
    golden_grey = standard_grey(reference)
    warp = np.eye(3, dtype=np.float32)
    criteria = (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 100, 1e-5)
    try:
        cc, warp = cv2.findTransformECC(golden_grey, standard_grey(warped), warp, cv2.MOTION_HOMOGRAPHY, criteria,
                                        None, 5)
    except cv2.error:
        registration.note += "; refinement on the golden board did not converge (outline kept)"
        return registration, warped
    moved = corner_move(warp, size)
    if moved > 0.05 * max(size):
        registration.note += f"; refinement on the golden board moved a corner {moved:.0f} px (outline kept)"
        return registration, warped
    # warp maps reference px -> warped px; the refined map takes the photo to the reference: inv(warp) @ H
    h = np.linalg.inv(warp.astype(np.float64)) @ registration.homography
    h /= h[2, 2]
    refined = cv2.warpPerspective(photo, h, size, flags=cv2.INTER_AREA, borderMode=cv2.BORDER_REPLICATE)
    bend, _before, left, bent = measure_bend(golden_grey, standard_grey(refined))
    note = (f"{registration.note}; refined on the golden board (correlation {cc:.2f}, moved up to {moved:.1f} px); "
            f"{bent}")
    refined = bend.undo(refined) if bend is not None else refined
    return Registration(h, registration.method + "+reference", left, left / px_per_mm, note, bend,
                        registration.evidence), refined


def _reduced(image: np.ndarray, scale: float) -> np.ndarray:
    small = cv2.resize(image, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA) if scale < 1 else image
    return standard_grey(small)


def _tile_residual(a: np.ndarray, b: np.ndarray) -> float:
    """Median shift (px of these images) left between two aligned greys, measured tile by tile."""
    h, w = a.shape
    _, shifts = tile_shifts(a, b, (w // RESIDUAL_TILES, h // RESIDUAL_TILES), min_response=RESIDUAL_RESPONSE,
                            max_share=np.inf)
    return float(np.median(np.hypot(*shifts.T))) if len(shifts) else 0.0


def _left_after(ref: np.ndarray, live: np.ndarray, warp: np.ndarray) -> float:
    """The shift `_tile_residual` finds left once `live` is brought onto `ref` by `warp` (ref px -> live px)."""
    aligned = cv2.warpPerspective(live, np.linalg.inv(warp.astype(np.float64)), ref.shape[::-1],
                                  flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return _tile_residual(ref, aligned)


def _at_scale(warp: np.ndarray, factor: float) -> np.ndarray:
    """A 3x3 map between two images, for copies of both `factor` times the size."""
    s = np.diag([factor, factor, 1.0])
    return (s @ warp.astype(np.float64) @ np.linalg.inv(s)).astype(np.float32)


def _ecc(ref: np.ndarray, live: np.ndarray, warp: np.ndarray, motion: int) -> tuple[float, np.ndarray]:
    """ECC from `warp` (3x3, ref px -> live px): (correlation, the 3x3 it converged to). cv2.error when it does not."""
    criteria = (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 200, 1e-6)
    start = warp[:2].copy() if motion != cv2.MOTION_HOMOGRAPHY else warp.copy()
    cc, out = cv2.findTransformECC(ref, live, start, motion, criteria, None, 5)
    return cc, out if out.shape == (3, 3) else np.vstack([out, [0, 0, 1]]).astype(np.float32)


def register_on_reference(frame: np.ndarray, reference: np.ndarray, px_per_mm: float = 1.0) -> Registration:
    """`frame` (the board about where the recipe puts it, the reference's size) aligned to the golden board
    `reference`: the homography from frame px to recipe px. RegistrationError when it is not this board or it
    slid further than MAX_SLIDE."""
    if frame.shape[:2] != reference.shape[:2]:
        raise RegistrationError(f"the frame is {frame.shape[1]}x{frame.shape[0]} px where the golden board is "
                                f"{reference.shape[1]}x{reference.shape[0]}: aligning on the golden board needs "
                                "frames of the board's size; name the outline (geometry:) to find the board in "
                                "larger photos")
    h, w = reference.shape[:2]
    scale = min(1.0, ALIGN_SIDE / max(h, w))
    ref, live = _reduced(reference, scale), _reduced(frame, scale)
    (dx, dy), _ = cv2.phaseCorrelate(ref, live, cv2.createHanningWindow(ref.shape[::-1], cv2.CV_32F))
    warp = np.array([[1, 0, dx], [0, 1, dy], [0, 0, 1]], np.float32)  # reference px -> frame px, reduced
    try:
        for factor in [f for f in PYRAMID if f * min(ref.shape) >= MIN_LEVEL_SIDE or f == 1.0]:  # coarse to fine
            r = cv2.resize(ref, None, fx=factor, fy=factor, interpolation=cv2.INTER_AREA) if factor < 1 else ref
            lv = cv2.resize(live, None, fx=factor, fy=factor, interpolation=cv2.INTER_AREA) if factor < 1 else live
            cc, level = _ecc(r, lv, _at_scale(warp, factor), cv2.MOTION_EUCLIDEAN)
            warp = _at_scale(level, 1 / factor)
        left = _left_after(ref, live, warp)
        for motion in (cv2.MOTION_AFFINE, cv2.MOTION_HOMOGRAPHY):  # more freedom only where it aligns better
            try:
                cc_more, more = _ecc(ref, live, warp, motion)
            except cv2.error:
                continue
            left_more = _left_after(ref, live, more)
            if left_more < left - MOTION_GAIN_PX and cc_more >= cc:
                cc, warp, left = cc_more, more, left_more
    except cv2.error:
        raise RegistrationError("it does not line up with the golden board (the alignment did not converge): is "
                                "it this board, and is the camera's view as it was?") from None
    if cc < MIN_CORRELATION:
        raise RegistrationError(f"it correlates {cc:.2f} with the golden board (at least {MIN_CORRELATION} for "
                                "the same board): is it this board, and is the camera's view as it was?")
    to_frame = _at_scale(warp, 1 / scale).astype(np.float64)  # recipe px -> frame px, full size
    moved = corner_move(to_frame, (w, h))
    if moved > MAX_SLIDE * max(w, h):
        raise RegistrationError(f"aligning it on the golden board moves a corner {moved:.0f} px, more than a board "
                                f"slides ({MAX_SLIDE:.0%} of its length): is the camera's view as it was?")
    homography = np.linalg.inv(to_frame)
    homography /= homography[2, 2]
    residual = left / scale
    return Registration(homography, "golden", residual, residual / px_per_mm,
                        f"aligned on the golden board (correlation {cc:.2f}, moved up to {moved:.1f} px)")
