"""Teaching a detector on tiles of its served images (`zoo train --new --kind detector --tile SIZE`).

Why: a board photo of a few thousand pixels with defects of a few dozen cannot be squeezed into one input of the
size a CPU trains at (640 px) without its defects falling under YOLO's finest cells (detector_sizing.py). YOLO is
fully convolutional, so the detector is served the whole image at a size where its defects are large enough, and
taught on tiles of that served image: the same pixels at the same scale, a tile at a time. Tiles overlap by at least
the larger boxes' side, so every box lies whole in some tile; a box cut by a tile's edge is kept there, clipped,
when at least KEEP of it is inside (else left out of that tile: it lies whole in a neighbour). The line, the held-out
scoring and `zoo evaluate` all read whole images, never tiles.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

KEEP = 0.4  # the share of a box a tile must hold to label it there (0.8 and 1.0 did worse: ml/labelled-images.md)
MIN_OVERLAP_SHARE = 0.25  # of the tile: the least overlap between neighbouring tiles
MAX_OVERLAP_SHARE = 0.5

PixelBox = tuple[int, float, float, float, float]  # kind, x1, y1, x2, y2 in served pixels


@dataclass(frozen=True)
class Tiling:
    size: int  # a tile's side, px of the served image (the trainer's input)
    overlap: int  # px shared by neighbouring tiles

    def starts(self, length: int) -> list[int]:
        """Where tiles begin along a side of `length` px: evenly spread, the first at 0 and the last at the end,
        neighbours sharing at least `overlap` px."""
        if length <= self.size:
            return [0]
        n = math.ceil((length - self.overlap) / (self.size - self.overlap))
        return [round(i * (length - self.size) / (n - 1)) for i in range(n)]

    def count(self, side: int) -> int:
        return len(self.starts(side)) ** 2


def choose_tiling(size: int, box_sides: np.ndarray) -> Tiling:
    """Tiles of `size` px overlapping by the larger boxes' side (their 95th percentile, in served px), a quarter
    of the tile at least and half at most."""
    big = float(np.quantile(box_sides, 0.95)) if len(box_sides) else 0.0
    overlap = int(min(MAX_OVERLAP_SHARE * size, max(MIN_OVERLAP_SHARE * size, math.ceil(big))))
    return Tiling(size, overlap)


def cut(image: np.ndarray, boxes: list[PixelBox], tiling: Tiling) -> list[tuple[np.ndarray, list[PixelBox]]]:
    """The tiles of a served image (HxWxC), each with its boxes in the tile's pixels."""
    h, w = image.shape[:2]
    out = []
    for y in tiling.starts(h):
        for x in tiling.starts(w):
            s = tiling.size
            inside = []
            for kind, x1, y1, x2, y2 in boxes:
                cx1, cy1, cx2, cy2 = max(x1, x), max(y1, y), min(x2, x + s), min(y2, y + s)
                area = (x2 - x1) * (y2 - y1)
                if cx2 > cx1 and cy2 > cy1 and area > 0 and (cx2 - cx1) * (cy2 - cy1) >= KEEP * area:
                    inside.append((kind, cx1 - x, cy1 - y, cx2 - x, cy2 - y))
            out.append((np.ascontiguousarray(image[y:y + s, x:x + s]), inside))
    return out
