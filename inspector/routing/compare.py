"""Bare-board comparison in a rule set: a board inspected by where it differs from its golden board.

A bare board (no parts: copper, laminate, holes) has no bodies to cut; AOI compares it with its golden board and
names every difference. Such a rule set lays `window` components over the board (the windows tile it, or cover
only the area to inspect); every difference whose centre falls in a window becomes one part of that window
(`W2-3.1`), named by the window type's expert, which reads the difference beside the golden board's (a classifier
taught with `--reference`). This module is only the schema and the tiling; the comparison itself is
ingest/compare.py, and how a difference becomes a box (the opening, margin and least side) is fitted on labelled
boards (training/deeppcb_bench.fit_boxing) or chosen by the engineer.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..yamlio import Fields

WINDOW = "window"  # the shape of a bare-board window: nothing is drawn or cut at it; differences are found in it


@dataclass(frozen=True)
class CompareRules:
    """How differences from the golden board are found and boxed."""

    opening: int = 3  # px, odd: an opening that removes edges left a pixel off by the alignment
    margin: int = 0  # px added on each side of a difference's own box (an annotator's box holds some surround)
    least_side: int = 0  # px: the least side of a box
    context: float = 1.5  # the crop an expert reads: the box's longer side, at least context x least_side


def parse_compare(f: Fields) -> CompareRules:
    f.unknown({"opening", "margin", "least_side", "context"})
    opening = f.number("opening", 3, minimum=1, integer=True)
    if opening % 2 == 0:
        raise f.error("opening", f"must be odd (a square opening has a centre pixel), got {opening}")
    return CompareRules(opening=opening, margin=f.number("margin", 0, minimum=0, integer=True),
                        least_side=f.number("least_side", 0, minimum=0, integer=True),
                        context=float(f.number("context", 1.5, minimum=1.0)))


def tiles(width: int, height: int, side: int) -> list[tuple[str, int, int]]:
    """(designator W<row>-<col>, centre x, centre y) of square windows of `side` px tiling a board: in steps of
    `side`, the last row and column moved in to end at the board's edge (so they overlap the one before)."""
    if side > min(width, height):
        raise ValueError(f"a window of {side} px does not fit a {width}x{height} board")

    def starts(extent: int) -> list[int]:
        out = list(range(0, extent - side + 1, side))
        return out if out[-1] + side == extent else [*out, extent - side]
    return [(f"W{r + 1}-{c + 1}", x + side // 2, y + side // 2)
            for r, y in enumerate(starts(height)) for c, x in enumerate(starts(width))]
