"""How a file's bottom parts wear their footprints, read from where the file itself says their pins landed.

ODB++ and IPC-2581 keep each package once, drawn as seen from the top, and place a bottom part with a mirror flag
beside its rotation. What the pair means is not the same in every exporter: IPC-2581 as Valor and Cadence read it
turns the package, then mirrors it about the y axis (so the rotation is the one seen from below; KiCad 8.0.8 wrote
it the other way, KiCad issue 19703), and an exporter may write a bottom part's package already mirrored. Both
formats also say where each pin of a placed part is on the board: ODB++'s `TOP` toeprint records under each `CMP`,
IPC-2581's copper-layer pads tied to their part by `PinRef`. The reading under which the package's pins land on
those places is the file's own. One reading mostly holds for a whole file (it is its exporter's), so it is chosen by
the bottom parts whose pins tell the readings apart and given to every bottom part, those without pins included;
a part whose own pins fit only another reading wears that one (KiCad 9's IPC-2581 draws a package first written for
a top part as the top sees it, one first written for a bottom part already mirrored), and a part no reading fits has
its pads put on the file's copper (results/boards.md measures all of it on KiCad 9's own exports).

Every reading gives the design as design.py keeps it: the part's footprint as seen from the top (the package
mirrored where it is mirrored), turned counter-clockwise by `rotation`, in a y-up board frame.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace

from .design import PlacedPart, in_frame, named_refs, turned
from .flip import mirrored_pads, mirrored_rect

Point = tuple[float, float]


@dataclass(frozen=True)
class Reading:
    """One meaning of a bottom part's (package, rotation, mirror flag)."""

    says: str
    mirror: bool  # the package is mirrored (x negated) to give the footprint seen from the top
    reverse: bool  # seen from the top, the part turns the other way from the file's rotation

    def wear(self, part: PlacedPart) -> PlacedPart:
        """The part with its footprint as seen from the top and its rotation as design.py keeps it."""
        if self.mirror:
            part = replace(part, pads=mirrored_pads(part.pads), body=mirrored_rect(part.body))
        return replace(part, rotation=(-part.rotation) % 360.0) if self.reverse else part

    def lands(self, part: PlacedPart, pin: Point) -> Point:
        """Where a package pin at `pin` (package frame) lands on the board under this reading."""
        dx, dy = turned(-pin[0] if self.mirror else pin[0], pin[1], -part.rotation if self.reverse else part.rotation)
        return part.x_mm + dx, part.y_mm + dy


TURNED_THEN_MIRRORED = Reading("turned, then mirrored about the y axis (its rotation as seen from below)", True, True)
MIRRORED_THEN_TURNED = Reading("mirrored about the y axis, then turned (its rotation as seen from the top)", True,
                               False)
DRAWN_MIRRORED = Reading("its package already drawn as seen from the top, turned as seen from the top", False, False)
DRAWN_MIRRORED_BELOW = Reading("its package already drawn as seen from the top, turned as seen from below", False,
                               True)
READINGS = (TURNED_THEN_MIRRORED, MIRRORED_THEN_TURNED, DRAWN_MIRRORED, DRAWN_MIRRORED_BELOW)

TOLERANCE_MM = 0.05  # a pin within this of where a reading puts it agrees: a few times the coarsest export's rounding
#                     (0.01 mm, KiCad's default precision), far below any pin pitch


def _worst(part: PlacedPart, pins: list[tuple[Point, Point]], reading: Reading) -> float:
    """How far the pin `reading` places furthest from where the file says lands from it, mm."""
    return max((math.dist(reading.lands(part, p), q) for p, q in pins), default=math.inf)


def fitting(part: PlacedPart, pins: list[tuple[Point, Point]]) -> list[Reading]:
    """The readings under which every (package place, board place) pin of `part` lands where the file says."""
    return [r for r in READINGS if _worst(part, pins, r) <= TOLERANCE_MM]


def on_pins(part: PlacedPart, pins: list[tuple[Point, Point]], reading: Reading) -> PlacedPart:
    """`part`, already worn by `reading`, with each pad moved to where the file places its pin (the pad's offset from
    its pin kept): for a part whose package no reading puts on its pins, the copper the file draws is what the
    camera sees. A pad is its nearest pin's (package frame)."""
    framed = [((-p[0] if reading.mirror else p[0], p[1]),  # the pin in the footprint frame, and where the file has it
               in_frame(part, q)) for p, q in pins]
    pads = []
    for pad in part.pads:
        at, there = min(framed, key=lambda f: math.dist(f[0], (pad.x, pad.y)))
        pads.append(replace(pad, x=there[0] + pad.x - at[0], y=there[1] + pad.y - at[1]))
    return replace(part, pads=tuple(pads))


def bottom_footprints(parts: list[PlacedPart], pins: dict[str, list[tuple[Point, Point]]], default: Reading,
                      why_default: str, where: str) -> tuple[list[PlacedPart], list[str]]:
    """`parts` with every bottom part wearing its footprint as the file's pins show (`pins`: reference -> its pins'
    package and board places, as the file gives them; the package frame as read, unmirrored), and what was
    decided, for the import's notes. The file's reading is the one most bottom parts' pins agree on (with none to
    tell, `default`, for the reason `why_default` gives); a part whose own pins fit only other readings wears the
    first of those (an exporter may draw one package mirrored and another not), and a part no reading puts on its
    pins wears the reading that comes nearest, its pads moved to where the file's pins are."""
    bottom = [p for p in parts if p.side == "bottom"]
    if not bottom:
        return parts, []
    fits = {p.ref: fitting(p, pins[p.ref]) for p in bottom if pins.get(p.ref)}
    telling = [f for f in fits.values() if 0 < len(f) < len(READINGS)]  # a pattern every reading places alike: none
    votes = Counter(r for f in telling for r in f)
    if votes:
        reading, agree = max(votes.items(), key=lambda kv: (kv[1], -READINGS.index(kv[0])))
        notes = [f"{where}: bottom parts read as {reading.says}: where the file places their pins says so "
                 f"({agree} of the {len(telling)} bottom parts whose pins tell the readings apart)"]
    else:
        reading = default
        notes = [f"{where}: the file does not say where its bottom parts' pins land in a way that tells how to read "
                 f"them: read as {reading.says}, {why_default}; check a bottom part's window in the preview"]
    own: list[str] = []
    moved: list[str] = []
    out = []
    for part in parts:
        fit = fits.get(part.ref) if part.side == "bottom" else None
        if part.side != "bottom":
            out.append(part)
        elif fit is None or reading in fit:
            out.append(reading.wear(part))
        elif fit:
            own.append(part.ref)
            out.append(fit[0].wear(part))
        else:  # its body worn by the reading that comes nearest, its pads on the file's copper
            moved.append(part.ref)
            nearest = min(READINGS, key=lambda r: _worst(part, pins[part.ref], r))
            out.append(on_pins(nearest.wear(part), pins[part.ref], nearest))
    if own:
        notes.append(f"{where}: {len(own)} bottom part(s) read otherwise, as their own pins show (their packages "
                     f"drawn another way): {named_refs(own)}")
    if moved:
        notes.append(f"{where}: {len(moved)} bottom part(s) whose package no reading puts on the pins the file "
                     f"places: their pads put where the file's pins are: {named_refs(moved)}; check their windows in "
                     "the preview")
    return out, notes

