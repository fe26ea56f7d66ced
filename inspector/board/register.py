"""A photo of a board registered to its CAD: the homography from photo pixels to the rule set's image frame.

Most of a plant's boards carry no fiducials, so a photo is registered the way an operator would line it up: on the
board's outline, or on three or more points picked once (saved with the recipe).

**Outline.** The board is told from its background by colour: the background is what the photo's border shows (the
colour clusters covering most of the border strip, Lab), the board whatever lies far from all of them (Otsu's
threshold on that distance). Each large blob is a candidate board. Its four edges are fitted robustly through the
points of its rim where solder mask meets the background (a connector hanging over half an edge borders the
background with its own shell, and a side fitted through it tilts: SnapperGPS's USB receptacle left its windows
6-10 px off), their corners give a homography to the outline's box, and the quarter turn is chosen by what the CAD
says is on the board: pads (bare or soldered) have rims a camera sees as edges, so the turn whose edge energy
correlates best with the CAD's pad rims wins, and a turn that does not win clearly is not taken. A blob that is not
a whole board (two boards touching, one cut by the photo's edge) fails the fit and is reported with the reason,
never registered by guess.

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

from collections.abc import Iterator
from dataclasses import dataclass

import cv2
import numpy as np

from .bend import Bend, measure_bend
from .geometry import PxRect, rect_mask

SEGMENT_SIDE = 1000  # px: the photo's longer side when telling board from background
MIN_BACKGROUND_SHARE = 0.2  # of the photo's border a colour must cover to be taken for background
MIN_AREA_SHARE = 0.01  # of the photo: a smaller blob is not a board
SIDE_TOLERANCE = 0.004  # of a side's length: the points within this of a line are on it (a board's edge is straight)
SIDE_TRIALS = 200  # lines tried through two of a side's points
SIDE_BAND = 0.12  # of the box's shorter side: a side's points lie this near the blob's box (a connector hanging
#                   over the edge moves the box's side outwards, and the edge itself must stay within reach)
MASK_NEAR = 0.015  # of a blob's size: an outline point this close to its solder mask is the board's own edge
MASK_SAMPLE = 20_000  # pixels of a blob its commonest colour is found among, at most
MASK_COLOUR_MIN = 10.0  # Lab: a pixel this close to the blob's commonest colour is solder mask, at least
MIN_EDGE_SHARE = 0.4  # of a blob's rim on solder mask's edge at least, or the residual is measured on all of it
OFF_MASK_WEIGHT = 0.25  # a rim point off the solder mask's edge counts this much towards a side's line
MIN_FILL = 0.80  # of the outline's box the blob must cover, and of the blob the box (a chamfer, a notch)
MAX_ASPECT_ERROR = 0.12  # fitted sides' ratio against the outline's
MIN_AGREEMENT = 0.05  # correlation of the photo's edges with the CAD's pads at the chosen turn
MIN_TURN_MARGIN = 0.04  # ... over the next turn's
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

    def warp(self, photo: np.ndarray, size: tuple[int, int]) -> np.ndarray:
        """The photo in the rule set's frame (`size` = width, height): what the line cuts crops from."""
        warped = cv2.warpPerspective(photo, self.homography, size, flags=cv2.INTER_AREA,
                                     borderMode=cv2.BORDER_REPLICATE)
        return self.bend.undo(warped) if self.bend is not None and self.bend.size == size else warped

    def photo_scale(self, size: tuple[int, int]) -> float:
        """Photo px per image frame px at the frame's centre (`size` = width, height): under 1, the photo resolves
        the board more coarsely than the recipe's pixels, and the crops are upsampled."""
        centre = np.array([[[size[0] / 2, size[1] / 2]]], np.float64)
        back = np.linalg.inv(self.homography)
        q = cv2.perspectiveTransform(centre, back)[0, 0]
        h = self.homography
        w = h[2, 0] * q[0] + h[2, 1] * q[1] + h[2, 2]
        u = (h[0, :2] * w - (h[0] @ [q[0], q[1], 1]) * h[2, :2]) / w ** 2  # d(frame x)/d(photo x, y)
        v = (h[1, :2] * w - (h[1] @ [q[0], q[1], 1]) * h[2, :2]) / w ** 2
        return float(1 / np.sqrt(abs(u[0] * v[1] - u[1] * v[0])))

    def to_json(self) -> dict:
        return {"method": self.method, "residual_px": round(self.residual_px, 2),
                "residual_mm": round(self.residual_mm, 3), "homography": self.homography.round(6).tolist(),
                "bend_px": round(self.bend.largest_px, 1) if self.bend is not None else 0.0, "note": self.note}


@dataclass
class Candidate:
    """One blob of the photo that may be a board: its outline registration, or why it is not one."""
    contour: np.ndarray  # N x 2 photo px
    registration: Registration | None
    reason: str = ""

    @property
    def centre(self) -> tuple[int, int]:
        x, y = self.contour.mean(axis=0)
        return int(x), int(y)


def _small_lab(photo: np.ndarray) -> tuple[np.ndarray, float]:
    """(the photo at SEGMENT_SIDE scale in Lab, smoothed; that scale's factor)."""
    scale = min(1.0, SEGMENT_SIDE / max(photo.shape[:2]))
    small = cv2.resize(photo, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA) if scale < 1 else photo
    return cv2.cvtColor(cv2.GaussianBlur(small, (5, 5), 0), cv2.COLOR_BGR2LAB).astype(np.float32), scale


def board_mask(photo: np.ndarray) -> tuple[np.ndarray, float]:
    """(mask of what is not background at SEGMENT_SIDE scale, that scale's factor from the photo)."""
    lab, scale = _small_lab(photo)
    return _board_mask(lab), scale


def _board_mask(lab: np.ndarray) -> np.ndarray:
    b = max(4, min(lab.shape[:2]) // 40)
    border = np.concatenate([lab[:b].reshape(-1, 3), lab[-b:].reshape(-1, 3),
                             lab[:, :b].reshape(-1, 3), lab[:, -b:].reshape(-1, 3)])
    criteria = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 20, 1.0)
    cv2.setRNGSeed(0)
    _, labels, centres = cv2.kmeans(border, 3, None, criteria, 3, cv2.KMEANS_PP_CENTERS)
    share = np.bincount(labels.ravel(), minlength=3) / len(labels)
    centres = centres[share >= MIN_BACKGROUND_SHARE]  # a board touching the photo's edge is not background
    distance = np.min(np.stack([np.linalg.norm(lab - c, axis=2) for c in centres]), axis=0)
    _, mask = cv2.threshold(np.clip(distance * 2, 0, 255).astype(np.uint8), 0, 255,
                            cv2.THRESH_BINARY + cv2.THRESH_OTSU)
    k = max(3, round(min(mask.shape) / 150)) | 1
    mask = cv2.morphologyEx(mask, cv2.MORPH_CLOSE, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
    return cv2.morphologyEx(mask, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))


def on_mask_edge(lab: np.ndarray, contour: np.ndarray) -> np.ndarray:
    """Which points of a blob's `contour` (N x 2, px of `lab`) are the board's own edge: within MASK_NEAR of its
    solder mask (the blob's commonest colour). A connector hanging over an edge borders the background with its
    own plastic or metal, and one the background's colour swallowed leaves a dent; a side fitted through those
    points tilts, and every window near that corner lands off its part."""
    blob = np.zeros(lab.shape[:2], np.uint8)
    cv2.fillPoly(blob, [np.round(contour).astype(np.int32)], 255)
    inner = cv2.erode(blob, np.ones((5, 5), np.uint8))
    pixels = lab[inner > 0]
    if len(pixels) < 100:
        return np.ones(len(contour), bool)
    sample = pixels[::max(1, len(pixels) // MASK_SAMPLE)]  # the commonest colour needs thousands, not a million
    cv2.setRNGSeed(0)
    criteria = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 20, 1.0)
    _, labels, centres = cv2.kmeans(np.ascontiguousarray(sample), 3, None, criteria, 3, cv2.KMEANS_PP_CENTERS)
    commonest = int(np.bincount(labels.ravel(), minlength=3).argmax())
    distance = np.linalg.norm(lab - centres[commonest], axis=2)
    spread = float(np.median(np.linalg.norm(sample[labels.ravel() == commonest] - centres[commonest], axis=1)))
    solder_mask = ((distance < max(MASK_COLOUR_MIN, 3 * spread)) & (inner > 0)).astype(np.uint8)
    r = max(2, round(MASK_NEAR * np.sqrt(max(1.0, cv2.contourArea(contour.astype(np.float32))))))
    near = cv2.dilate(solder_mask, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1)))
    xy = np.clip(np.round(contour).astype(int), 0, [lab.shape[1] - 1, lab.shape[0] - 1])
    return near[xy[:, 1], xy[:, 0]] > 0


def _edges(contour: np.ndarray, weights: np.ndarray) -> np.ndarray | None:
    """The blob's four corners (4 x 2, in the order of its minimum-area box) from lines fitted to each side."""
    box = cv2.boxPoints(cv2.minAreaRect(contour.astype(np.float32)))
    lines = []
    for i in range(4):
        a, b = box[i], box[(i + 1) % 4]
        d = b - a
        length = float(np.hypot(*d))
        if length < 1:
            return None
        n = np.array([-d[1], d[0]]) / length
        off = (contour - a) @ n
        along = (contour - a) @ (d / length)
        band = max(3.0, SIDE_BAND * min(np.hypot(*(box[1] - box[0])), np.hypot(*(box[2] - box[1]))))
        side = (np.abs(off) < band) & (along > 0.1 * length) & (along < 0.9 * length)
        if side.sum() < 5:
            return None
        lines.append(_straightest(contour[side], weights[side], SIDE_TOLERANCE * length))
    corners = []
    for i in range(4):  # side i-1 meets side i at box corner i
        (p, u), (q, v) = lines[i - 1], lines[i]
        m = np.array([u, -v]).T
        if abs(np.linalg.det(m)) < 1e-6:
            return None
        t = np.linalg.solve(m, q - p)
        corners.append(p + t[0] * u)
    return np.array(corners, np.float64)


def _straightest(points: np.ndarray, weights: np.ndarray, tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """(a point, the direction) of the line the most of `points` (by `weights`) lie on within `tolerance`, refitted
    on those: a board's edge is straight, and a connector's shell hanging over part of it is a shorter or a curved
    run beside it, and off the solder mask's edge (RANSAC, seeded: the same photo gives the same line)."""
    rng = np.random.default_rng(0)
    best = np.ones(len(points), bool)
    most = 0.0
    for _ in range(SIDE_TRIALS):
        i, j = rng.choice(len(points), 2, replace=False)
        d = points[j] - points[i]
        length = float(np.hypot(*d))
        if length < 1e-6:
            continue
        off = np.abs((points - points[i]) @ (np.array([-d[1], d[0]]) / length))
        inliers = off <= tolerance
        score = float(weights[inliers].sum())
        if score > most:
            most, best = score, inliers
    vx, vy, x0, y0 = cv2.fitLine(points[best].astype(np.float32), cv2.DIST_L2, 0, 0.01, 0.01).ravel()
    return np.array([x0, y0]), np.array([vx, vy])


def edge_template(size: tuple[int, int], outline: PxRect, marks: list[PxRect]) -> tuple[np.ndarray, np.ndarray]:
    """(where the CAD expects edges: the rims of the pads (or windows), blurred; the outline's mask), in the image
    frame of `size` (width, height)."""
    inside = rect_mask((size[1], size[0]), [outline])
    on = rect_mask((size[1], size[0]), marks) & inside
    rim = cv2.dilate(on, np.ones((5, 5), np.uint8)) - cv2.erode(on, np.ones((3, 3), np.uint8))
    return cv2.GaussianBlur(rim.astype(np.float32), (0, 0), 2), inside


def _agreement(warped: np.ndarray, template: np.ndarray, inside: np.ndarray) -> float:
    """Correlation of the photo's edge energy with the CAD's expected edges, over the board."""
    e = cv2.GaussianBlur(_edge_energy(warped), (0, 0), 2)[inside > 0]
    t = template[inside > 0]
    if e.std() < 1e-6 or t.std() < 1e-6:
        return 0.0
    return float(np.corrcoef(e, t)[0, 1])


def _edge_energy(image: np.ndarray) -> np.ndarray:
    grey = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY).astype(np.float32)
    return np.hypot(cv2.Sobel(grey, cv2.CV_32F, 1, 0), cv2.Sobel(grey, cv2.CV_32F, 0, 1))


def register_outline(photo: np.ndarray, contour: np.ndarray, size: tuple[int, int], outline: PxRect,
                     marks: list[PxRect], px_per_mm: float, edge: np.ndarray | None = None) -> Registration:
    """The blob `contour` (photo px) registered to the outline box of a `size` image frame, its turn chosen by
    where the CAD puts edges (`marks`: the pads, or the parts' windows); each side the straightest run of the rim,
    the points `edge` marks as the board's own (on_mask_edge) counting most. Raises RegistrationError when the blob
    is not one whole board or its turn cannot be told."""
    on_mask = edge if edge is not None else np.ones(len(contour), bool)
    corners = _edges(contour, np.where(on_mask, 1.0, OFF_MASK_WEIGHT))
    if corners is None:
        raise RegistrationError("its edges could not be fitted (too few points on a side)")
    x0, y0, x1, y1 = outline
    sides = (np.hypot(*(corners[1] - corners[0])), np.hypot(*(corners[2] - corners[1])))
    ow, oh = x1 - x0, y1 - y0
    target = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float64)
    template, inside = edge_template(size, outline, marks)
    scored = []
    for turn in range(4):
        src = np.roll(corners, -turn, axis=0)
        a, b = np.hypot(*(src[1] - src[0])), np.hypot(*(src[2] - src[1]))
        if abs((a / b) / (ow / oh) - 1) > MAX_ASPECT_ERROR:
            continue
        h = cv2.getPerspectiveTransform(src.astype(np.float32), target.astype(np.float32))
        warped = cv2.warpPerspective(photo, h, size, flags=cv2.INTER_AREA)
        scored.append((_agreement(warped, template, inside), turn, h))
    if not scored:
        ratio = max(sides) / max(1e-6, min(sides))
        raise RegistrationError(f"its sides are {ratio:.2f}:1 where the outline's are "
                                f"{max(ow, oh) / min(ow, oh):.2f}:1: not one whole board")
    scored.sort(key=lambda s: -s[0])
    agreement, _turn, h = scored[0]
    runner_up = scored[1][0] if len(scored) > 1 else 0.0
    if agreement < MIN_AGREEMENT or agreement - runner_up < MIN_TURN_MARGIN:
        raise RegistrationError(f"its turn cannot be told (its edges agree with the CAD's {agreement:.2f}, "
                                f"{runner_up:.2f} the other way round): pick 3 points on it (--points)")
    mapped = cv2.perspectiveTransform(contour.reshape(-1, 1, 2).astype(np.float64), h).reshape(-1, 2)
    fill = _fill(mapped, inside)
    if fill < MIN_FILL:
        raise RegistrationError(f"the blob and the outline overlap only {100 * fill:.0f}% (another board touches "
                                "it, something covers it, or the photo's edge cuts it)")
    on_edge = mapped[on_mask] if on_mask.sum() >= MIN_EDGE_SHARE * len(contour) else mapped
    residual = float(np.median(_distance_to_box(on_edge, outline)))
    note = f"edges agree with the CAD's {agreement:.2f} ({runner_up:.2f} turned)"
    if not on_mask.all():
        note += f"; {on_mask.mean():.0%} of its rim is solder mask's edge"
    return Registration(h, "outline", residual, residual / px_per_mm, note)


def _fill(mapped: np.ndarray, inside: np.ndarray) -> float:
    """The smaller of: the outline's share covered by the blob (`mapped` into the image frame), the blob's share
    inside the outline."""
    blob = np.zeros(inside.shape, np.uint8)
    cv2.fillPoly(blob, [np.round(mapped).astype(np.int32)], 255)
    both = np.count_nonzero((blob > 0) & (inside > 0))
    return min(both / max(1, np.count_nonzero(inside)), both / max(1, np.count_nonzero(blob)))


def _distance_to_box(points: np.ndarray, box: PxRect) -> np.ndarray:
    x0, y0, x1, y1 = box
    dx = np.minimum(np.abs(points[:, 0] - x0), np.abs(points[:, 0] - x1))
    dy = np.minimum(np.abs(points[:, 1] - y0), np.abs(points[:, 1] - y1))
    return np.minimum(dx, dy)


def find_boards(photo: np.ndarray, size: tuple[int, int], outline: PxRect, marks: list[PxRect],
                px_per_mm: float) -> list[Candidate]:
    """Every board-sized blob of the photo, largest first, each registered or with the reason it is not."""
    return list(candidates(photo, size, outline, marks, px_per_mm))


def candidates(photo: np.ndarray, size: tuple[int, int], outline: PxRect, marks: list[PxRect],
               px_per_mm: float) -> Iterator[Candidate]:
    """`find_boards` one blob at a time: the line stops at the first that registers."""
    lab, scale = _small_lab(photo)
    mask = _board_mask(lab)
    contours, _ = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    area = mask.shape[0] * mask.shape[1]
    for c in sorted(contours, key=cv2.contourArea, reverse=True):
        if cv2.contourArea(c) < MIN_AREA_SHARE * area:
            return
        small = c.reshape(-1, 2).astype(np.float64)
        points = small / scale
        try:
            yield Candidate(points, register_outline(photo, points, size, outline, marks, px_per_mm,
                                                     on_mask_edge(lab, small)))
        except RegistrationError as exc:
            yield Candidate(points, None, str(exc))


def register_points(pairs: list[tuple[tuple[float, float], tuple[float, float]]], px_per_mm: float) -> Registration:
    """Picked points: (photo px, image frame px) pairs; 3 give an affine map, 4 or more a homography. The
    residual is the median distance of the points from where the map puts them (0 with exactly 3 or 4)."""
    if len(pairs) < 3:
        raise RegistrationError(f"{len(pairs)} picked point(s): pick at least 3 (4 or more also undo a tilt)")
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


def _corner_move(warp: np.ndarray, size: tuple[int, int]) -> float:
    """The furthest a corner of a `size` (width, height) image moves under the 3x3 `warp`, px."""
    w, h = size
    corners = np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float64).reshape(-1, 1, 2)
    return float(np.hypot(*(cv2.perspectiveTransform(corners, warp.astype(np.float64)) - corners).reshape(-1, 2).T)
                 .max())


def refine_on_reference(photo: np.ndarray, registration: Registration, reference: np.ndarray,
                        px_per_mm: float = 1.0) -> Registration:
    """`registration` brought into line with the golden board `reference` (image frame) by ECC on the photo's
    content, and the bend a homography leaves undone where one shows (board/bend.py); kept as it was (noted) where
    ECC does not converge or moves a corner by more than 5% of the board. The residual is then what is left against
    the golden board, tile by tile, not the outline's edge."""
    size = (reference.shape[1], reference.shape[0])
    warped = registration.warp(photo, size)
    warp = np.eye(3, dtype=np.float32)
    criteria = (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 100, 1e-5)
    try:
        cc, warp = cv2.findTransformECC(standard_grey(reference), standard_grey(warped), warp,
                                        cv2.MOTION_HOMOGRAPHY, criteria, None, 5)
    except cv2.error:
        registration.note += "; refinement on the golden board did not converge (outline kept)"
        return registration
    moved = _corner_move(warp, size)
    if moved > 0.05 * max(size):
        registration.note += f"; refinement on the golden board moved a corner {moved:.0f} px (outline kept)"
        return registration
    # warp maps reference px -> warped px; the refined map takes the photo to the reference: inv(warp) @ H
    h = np.linalg.inv(warp.astype(np.float64)) @ registration.homography
    h /= h[2, 2]
    refined = cv2.warpPerspective(photo, h, size, flags=cv2.INTER_AREA, borderMode=cv2.BORDER_REPLICATE)
    bend, _before, left, bent = measure_bend(standard_grey(reference), standard_grey(refined))
    note = (f"{registration.note}; refined on the golden board (correlation {cc:.2f}, moved up to {moved:.1f} px); "
            f"{bent}")
    return Registration(h, registration.method + "+reference", left, left / px_per_mm, note, bend)


def _reduced(image: np.ndarray, scale: float) -> np.ndarray:
    small = cv2.resize(image, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA) if scale < 1 else image
    return standard_grey(small)


def _tile_residual(a: np.ndarray, b: np.ndarray) -> float:
    """Median shift (px of these images) left between two aligned greys, measured tile by tile."""
    h, w = a.shape
    th, tw = h // RESIDUAL_TILES, w // RESIDUAL_TILES
    window = cv2.createHanningWindow((tw, th), cv2.CV_32F)
    shifts = []
    for i in range(RESIDUAL_TILES):
        for j in range(RESIDUAL_TILES):
            # copies: OpenCV's phase correlation writes into a tile that is a view of the caller's image
            ta = a[i * th:(i + 1) * th, j * tw:(j + 1) * tw].copy()
            tb = b[i * th:(i + 1) * th, j * tw:(j + 1) * tw].copy()
            if ta.std() < 0.2 or tb.std() < 0.2:  # a plain tile says nothing about a shift
                continue
            (dx, dy), response = cv2.phaseCorrelate(ta, tb, window)
            if response > 0.1:
                shifts.append(np.hypot(dx, dy))
    return float(np.median(shifts)) if shifts else 0.0


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
    moved = _corner_move(to_frame, (w, h))
    if moved > MAX_SLIDE * max(w, h):
        raise RegistrationError(f"aligning it on the golden board moves a corner {moved:.0f} px, more than a board "
                                f"slides ({MAX_SLIDE:.0%} of its length): is the camera's view as it was?")
    homography = np.linalg.inv(to_frame)
    homography /= homography[2, 2]
    residual = left / scale
    return Registration(homography, "golden", residual, residual / px_per_mm,
                        f"aligned on the golden board (correlation {cc:.2f}, moved up to {moved:.1f} px)")
