"""A fiducial's solder-mask opening where a CAD format keeps it apart from the pad (IPC-2581's and ODB++'s solder
mask layers: the opening is a feature of its own at the mark's place), made the dot's `mask_margin`.

The opening is the bare ring registration matches a mark with (routing/fiducials.py): too wide a guess and the mask
beyond it spoils the match. A format's reader gathers the openings on each side's mask layer in the board frame;
here each fiducial's dot is given the one centred on it. A fiducial with no opening found keeps no margin (the rule
set's default ring), which is what the reader would give without this.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .design import Pad, PlacedPart, on_board

CENTRED = 0.25  # of the dot's size: an opening whose centre lies within this of the dot's is the dot's own
MIN_CENTRED_MM = 0.05  # ... or within this (a dot of a few tenths of a millimetre, coordinates rounded by the export)


@dataclass(frozen=True)
class Opening:
    """A flash on a solder mask layer: where the mask opens, board frame mm."""
    x: float
    y: float
    size: float  # its smaller extent (a circle's diameter), mm


def dot(part: PlacedPart) -> Pad | None:
    """A fiducial's mark: its largest pad (a footprint may add a smaller keep-out pad or none)."""
    return max(part.pads, key=lambda p: min(p.w, p.h), default=None)


def with_openings(parts: list[PlacedPart], openings: dict[str, list[Opening]],
                  named: dict[str, float] | None = None) -> list[PlacedPart]:
    """`parts` with each fiducial's dot given the margin of the mask opening on its side centred on it (the
    smallest such opening wider than the dot), or of the opening its file ties to it by name (`named`: reference ->
    opening size, mm; IPC-2581's PinRef)."""
    out = []
    for part in parts:
        mark = dot(part) if part.fiducial else None
        if mark is None or mark.mask_margin is not None:
            out.append(part)
            continue
        size = min(mark.w, mark.h)
        wider = [named[part.ref]] if named and part.ref in named and named[part.ref] > size else []
        if not wider:
            x, y = on_board(part, mark.x, mark.y)
            reach = max(MIN_CENTRED_MM, CENTRED * size)
            wider = [o.size for o in openings.get(part.side, ()) if o.size > size and math.hypot(o.x - x, o.y - y)
                     <= reach]
        if not wider:
            out.append(part)
            continue
        margin = round((min(wider) - size) / 2, 6)
        pads = tuple(replace(p, mask_margin=margin) if p is mark else p for p in part.pads)
        out.append(replace(part, pads=pads))
    return out
