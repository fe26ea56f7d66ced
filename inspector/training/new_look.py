"""Defects made from the reviewed crops themselves, so a retrained expert learns a new look for both classes.

Reviews of a new look (a glare, a new supplier's body) are nearly all false calls: trained on them alone, an
expert learns "this look is good" and forgets that a part with this look can also be missing, shifted, turned,
damaged or bridged. The renderer cannot draw the new look, so each defect class is made here from a reviewed
good crop: its own body cut out and moved, turned or removed (the board's colour, taken from the crop's
border, where it was), marked with a crack, or joined to its pad by a solder streak. The same synthesis on
reviewed crops held out of training gives the recall gate its defects under the new look.
"""
from __future__ import annotations

import cv2
import numpy as np

from .samples import PartSample

NEW_LOOK_DEFECTS = ("missing", "shifted", "rotated", "damaged", "bridge")  # classifier classes; polarity is the
# detector's and cannot be made without knowing the mark


def body_region(crop: np.ndarray, size: tuple[int, int], margin: int) -> tuple[int, int, int, int]:
    """x0, y0, x1, y1 of the body in a crop cut at rotation 0 (the body's size plus `margin` each side)."""
    h, w = crop.shape[:2]
    bw, bh = min(size[0], w - 2), min(size[1], h - 2)
    x0, y0 = (w - bw) // 2, (h - bh) // 2
    return x0, y0, x0 + bw, y0 + bh


def _board_colour(crop: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    """The median colour of the crop outside the body: what an empty spot of this board looks like here."""
    mask = np.ones(crop.shape[:2], bool)
    x0, y0, x1, y1 = box
    mask[max(0, y0 - 2):y1 + 2, max(0, x0 - 2):x1 + 2] = False
    ring = crop[mask] if mask.any() else crop.reshape(-1, 3)
    return np.median(ring, axis=0)


def synthesize(crop: np.ndarray, defect: str, size: tuple[int, int], margin: int,
               rng: np.random.Generator) -> np.ndarray:
    """A defective copy of a good crop: `defect` made from the crop's own body."""
    out = crop.copy()
    box = body_region(crop, size, margin)
    x0, y0, x1, y1 = box
    body = crop[y0:y1, x0:x1].copy()
    bw, bh = x1 - x0, y1 - y0
    fill = _board_colour(crop, box)
    noise = rng.normal(0, 3, (bh, bw, 3))
    if defect in ("missing", "shifted", "rotated"):
        out[y0:y1, x0:x1] = np.clip(fill + noise, 0, 255).astype(np.uint8)
    if defect == "shifted":  # off its pads along its length, by a third to a half of it
        d = rng.uniform(0.3, 0.5) * rng.choice([-1, 1])
        dx, dy = (int(round(d * bw)), 0) if bw >= bh else (0, int(round(d * bh)))
        _paste(out, body, x0 + dx, y0 + dy)
    elif defect == "rotated":  # turned by 15-35 degrees on the spot
        angle = float(rng.uniform(15, 35) * rng.choice([-1, 1]))
        side = int(np.ceil(np.hypot(bw, bh)))
        canvas = np.empty((side, side, 3), np.uint8)
        canvas[:] = fill.astype(np.uint8)
        _paste(canvas, body, (side - bw) // 2, (side - bh) // 2)
        turn = cv2.getRotationMatrix2D(((side - 1) / 2, (side - 1) / 2), angle, 1.0)
        turned = cv2.warpAffine(canvas, turn, (side, side), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        inside = cv2.warpAffine(np.pad(np.ones((bh, bw), np.uint8), (((side - bh) // 2, side - bh - (side - bh) // 2),
                                                                     ((side - bw) // 2, side - bw - (side - bw) // 2))),
                                turn, (side, side), flags=cv2.INTER_NEAREST)
        _paste_masked(out, turned, inside.astype(bool), x0 + bw // 2 - side // 2, y0 + bh // 2 - side // 2)
    elif defect == "damaged":  # a chipped corner (the board shows through) and a thin crack, light or dark
        cx = x0 if rng.random() < 0.5 else x1 - 1
        chip = np.array([[cx, y0], [cx + (1 if cx == x0 else -1) * int(rng.uniform(0.25, 0.45) * bw), y0],
                         [cx, y0 + int(rng.uniform(0.35, 0.65) * bh)]], np.int32)
        if rng.random() < 0.5:
            chip[:, 1] = y0 + y1 - 1 - chip[:, 1]  # a bottom corner
        cv2.fillPoly(out, [chip], tuple(int(v) for v in fill))
        tone = (205, 205, 205) if rng.random() < 0.5 else (25, 25, 30)
        pts = np.array([[x0 + rng.uniform(0.15, 0.4) * bw, y1 - 1 - rng.uniform(0, 0.2) * bh],
                        [x0 + rng.uniform(0.6, 0.85) * bw, y0 + rng.uniform(0, 0.3) * bh]], np.int32)
        cv2.polylines(out, [pts], False, tone, 1)
    elif defect == "bridge":  # a bright solder streak along the body, pad to pad
        y = y0 - 1 if rng.random() < 0.5 else y1
        if bw < bh:
            x = x0 - 1 if rng.random() < 0.5 else x1
            ends = (x, max(0, y0 - 2)), (x, min(crop.shape[0] - 1, y1 + 1))
        else:
            ends = (max(0, x0 - 2), y), (min(crop.shape[1] - 1, x1 + 1), y)
        cv2.line(out, *ends, (200, 200, 205), max(2, round(min(bw, bh) / 5)))
    elif defect not in ("missing",):
        raise ValueError(f"cannot make a {defect!r} defect from a crop; one of {', '.join(NEW_LOOK_DEFECTS)}")
    return out


def _paste_masked(dst: np.ndarray, patch: np.ndarray, mask: np.ndarray, x: int, y: int) -> None:
    """`patch`'s pixels under `mask` at (x, y) in `dst`, clipped to it (the rest of dst shows through)."""
    region = dst.copy()
    _paste(region, patch, x, y)
    where = np.zeros(dst.shape[:2], bool)
    _paste(where, mask, x, y)
    dst[where] = region[where]


def _paste(dst: np.ndarray, patch: np.ndarray, x: int, y: int) -> None:
    """`patch` at (x, y) in `dst`, clipped to it."""
    h, w = patch.shape[:2]
    sx0, sy0 = max(0, -x), max(0, -y)
    dx0, dy0 = max(0, x), max(0, y)
    dx1, dy1 = min(dst.shape[1], x + w), min(dst.shape[0], y + h)
    if dx1 > dx0 and dy1 > dy0:
        dst[dy0:dy1, dx0:dx1] = patch[sy0:sy0 + dy1 - dy0, sx0:sx0 + dx1 - dx0]


def new_look_defects(goods: list[PartSample], size: tuple[int, int], margin: int, per_crop: int,
                     rng: np.random.Generator) -> list[PartSample]:
    """`per_crop` defects of each good crop, the classes in turn: the new look's defective examples."""
    out = []
    turn = 0
    for s in goods:
        for _ in range(per_crop):
            defect = NEW_LOOK_DEFECTS[turn % len(NEW_LOOK_DEFECTS)]
            turn += 1
            out.append(PartSample(synthesize(s.crop, defect, size, margin, rng), defect, (0.0, 0.0), size, margin))
    return out
