"""The neutral board design every CAD format is read into.

Millimetres and degrees as the file has them; what differs between formats is made explicit here, once:
`y_up` says whether the file's y axis points up (Eagle, centroid files: mathematical) or down (KiCad: the screen's),
and rotations are counter-clockwise as seen from the top with the part's zero as its footprint draws it. Pads and
the body are in the footprint's own frame at rotation 0 (x right, y in the file's direction), so a part's window
can cover its body and its joints whatever way it is turned.
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

Rect = tuple[float, float, float, float]  # x0, y0, x1, y1 in mm


class CadError(ValueError):
    """A CAD or centroid file that cannot be read; the message names the file (and the line where it can)."""


def parse_xml(path: Path, kind: str, advice: str) -> ET.Element:
    """The root of an XML CAD file; CadError naming the line where it is not well-formed, and what to do."""
    try:
        return ET.parse(Path(path)).getroot()
    except ET.ParseError as exc:
        raise CadError(f"{path}:{exc.position[0]}: not well-formed {kind} XML ({exc}); {advice}") from None
    except OSError as exc:
        raise CadError(f"{path}: cannot be read ({exc.strerror})") from None


def turned(x: float, y: float, degrees: float) -> tuple[float, float]:
    """(x, y) turned counter-clockwise by `degrees` about the origin, in a y-up frame (a y-up format's footprint
    frame to its board frame, before the part's origin is added)."""
    a = math.radians(degrees)
    c, s = math.cos(a), math.sin(a)
    return x * c - y * s, x * s + y * c


ARC_STEP_DEG = 15.0  # an arc is kept as points this far apart (its box in a part's frame then errs by < 1 %)


def arc_points(start: tuple[float, float], end: tuple[float, float], centre: tuple[float, float],
               clockwise: bool) -> list[tuple[float, float]]:
    """Points along an arc from `start` to `end` about `centre` (start == end: the whole circle), ARC_STEP_DEG
    apart, so a drawing's box in any frame is the arc's and not its named points'."""
    r = math.dist(start, centre)
    a0 = math.atan2(start[1] - centre[1], start[0] - centre[0])
    a1 = math.atan2(end[1] - centre[1], end[0] - centre[0])
    sweep = ((a0 - a1) if clockwise else (a1 - a0)) % (2 * math.pi)
    if sweep < 1e-9:
        sweep = 2 * math.pi
    steps = max(1, math.ceil(math.degrees(sweep) / ARC_STEP_DEG))
    sign = -1.0 if clockwise else 1.0
    turns = (a0 + sign * sweep * k / steps for k in range(steps))
    return [(centre[0] + r * math.cos(a), centre[1] + r * math.sin(a)) for a in turns] + [end]


BARE_HOLES = "nothing to solder (its pins are bare holes: a mounting hole)"  # why a part of unplated holes is out


def first_of(items: list[str], most: int = 12) -> str:
    """Items for a note, as met: the first `most`, and how many more."""
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")


def named_refs(refs: list[str], most: int = 12) -> str:
    """References for a note: sorted, the first `most`, and how many more."""
    return first_of(sorted(refs), most)


def board_ref(ref: str, panel_boards: int) -> str:
    """A part's designator on its board: a panel's `2-R7` is the board's R7 (odbpp_panel.placed_copy)."""
    head, dash, rest = ref.partition("-")
    return rest if panel_boards and dash and head.isdigit() else ref


MIN_BODY_MM = 0.1  # a drawn box narrower than this (a lone line drawn on a body's layer) is no body


def is_body(box: Rect | None) -> bool:
    """The box can be a part's body: it exists and is not a line."""
    return box is not None and min(box[2] - box[0], box[3] - box[1]) >= MIN_BODY_MM


def bounding(points: list[tuple[float, float]]) -> Rect | None:
    """The box holding `points` (a drawing's, an outline's), or None when there are none."""
    if not points:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    return min(xs), min(ys), max(xs), max(ys)


@dataclass(frozen=True)
class Pad:
    x: float  # centre, footprint frame at rotation 0, mm
    y: float
    w: float
    h: float
    smd: bool = True
    mask_margin: float | None = None  # mm the solder mask opens beyond the pad, where the CAD says (a fiducial's ring)
    hole: float | None = None  # a plated pad's drill, mm, where the CAD gives it (a slot: its width)


@dataclass(frozen=True)
class Bought:
    """What the bill of materials says a part is (bom_parts.py): what was bought for its place, which a finding on
    the part traces back to (a supplier's lot, an alternate part)."""
    value: str = ""  # the BOM's, which may say more than the placement's (`Ceramic capacitor, 100 nF`)
    manufacturer: str = ""
    part_number: str = ""  # the manufacturer's (MPN)
    description: str = ""
    package: str = ""  # the BOM's package name (a purchasing name, `SOT-23-5`, beside the footprint's)


SMD, THROUGH_HOLE, PIN_IN_PASTE = "smd", "through-hole", "pin-in-paste"  # how a part is mounted (mounting.py)


def mounted(through_hole: bool, in_paste: bool = False) -> str:
    """A part's mounting from what its pads say: through-hole, placed in paste or not, else surface mount."""
    return (PIN_IN_PASTE if in_paste else THROUGH_HOLE) if through_hole else SMD


@dataclass(frozen=True)
class PlacedPart:
    ref: str
    value: str
    package: str  # the footprint's name without its library (KiCad `Lib:Name` -> Name)
    x_mm: float  # the part's origin, board frame
    y_mm: float
    rotation: float  # degrees, counter-clockwise seen from the top
    side: str  # top | bottom
    pads: tuple[Pad, ...] = ()
    body: Rect | None = None  # the body's outline in the footprint frame (a fab or courtyard drawing), mm
    fiducial: bool = False
    excluded: str | None = None  # why the file itself leaves it out of assembly (dnp, not placed, board only)
    bought: Bought | None = None  # its bill of materials line, where a BOM came with the design
    # how it is mounted (mounting.py's words): surface mount, through-hole, or through-hole placed in paste before
    # reflow (its pads, its BOM or its placement say so); None where no file says (a centroid file without a mount
    # column, until its Gerbers or BOM do)
    mount: str | None = SMD

    @property
    def through_hole(self) -> bool:
        """Its leads go through plated holes (placed in paste or not)."""
        return self.mount in (THROUGH_HOLE, PIN_IN_PASTE)

    @property
    def pin_in_paste(self) -> bool:
        return self.mount == PIN_IN_PASTE

    @property
    def mount_known(self) -> bool:
        return self.mount is not None

    def not_placed(self) -> bool:
        """The assembly leaves it off (DNP, not on the BOM: every reader's reason says `not placed (...)`): its lands
        are on the board, its part is not."""
        return self.excluded is not None and self.excluded.startswith("not placed")

    def extent(self) -> Rect | None:
        """The footprint-frame box holding the body and every pad: what a window must show."""
        boxes = [(p.x - p.w / 2, p.y - p.h / 2, p.x + p.w / 2, p.y + p.h / 2) for p in self.pads]
        if self.body is not None:
            boxes.append(self.body)
        if not boxes:
            return None
        return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def on_board(part: PlacedPart, x: float, y: float) -> tuple[float, float]:
    """A footprint-frame point of `part` in the board frame of a y-up format: the footprint as seen from the top (a
    bottom part's mirrored already: bottom_fit.py) turned counter-clockwise by the part's rotation."""
    dx, dy = turned(x, y, part.rotation)
    return part.x_mm + dx, part.y_mm + dy


def in_frame(part: PlacedPart, point: tuple[float, float]) -> tuple[float, float]:
    """A board point (y-up format) in `part`'s footprint frame: on_board undone."""
    return turned(point[0] - part.x_mm, point[1] - part.y_mm, -part.rotation)


@dataclass
class BoardDesign:
    source: str
    format: str
    parts: list[PlacedPart]
    y_up: bool  # the file's y axis points up (Eagle, centroid files) or down (KiCad)
    outline: Rect | None = None  # the board's edge, bounding box, board frame mm
    notes: list[str] = field(default_factory=list)  # what the reader met and what it did about it
    panel_boards: int = 0  # a panel's copies of the board (their parts named k-REF, routing/panel.py); 0: a board

    def bounds(self) -> Rect:
        """The outline, or (a centroid file has none) the parts' positions grown by 5 mm."""
        if self.outline is not None:
            return self.outline
        if not self.parts:
            raise ValueError(f"{self.source}: no parts and no board outline: nothing to lay out")
        xs, ys = [p.x_mm for p in self.parts], [p.y_mm for p in self.parts]
        return min(xs) - 5.0, min(ys) - 5.0, max(xs) + 5.0, max(ys) + 5.0
