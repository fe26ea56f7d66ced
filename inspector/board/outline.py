"""A board found in a photo by its outline and registered to the CAD's outline box, its quarter turn chosen by the
CAD's pads.

The board is told from its background by colour: the background is what the photo's border shows (the
colour clusters covering most of the border strip, Lab), the board whatever lies far from all of them (Otsu's
threshold on that distance). Each large blob is a candidate board. Its four edges are fitted robustly through the
points of its rim where solder mask meets the background (a connector hanging over half an edge borders the
background with its own shell, and a side fitted through it tilts: SnapperGPS's USB receptacle left its windows
6-10 px off), their corners give a homography to the outline's box, and the quarter turn is chosen by what the CAD
says is on the board: pads (bare or soldered) have rims a camera sees as edges, so the turn whose edge energy
correlates best with the CAD's pad rims wins, and a turn that does not win clearly is not taken. A blob that is not
a whole board (two boards touching, one cut by the photo's edge) fails the fit and is reported with the reason,
never registered by guess.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import cv2
import numpy as np

from .geometry import PxRect, rect_mask
from .register import Registration, RegistrationError

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


def _three_colours(pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each pixel's cluster, the three clusters' centres): k-means, seeded, so a photo always gives the same."""
    cv2.setRNGSeed(0)
    criteria = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 20, 1.0)
    _, labels, centres = cv2.kmeans(np.ascontiguousarray(pixels), 3, None, criteria, 3, cv2.KMEANS_PP_CENTERS)
    return labels.ravel(), centres


def board_mask(lab: np.ndarray) -> np.ndarray:
    """The mask of what is not background in `lab` (the photo at SEGMENT_SIDE scale, _small_lab)."""
    b = max(4, min(lab.shape[:2]) // 40)
    border = np.concatenate([lab[:b].reshape(-1, 3), lab[-b:].reshape(-1, 3),
                             lab[:, :b].reshape(-1, 3), lab[:, -b:].reshape(-1, 3)])
    labels, centres = _three_colours(border)
    share = np.bincount(labels, minlength=3) / len(labels)
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
    labels, centres = _three_colours(sample)
    commonest = int(np.bincount(labels, minlength=3).argmax())
    distance = np.linalg.norm(lab - centres[commonest], axis=2)
    spread = float(np.median(np.linalg.norm(sample[labels == commonest] - centres[commonest], axis=1)))
    solder_mask = ((distance < max(MASK_COLOUR_MIN, 3 * spread)) & (inner > 0)).astype(np.uint8)
    r = max(2, round(MASK_NEAR * np.sqrt(max(1.0, cv2.contourArea(contour.astype(np.float32))))))
    near = cv2.dilate(solder_mask, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1)))
    xy = np.clip(np.round(contour).astype(int), 0, [lab.shape[1] - 1, lab.shape[0] - 1])
    return near[xy[:, 1], xy[:, 0]] > 0


def _edges(contour: np.ndarray, weights: np.ndarray, box: np.ndarray) -> np.ndarray | None:
    """The blob's four corners (4 x 2, in the order of `box`'s corners) from lines fitted to each side near the
    box's."""
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


def agreement(warped: np.ndarray, template: np.ndarray, inside: np.ndarray) -> float:
    """Correlation of the photo's edge energy with the CAD's expected edges, over the board."""
    e = cv2.GaussianBlur(edge_energy(warped), (0, 0), 2)[inside > 0]
    t = template[inside > 0]
    if e.std() < 1e-6 or t.std() < 1e-6:
        return 0.0
    return float(np.corrcoef(e, t)[0, 1])


def edge_energy(image: np.ndarray) -> np.ndarray:
    """The gradient's magnitude of the image's grey: where it has edges."""
    grey = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY).astype(np.float32)
    return np.hypot(cv2.Sobel(grey, cv2.CV_32F, 1, 0), cv2.Sobel(grey, cv2.CV_32F, 0, 1))


def register_outline(photo: np.ndarray, contour: np.ndarray, size: tuple[int, int], outline: PxRect,
                     marks: list[PxRect], px_per_mm: float, edge: np.ndarray | None = None) -> Registration:
    """The blob `contour` (photo px) registered to the outline box of a `size` image frame, its turn chosen by
    where the CAD puts edges (`marks`: the pads, or the parts' windows); each side the straightest run of the rim,
    the points `edge` marks as the board's own (on_mask_edge) counting most. Raises RegistrationError when the blob
    is not one whole board or its turn cannot be told."""
    on_mask = edge if edge is not None else np.ones(len(contour), bool)
    weights = np.where(on_mask, 1.0, OFF_MASK_WEIGHT)
    own = contour[on_mask] if on_mask.sum() >= MIN_EDGE_SHARE * len(contour) else contour  # the box of the rim on
    #   the solder mask's edge: something touching the board (a cable, a dot on the bench, a connector over an edge)
    #   tilts and widens the whole blob's box, and a side's band then misses the board's own edge
    corners = _edges(contour, weights, cv2.boxPoints(cv2.minAreaRect(own.astype(np.float32))))
    if corners is None and len(own) < len(contour):  # that rim too short on a side: the whole blob's box
        corners = _edges(contour, weights, cv2.boxPoints(cv2.minAreaRect(contour.astype(np.float32))))
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
        scored.append((agreement(warped, template, inside), turn, h))
    if not scored:
        ratio = max(sides) / max(1e-6, min(sides))
        raise RegistrationError(f"its sides are {ratio:.2f}:1 where the outline's are "
                                f"{max(ow, oh) / min(ow, oh):.2f}:1: not one whole board")
    scored.sort(key=lambda s: -s[0])
    agrees, _turn, h = scored[0]
    runner_up = scored[1][0] if len(scored) > 1 else 0.0
    if agrees < MIN_AGREEMENT or agrees - runner_up < MIN_TURN_MARGIN:
        raise RegistrationError(f"its turn cannot be told (its edges agree with the CAD's {agrees:.2f}, "
                                f"{runner_up:.2f} the other way round): pick 3 points on it (--points)")
    mapped = cv2.perspectiveTransform(contour.reshape(-1, 1, 2).astype(np.float64), h).reshape(-1, 2)
    fill = _fill(mapped, inside)
    if fill < MIN_FILL:
        raise RegistrationError(f"the blob and the outline overlap only {100 * fill:.0f}% (another board touches "
                                "it, something covers it, or the photo's edge cuts it)")
    on_edge = mapped[on_mask] if on_mask.sum() >= MIN_EDGE_SHARE * len(contour) else mapped
    residual = float(np.median(_distance_to_box(on_edge, outline)))
    note = f"edges agree with the CAD's {agrees:.2f} ({runner_up:.2f} turned)"
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
    mask = board_mask(lab)
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
