"""A design as a camera over its bottom side sees it: the board turned over about its vertical (left-right) axis.

Every reader gives the board as seen from the top, bottom parts included (their footprints mirrored as the CAD
places them). A camera inspecting the bottom side, after the board is turned over, sees that view mirrored left to
right: each position's x negated, each footprint mirrored with it (its pads' and body's x negated in its own
frame), each rotation reversed (counter-clockwise seen from the top is clockwise seen from below). The result is
read by the import as a top view, so the rule set's windows, lands and outline are where the photo has them. A
board turned over about its horizontal axis instead is the same view turned half round, which registration finds.
"""
from __future__ import annotations

from dataclasses import replace

from .design import BoardDesign, Pad, PlacedPart, Rect


def mirrored_rect(r: Rect | None) -> Rect | None:
    """A footprint-frame box mirrored left to right (x negated)."""
    return None if r is None else (-r[2], r[1], -r[0], r[3])


def mirrored_pads(pads: tuple[Pad, ...]) -> tuple[Pad, ...]:
    """A footprint's pads mirrored left to right (x negated) in its own frame."""
    return tuple(Pad(-q.x, q.y, q.w, q.h, q.smd, q.mask_margin) for q in pads)


def _mirror_part(p: PlacedPart) -> PlacedPart:
    return replace(p, x_mm=-p.x_mm, rotation=(-p.rotation) % 360.0, pads=mirrored_pads(p.pads),
                   body=mirrored_rect(p.body))


def seen_from_below(design: BoardDesign) -> BoardDesign:
    """The design mirrored left to right: what the bottom side's camera sees, as a top view."""
    return replace(design, parts=[_mirror_part(p) for p in design.parts], outline=mirrored_rect(design.outline),
                   notes=[*design.notes, "the bottom side as its camera sees it: the board turned over about its "
                                         "vertical axis (x mirrored; board/flip.py)"])
