"""Where a board differs from its golden board: the golden image aligned onto the live one, and the places where
they differ, as candidate boxes for an expert to name (a defect's class, or nothing).

This is how AOI finds what it then classifies: it does not guess where a defect may be, it compares. A live frame
and its golden one are never exactly registered (a line-scan camera's start, a board a pixel off), so the golden
image is first aligned to the live one (phase correlation for the shift, then ECC for a small affine); whatever
still differs by more than half the image's contrast, after an opening that removes edges a pixel off, is a
candidate. Its box is the difference's, grown by a margin and to a least side (`Boxing`), both fitted on labelled
boards (training/deeppcb_bench.fit_boxing): an annotator's box holds the defect and some of its surround, a
difference holds only the changed pixels.
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

ECC_ITERATIONS = 50
ECC_EPS = 1e-4
CONTRAST_SHARE = 0.5  # a pixel differs when it changes by more than this share of the image's contrast


@dataclass(frozen=True)
class Boxing:
    """How a difference becomes a candidate box: the opening that removes misaligned edges (px, odd), the margin
    added on each side (px) and the least side (px)."""

    opening: int = 3
    margin: int = 0
    least_side: int = 0

    def box(self, x: int, y: int, w: int, h: int) -> tuple[float, float, float, float]:
        cx, cy = x + w / 2, y + h / 2
        bw, bh = max(w + 2 * self.margin, self.least_side), max(h + 2 * self.margin, self.least_side)
        return cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2


def grey(image: np.ndarray) -> np.ndarray:
    return image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)


def align(live: np.ndarray, golden: np.ndarray) -> np.ndarray:
    """The golden image warped onto the live one (same size, same channels): a shift by phase correlation, refined
    to an affine by ECC on blurred greys; when ECC does not converge, the shift alone."""
    if live.shape[:2] != golden.shape[:2]:
        raise ValueError(f"the golden image is {golden.shape[1]}x{golden.shape[0]} px and the live one "
                         f"{live.shape[1]}x{live.shape[0]}: a golden board is photographed (or cropped) like the live")
    a, b = grey(live).astype(np.float32), grey(golden).astype(np.float32)
    (dx, dy), _ = cv2.phaseCorrelate(b, a)
    warp = np.float32([[1, 0, -dx], [0, 1, -dy]])
    try:
        criteria = (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, ECC_ITERATIONS, ECC_EPS)
        _, warp = cv2.findTransformECC(cv2.GaussianBlur(a, (5, 5), 0), cv2.GaussianBlur(b, (5, 5), 0), warp,
                                       cv2.MOTION_AFFINE, criteria, None, 1)
    except cv2.error:
        pass  # ECC found no better fit: keep the shift
    h, w = live.shape[:2]
    return cv2.warpAffine(golden, warp, (w, h), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                          borderMode=cv2.BORDER_REPLICATE)


def difference_regions(live: np.ndarray, aligned: np.ndarray, opening: int) -> list[tuple[int, int, int, int]]:
    """(x, y, w, h) of every connected region where the two differ, after the opening."""
    a, b = grey(live), grey(aligned)
    lo, hi = np.percentile(a, (1, 99))
    limit = max(1.0, CONTRAST_SHARE * float(hi - lo))
    mask = (cv2.absdiff(a, b) > limit).astype(np.uint8)
    if opening > 1:
        mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, np.ones((opening, opening), np.uint8))
    _, _, stats, _ = cv2.connectedComponentsWithStats(mask)
    return [(int(x), int(y), int(w), int(h)) for x, y, w, h, _ in stats[1:]]


def candidates(live: np.ndarray, aligned: np.ndarray, boxing: Boxing) -> list[tuple[float, float, float, float]]:
    """Candidate boxes (x1, y1, x2, y2) in live pixels, one per differing region."""
    return [boxing.box(*r) for r in difference_regions(live, aligned, boxing.opening)]


def window(image: np.ndarray, box: tuple[float, float, float, float], least: int) -> np.ndarray:
    """The square window centred on `box`, its side the box's longer side and at least `least` px, padded by
    repeating the border where it leaves the image: the crop an expert names."""
    x1, y1, x2, y2 = box
    side = int(round(max(x2 - x1, y2 - y1, least)))
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    left, top = int(round(cx - side / 2)), int(round(cy - side / 2))
    h, w = image.shape[:2]
    pad = max(0, -left, -top, left + side - w, top + side - h)
    if pad:
        image = cv2.copyMakeBorder(image, pad, pad, pad, pad, cv2.BORDER_REPLICATE)
        left, top = left + pad, top + pad
    return image[top:top + side, left:left + side]
