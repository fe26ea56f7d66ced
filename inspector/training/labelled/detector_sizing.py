"""The input a detector's images call for: big enough for the image, and for its smallest boxes.

The fitting follows the images (squash when they share one aspect, else letterbox), as a classifier's does
(sizing.py). The size is the median image's longer side, rounded up to a multiple of 32, unless the labelled boxes
need more: YOLO's finest cells are 8 px, and its assigner picks the cells whose centres lie inside a box, so a box
under three cells a side (24 px at the input) has a handful of cells to learn from, and a class of such boxes can
die in training (measured on 64-px boards with 10-12 px defects, three seeds: one class never called in most runs
at 64 px input, in one of three at 96, in none at 128 or 160). So the input grows until a tenth of the boxes at
most are under MIN_BOX at the input, up to MAX_SIDE, what a CPU teaches whole images at; a detector taught in tiles
(tiles.py) is served whole images up to MAX_TILED_SIDE. What remains too small, or an input given smaller than that,
is said, not hidden, with the remedy: a larger --input-size, or tiles.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .boxes import BoxedImage

MIN_SIDE, MAX_SIDE, STEP = 64, 640, 32
MAX_TILED_SIDE = 2048  # a detector taught in tiles is served whole images up to this side
SUGGESTED_TILE = 320  # the tile a warning suggests: the side the trainer takes a tile at
MIN_BOX = 24  # px at the input: three cells of YOLO's finest stride (8) a side
SMALL_SHARE = 0.1  # the share of boxes allowed under MIN_BOX
ASPECT_TOLERANCE = 0.05  # aspects within 5% of the median count as one


@dataclass(frozen=True)
class DetectorInput:
    input_size: int
    fit: str  # squash | letterbox (experts/spec.py FITS)
    image_side: int  # what the images alone call for
    box_side: int | None  # what the smallest boxes call for (None: no boxes)
    warning: str | None  # boxes that stay small at the input, said to the engineer

    def describe(self) -> str:
        boxes = "" if self.box_side is None else f", the smallest tenth of the boxes {self.box_side}"
        return f"the images call for {self.image_side} px{boxes}"


def _short_sides(images: list[BoxedImage], fit: str) -> np.ndarray:
    """Each box's shorter side as a share of the input side it is fitted to (multiply by the input size)."""
    out = []
    for im in images:
        w, h = im.size
        for b in im.scored:
            bw, bh = b.x2 - b.x1, b.y2 - b.y1
            out.append(min(bw, bh) / max(w, h) if fit == "letterbox" else min(bw / w, bh / h))
    return np.asarray(out, dtype=np.float64)


def _rounded(side: float, cap: int = MAX_SIDE) -> int:
    return int(min(cap, max(MIN_SIDE, STEP * np.ceil(side / STEP))))


def choose_detector_input(images: list[BoxedImage], size: int | None = None, tiled: bool = False) -> DetectorInput:
    """The input for training on `images`; `size` (the engineer's) overrides the size, never the fitting. `tiled`:
    taught in tiles, so served whole images up to MAX_TILED_SIDE."""
    cap = MAX_TILED_SIDE if tiled else MAX_SIDE
    wh = np.array([im.size for im in images], dtype=np.float64)
    aspect = wh[:, 1] / wh[:, 0]
    fit = "squash" if np.max(np.abs(aspect / np.median(aspect) - 1)) <= ASPECT_TOLERANCE else "letterbox"
    native = float(np.median(wh.max(axis=1)))
    image_side = _rounded(native, cap)
    shares = _short_sides(images, fit)
    if not len(shares):
        return DetectorInput(size or image_side, fit, image_side, None, None)
    small = float(np.quantile(shares, SMALL_SHARE))
    box_side = _rounded(MIN_BOX / small, cap) if small > 0 else cap
    chosen = size or max(image_side, box_side)
    under = float(np.mean(shares * chosen < MIN_BOX))
    warning = None
    if under > SMALL_SHARE:
        largest = "the largest whole image this trainer takes" if not tiled else "the largest a tiled detector serves"
        where = (f"{chosen} px, {largest}" if size is None else
                 f"--input-size {chosen} (they call for {box_side} px)")
        whole = _rounded(max(native, MIN_BOX / small if small > 0 else native), MAX_TILED_SIDE)
        remedy = ("give a larger --input-size" if size is not None and chosen < box_side else
                  f"teach it in tiles (--tile {SUGGESTED_TILE}: served whole images at {whole} px, taught "
                  f"{SUGGESTED_TILE} px at a time)" if not tiled and whole > chosen else
                  "cut the images into smaller pieces, each with its boxes, before teaching")
        warning = (f"{100 * under:.0f}% of the boxes are under {MIN_BOX} px at {where}; YOLO's finest cells are 8 px, "
                   f"so a class of small boxes may not be learned: {remedy}")
    return DetectorInput(chosen, fit, image_side, box_side, warning)


def taught_scale(images: list[BoxedImage]) -> dict[str, float | None]:
    """What a detector is taught on, as a version records it (`taught_on`): the images' longer side and their boxes'
    longer side, medians in the images' own pixels. The line fits each part's window to the same input, so a window
    far from `image_px` shows a defect at another size than taught (app/detector_scale.py says so)."""
    sides = [max(im.size) for im in images]
    boxes = [max(b.x2 - b.x1, b.y2 - b.y1) for im in images for b in im.scored]
    return {"image_px": float(np.median(sides)) if sides else None,
            "box_px": round(float(np.median(boxes)), 1) if boxes else None}
