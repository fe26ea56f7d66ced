"""A board's fabrication Gerbers: the pads on each side and the board's outline, for a placement file beside them.

The handoff a plant most often gets from its designer is a fabrication set (Gerber RS-274X or X2: copper, solder
mask, paste, the outline; as a folder or a zip) with a placement (centroid) file and a BOM. A placement file alone
gives each part a point and a package name, and the window only the library's body (centroid.py): a QFN's toes, a
chip's fillets, a connector's pegs fall outside it. The Gerbers hold what is missing: every pad's copper, and the
board's edge that teaching registers photos on. gerbonara reads the files and tells their layers apart (by X2's
`FileFunction`, else by the usual names of KiCad, Altium/Protel, Eagle and others).

A pad is a copper flash (or a small copper region: a custom or macro-less pad) whose centre the solder mask opens;
copper under the mask (a tented via, a zone) is not, and copper drawn inside a pad (a via in it, a flash over a
macro-less pad's outline) is that pad. Where the file is X2 with component attributes (`%TO.P,R1,2*%`),
each pad names its part; where not, gerber_parts.py gives pads to parts by place. A pad is a through-hole pad
where the set's drill files put a plated hole a lead fits through in it (LEAD_HOLE_MM: a via, a thermal via in a
QFN's pad, is narrower; a wider hole the drill file's X2 attributes call a via's, `ViaDrill`, is a via too), or, in
a set without drill files, where the other side opens a pad at the same place. A
pad's `mask_margin` is how far its own opening reaches beyond it (a fiducial's bare ring).
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

from .design import CadError, Rect
from .mounting import LEAD_HOLE_MM

SIDES = ("top", "bottom")
MAX_PAD_MM = 15.0  # a copper region larger than this on a side is a zone or a plane, not a pad
SAME_PLACE_MM = 0.05  # without drill files: a pad on the other side this near is the same through-hole pad
OPENING_SLACK_MM = 0.5  # a flashed pad may reach this far past its mask opening (a mask-defined pad) and be a pad
# ... a copper region (a custom pad) only this far: a zone's scrap beside a pad reaches under the mask
REGION_SLACK_MM = 0.05
MIN_REGION_MM = 0.15  # a copper region narrower than this is a zone's sliver in a pad's opening, not a pad
CONTAINED_MM = 0.01  # copper this near inside another pad's box is inside it
VIA_FUNCTIONS = ("ViaPad",)  # X2 aperture functions of copper that is never a part's pad


@dataclass(frozen=True)
class GerberPad:
    x: float  # centre, the Gerbers' frame (y up, as seen from the top), mm
    y: float
    w: float  # the copper's box, mm
    h: float
    side: str  # top | bottom
    ref: str | None = None  # the part the file ties it to (X2 `.P` / `.C`), None when the file does not say
    through_hole: bool = False
    mask_margin: float | None = None  # its own mask opening's reach beyond it, where the opening is its alone


@dataclass
class GerberBoard:
    source: str
    pads: list[GerberPad]
    outline: Rect | None  # the board's edge (its box), the Gerbers' frame, mm; None when the set has no outline layer
    attributed: bool  # the pads name their parts (X2 component attributes)
    notes: list[str] = field(default_factory=list)


def _box(obj) -> Rect:
    from gerbonara.utils import MM
    (x0, y0), (x1, y1) = obj.bounding_box(MM)
    return x0, y0, x1, y1


def _attrs(obj) -> dict:
    attrs = getattr(obj, "attrs", None)  # gerbonara keeps no attributes on regions (a class field stands there)
    return attrs if isinstance(attrs, dict) else {}


def _aperture_function(obj) -> str:
    for name, values in getattr(getattr(obj, "aperture", None), "attrs", ()) or ():
        if name == ".AperFunction" and values:
            return str(values[0])
    return ""


def _open(path: Path):
    """The set's layer stack (a folder or a zip), or CadError naming what is wrong and what to do."""
    from gerbonara import LayerStack
    if not path.exists():
        raise CadError(f"{path}: no such Gerber folder or zip")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gerbonara warns of every odd statement a CAM tool wrote
            stack = LayerStack.open(path, lazy=True)
    except Exception as exc:  # gerbonara raises what its parsers met: name it, with the set
        raise CadError(f"{path}: not a Gerber set gerbonara can read ({exc}); give the folder or zip of the "
                       "board's fabrication Gerbers") from None
    return stack


def _layer(stack, side: str, use: str):
    """The parsed layer, None where the set lacks it; CadError naming the file where it cannot be parsed."""
    lazy = stack.graphic_layers.get((side, use))
    if lazy is None:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return getattr(lazy, "instance", lazy)
    except Exception as exc:
        name = getattr(lazy, "original_path", None) or f"the {side} {use} layer"
        raise CadError(f"{name}: not a Gerber file gerbonara can read ({exc}); export it again, or leave it out "
                       "of the set") from None


def _edge(layer) -> Rect:
    """The board's edge: the outline layer's box, less half its strokes' width (the edge is the strokes' middle, as
    a board file draws it)."""
    from gerbonara.utils import MM
    x0, y0, x1, y1 = _box(layer)
    widths = [a.equivalent_width(MM) for o in layer.objects
              if (a := getattr(o, "aperture", None)) is not None and hasattr(a, "equivalent_width")]
    half = max(widths) / 2 if widths else 0.0
    return x0 + half, y0 + half, x1 - half, y1 - half


def _openings(mask) -> list[Rect]:
    return [_box(o) for o in mask.objects if getattr(o, "polarity_dark", True) and type(o).__name__ in
            ("Flash", "Region")]


class BoxGrid:
    """Boxes binned by place, so a point's boxes are found without a walk over all of them."""

    CELL = 2.0

    def __init__(self, boxes: list[Rect]) -> None:
        self.boxes = boxes
        self.cells: dict[tuple[int, int], list[int]] = {}
        for i, (x0, y0, x1, y1) in enumerate(boxes):
            for cx in range(int(x0 // self.CELL), int(x1 // self.CELL) + 1):
                for cy in range(int(y0 // self.CELL), int(y1 // self.CELL) + 1):
                    self.cells.setdefault((cx, cy), []).append(i)

    def near(self, x: float, y: float, reach: float) -> list[int]:
        """The boxes of the cells within `reach` of (x, y) (a superset: the caller measures)."""
        found: set[int] = set()
        for cx in range(int((x - reach) // self.CELL), int((x + reach) // self.CELL) + 1):
            for cy in range(int((y - reach) // self.CELL), int((y + reach) // self.CELL) + 1):
                found.update(self.cells.get((cx, cy), ()))
        return sorted(found)

    def holding(self, x: float, y: float) -> list[int]:
        here = self.cells.get((int(x // self.CELL), int(y // self.CELL)), ())
        return [i for i in here
                if self.boxes[i][0] <= x <= self.boxes[i][2] and self.boxes[i][1] <= y <= self.boxes[i][3]]


def _side_pads(copper, mask, side: str) -> tuple[list[GerberPad], bool]:
    """The side's pads, and whether the file tied any of them to a part."""
    grid = BoxGrid(_openings(mask)) if mask is not None else None
    found, attributed = [], False
    for obj in copper.objects:
        kind = type(obj).__name__
        if kind not in ("Flash", "Region") or not getattr(obj, "polarity_dark", True):
            continue
        attrs = _attrs(obj)
        pin = attrs.get(".P") or attrs.get(".C")
        if _aperture_function(obj) in VIA_FUNCTIONS and not pin:
            continue
        x0, y0, x1, y1 = _box(obj)
        if max(x1 - x0, y1 - y0) > MAX_PAD_MM or (kind == "Region" and min(x1 - x0, y1 - y0) < MIN_REGION_MM):
            continue
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        margin = None
        if grid is not None:
            slack = OPENING_SLACK_MM if kind == "Flash" else REGION_SLACK_MM
            holding = [i for i in grid.holding(cx, cy)
                       if grid.boxes[i][0] - slack <= x0 and grid.boxes[i][1] - slack <= y0
                       and x1 <= grid.boxes[i][2] + slack and y1 <= grid.boxes[i][3] + slack]
            if not holding:
                continue  # under the mask: a tented via, a zone's island
            own = min((grid.boxes[i] for i in holding), key=lambda b: (b[2] - b[0]) * (b[3] - b[1]))
            margin = min(x0 - own[0], y0 - own[1], own[2] - x1, own[3] - y1)
        attributed |= pin is not None
        found.append(GerberPad(cx, cy, x1 - x0, y1 - y0, side, str(pin[0]) if pin else None, mask_margin=margin))
    return _whole(found), attributed


def _whole(pads: list[GerberPad]) -> list[GerberPad]:
    """The pads, each once: copper drawn inside another pad's box (a macro-less rounded pad's outline and a flash
    over it, a via in the pad, the same pad twice) is that pad, not one of its own; a pad the file names a part for
    stays itself."""
    boxes = [(q.x - q.w / 2, q.y - q.h / 2, q.x + q.w / 2, q.y + q.h / 2) for q in pads]
    grid = BoxGrid(boxes)

    def within(i: int, j: int) -> bool:
        a, b = boxes[i], boxes[j]
        return a[0] >= b[0] - CONTAINED_MM and a[1] >= b[1] - CONTAINED_MM and a[2] <= b[2] + CONTAINED_MM \
            and a[3] <= b[3] + CONTAINED_MM

    def area(i: int) -> float:
        return pads[i].w * pads[i].h

    def merged(i: int) -> bool:
        return any(j != i and within(i, j) and (area(j) > area(i) or area(j) == area(i) and j < i)
                   for j in grid.holding(pads[i].x, pads[i].y))

    return [q for i, q in enumerate(pads) if q.ref is not None or not merged(i)]


def _holes(stack, notes: list[str]) -> list[Rect] | None:
    """The plated holes a lead goes through (LEAD_HOLE_MM or wider; a slot by its width), from the set's drill files
    (those not named non-plated); None where the set has no drill file. A drill file without a hole is noted."""
    from gerbonara.utils import MM
    layers = [lazy for lazy in stack.drill_layers if lazy is not stack.drill_npth]
    if stack.drill_pth is None and not layers and stack.drill_npth is None:
        return None
    if not layers:
        notes.append("the set's only drill file is the non-plated holes' (NPTH): no pad is taken as through-hole; "
                     "where the board has plated holes, give their drill file (PTH) too")
    holes: list[Rect] = []
    for lazy in layers:
        path = getattr(lazy, "original_path", None)
        text = Path(path).read_text(encoding="utf-8", errors="replace") if path is not None else None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                drill = _drill(lazy, text)
        except Exception as exc:
            raise CadError(f"{path or 'a drill file'}: not an Excellon drill file gerbonara can read ({exc}); export "
                           "it again, or leave it out of the set") from None
        if not drill.objects:
            notes.append(f"{path or 'a drill file'}: no holes read from it (is it an Excellon drill file?): no pad is "
                         "taken as through-hole by it")
        vias = via_widths(text) if text is not None else set()
        for obj in drill.objects:
            if getattr(getattr(obj, "aperture", None), "plated", None) is False:
                continue
            (x0, y0), (x1, y1) = obj.bounding_box(MM)
            width = obj.aperture.equivalent_width(MM) if hasattr(obj, "aperture") else min(x1 - x0, y1 - y0)
            if width >= LEAD_HOLE_MM and round(width, 3) not in vias:  # a slot by its width, whatever way it runs
                holes.append((x0, y0, x1, y1))
    return holes


_TOOL_FUNCTION = re.compile(r"^;\s*#@!\s*TA\.AperFunction,([^\r\n]*)\r?\n\s*T(\d+)C([\d.]+)", re.MULTILINE)
_INCH = re.compile(r"^\s*INCH\b", re.MULTILINE)


def via_widths(text: str) -> set[float]:
    """The hole widths (mm, to the micron) an Excellon file's X2 attributes give to vias alone (`TA.AperFunction`
    `...,ViaDrill` before a tool's definition, as KiCad writes them): a via is no lead's hole however wide. A width
    that a via's tool and another tool share is left out: which hole is which is then unknown."""
    scale = 25.4 if _INCH.search(text) else 1.0
    functions: dict[float, set[bool]] = {}
    for function, _tool, diameter in _TOOL_FUNCTION.findall(text):
        width = round(float(diameter) * scale, 3)
        functions.setdefault(width, set()).add(function.strip().endswith("ViaDrill"))
    return {w for w, via in functions.items() if via == {True}}


_SLOT = re.compile(r"^([XY][-+.\dXY]*)G85([XY][-+.\dXY]*)\s*$", re.MULTILINE)


def _drill(lazy, text: str | None):  # noqa: ANN001, ANN202 - a gerbonara LazyCamFile (or file), its text -> Excellon
    """The parsed drill file. Its G85 slots (`X1Y1G85X2Y2`, KiCad's and Altium's default for an oval hole), which
    gerbonara does not read, are given to it as the routed slots it reads (`G00X1Y1 M15 G01X2Y2 M16 G05`), the same
    hole."""
    from gerbonara import ExcellonFile
    if text is None:
        return lazy
    if "G85" not in text:
        return lazy.instance
    return ExcellonFile.from_string(_SLOT.sub(r"G00\1\nM15\nG01\2\nM16\nG05", text),
                                    filename=str(lazy.original_path))


def _through_holes(pads: list[GerberPad], holes: list[Rect] | None) -> list[GerberPad]:
    """Each pad marked through-hole where a lead's plated hole is in it (`holes`, the drill files'), or, for a set
    without drill files, where the other side has a pad at the same place."""
    if holes is not None:
        grid = BoxGrid([((x0 + x1) / 2, (y0 + y1) / 2, (x0 + x1) / 2, (y0 + y1) / 2) for x0, y0, x1, y1 in holes])
        return [replace(p, through_hole=any(abs(grid.boxes[i][0] - p.x) <= p.w / 2 and
                                            abs(grid.boxes[i][1] - p.y) <= p.h / 2
                                            for i in grid.near(p.x, p.y, max(p.w, p.h) / 2))) for p in pads]
    grids = {s: BoxGrid([(p.x - SAME_PLACE_MM, p.y - SAME_PLACE_MM, p.x + SAME_PLACE_MM, p.y + SAME_PLACE_MM)
                       for p in pads if p.side == s]) for s in SIDES}
    return [replace(p, through_hole=bool(grids["bottom" if p.side == "top" else "top"].holding(p.x, p.y)))
            for p in pads]


def read_gerbers(path: Path) -> GerberBoard:
    """The pads of both sides and the outline of the Gerber set at `path` (a folder or a zip)."""
    path = Path(path)
    stack = _open(path)
    notes: list[str] = []
    pads: list[GerberPad] = []
    attributed = False
    for side in SIDES:
        copper = _layer(stack, side, "copper")
        if copper is None:
            notes.append(f"no {side} copper layer in the set: no {side} pads")
            continue
        mask = _layer(stack, side, "mask")
        if mask is None:
            notes.append(f"no {side} solder mask layer in the set: every {side} copper flash is taken as a pad "
                         "(vias too)")
        found, named = _side_pads(copper, mask, side)
        pads += found
        attributed |= named
    if not pads:
        raise CadError(f"{path}: no pads found on either side's copper: give the folder or zip holding the board's "
                       "copper and solder mask Gerbers")
    outline = None
    edge = _layer(stack, "mechanical", "outline")
    if edge is not None and edge.objects:
        outline = _edge(edge)
    else:
        notes.append("no board outline layer in the set: the board's edge is the parts' extent")
    holes = _holes(stack, notes)
    if holes is None:
        notes.append("no drill file in the set: a pad is taken as through-hole where the other side has a pad at the "
                     "same place (two SMD parts stacked on the two sides read as through-hole); give the drill "
                     "files with the Gerbers")
    return GerberBoard(str(path), _through_holes(pads, holes), outline, attributed, notes)
