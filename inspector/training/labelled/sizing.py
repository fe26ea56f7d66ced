"""The input an expert's crops call for, read from the crops themselves.

Size: the median crop's longer side, rounded up to a multiple of 16 and kept within [MIN_SIDE, MAX_SIDE]: a
smaller input throws away the detail a defect is made of, a larger one only costs time (crops are rarely shot
finer than the defect needs). Resize policy: when every crop has about one aspect (parts of one type, tiles of
one grid) each is squashed to the square, losing nothing; when aspects differ, each is letterboxed (aspect kept,
padded with the normalised mean grey), so a defect keeps its shape whatever the crop's. Either way the window is
the crop as given: nothing is re-cut around what it contains, so the label cannot leak through where a crop was cut.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_SIDE, MAX_SIDE, STEP = 32, 160, 16
ASPECT_TOLERANCE = 0.05  # aspects within 5% of the median count as one


@dataclass(frozen=True)
class InputFit:
    input_size: int
    fit: str  # squash | letterbox (experts/base.py FITS)
    median_side: float
    aspect_spread: float  # the largest relative distance of a crop's aspect from the median's

    def describe(self) -> str:
        how = ("squashed (one aspect)" if self.fit == "squash" else
               f"letterboxed (aspects differ by up to {100 * self.aspect_spread:.0f}%)")
        return f"{self.input_size}x{self.input_size} px, crops {how}; median longer side {self.median_side:.0f} px"


def choose_input(sizes: list[tuple[int, int]], input_size: int | None = None) -> InputFit:
    """`sizes`: (height, width) of the training crops. `input_size` overrides the size (not the policy)."""
    if not sizes:
        raise ValueError("no crops to size the input from")
    hw = np.asarray(sizes, dtype=np.float64)
    longer = float(np.median(hw.max(axis=1)))
    aspect = hw[:, 0] / hw[:, 1]
    spread = float(np.max(np.abs(aspect / np.median(aspect) - 1.0)))
    size = input_size or int(min(MAX_SIDE, max(MIN_SIDE, STEP * np.ceil(longer / STEP))))
    return InputFit(size, "squash" if spread <= ASPECT_TOLERANCE else "letterbox", longer, spread)
