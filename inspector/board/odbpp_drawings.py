"""An ODB++ job's assembly drawings: the document layers that draw its parts' bodies, found by what they draw.

ODB++ gives a layer no function beyond `TYPE=DOCUMENT`, and its name is the CAD tool's or the designer's (KiCad
writes F.FAB, or `Top 3D Body` where a board's user renamed F.Fab), so the reader does not go by names. A document
layer is read as one side's assembly drawing when most of its drawings lie on that side's parts (drawn_bodies.py
gives each to the part it lies on) and they give at least a quarter of those parts a body that is not their outline
again (a courtyard layer draws the outline KiCad writes for the package); of several, the one that gives the most,
each layer for one side. Layers named as courtyards or place bounds are not tried.

A features file (`steps/<step>/layers/<layer>/features`) holds the symbol table (`$<n> <name> [I|M]`), the
attribute names (`@<n> <name>`) and the features: `L` lines and `A` arcs (`A xs ys xe ye xc yc sym P|N dcode
Y|N`, Y clockwise), `P` pads (`P x y sym P|N dcode orient [angle]`: the symbol's shape at the place, orient 0-7
quarter turns and mirrors, 8 and 9 any clockwise angle), `S` surfaces (their `OB`/`OS`/`OC` contours to `SE`).
Text (`T`, barcodes `B`, and strokes carrying the `.string` attribute: text drawn as lines) and negative features
are not bodies and are passed over, as are pads whose symbol this reader cannot size (a user's own symbol).
"""
from __future__ import annotations

import re

from .design import CadError, PlacedPart, arc_points
from .drawn_bodies import Drawing, box_points, circle_points, drawn_boxes, is_outline
from .odbpp_mask import SYMBOL_UNIT

TEXT_ATTRIBUTE = ".string"
NOT_BODIES = re.compile(r"court|crtyd|place_?bound", re.IGNORECASE)
ON_PARTS = 0.5  # of a layer's drawings: a layer with fewer lying on one side's parts does not draw that side's bodies
ENOUGH = 0.05  # of a side's parts: a layer giving fewer a body is not their drawing (a notes layer that marks a few;
#                 a board's copper-only parts, stitching vias and logos, have none)
_SYMBOL = re.compile(r"^([a-z_]+?)(\d+(?:\.\d+)?)(?:x(\d+(?:\.\d+)?))?(?:x(\d+(?:\.\d+)?))?(?:x.*)?$")
_ROUND = {"r", "donut_r", "s", "donut_s"}  # sized by one number (a square's side is its width and height)
_BOXED = {"rect", "oval", "di", "oct", "el", "donut_rc", "donut_o", "donut_sr", "hex_l", "hex_s", "bfr", "bfs",
          "tri", "oval_h"}


def document_layers(rows: list[tuple[int, str, str]]) -> list[str]:
    """The matrix's document layers (row, name, TYPE) that may draw bodies, in row order."""
    return [name for _row, name, kind in sorted(rows) if kind == "DOCUMENT" and not NOT_BODIES.search(name)]


def _symbol(name: str, unit: float) -> tuple[str, float, float] | None:
    """(shape, width, height) of a standard symbol along its drawn line, mm; None: not one this reader sizes."""
    m = _SYMBOL.match(name.lower())
    if m is None or m.group(1) not in _ROUND | _BOXED:
        return None
    shape, a = m.group(1), float(m.group(2)) * unit
    b = float(m.group(3)) * unit if m.group(3) else None
    if shape in _ROUND:
        size = (a + b) / 2 if shape.startswith("donut") and b is not None else a  # a ring: its middle line
        return ("circle" if shape.endswith("r") else "box"), size, size
    if b is None:
        return None
    if shape in ("donut_rc", "donut_o", "donut_sr") and m.group(4):
        line = float(m.group(4)) * unit  # a rectangle drawn as a line: its middle line
        return "box", a - line, b - line
    return "box", a, b


def _numbers(tokens: list[str], count: int, where: str) -> list[float]:
    """The first `count` tokens as numbers; CadError naming the line where there are fewer or one is not."""
    try:
        if len(tokens) < count:
            raise ValueError
        return [float(t) for t in tokens[:count]]
    except ValueError:
        raise CadError(f"{where}: expected {count} number{'s' if count > 1 else ''}, read "
                       f"{' '.join(tokens[:count])!r}") from None


def drawings(lines: list[str], scale: float, where: str) -> list[Drawing]:
    """The body drawings of one features file, board frame mm (`scale`: mm per the file's unit)."""
    unit = SYMBOL_UNIT["INCH"] if scale > 1 else SYMBOL_UNIT["MM"]
    symbols: dict[str, tuple[str, float, float] | None] = {}
    text_attr: str | None = None
    out: list[Drawing] = []
    surface: list[tuple[float, float]] | None = None
    for n, line in enumerate(lines, 1):
        body, _, attrs = line.partition(";")
        tokens = body.split()
        if not tokens:
            continue
        head, at = tokens[0], f"{where}:{n}"
        if head.startswith("$") and len(tokens) >= 2:
            own = {"I": SYMBOL_UNIT["INCH"], "M": SYMBOL_UNIT["MM"]}.get(tokens[2].upper()) if len(tokens) > 2 else None
            symbols[head[1:]] = _symbol(tokens[1], own or unit)
        elif head.startswith("@") and len(tokens) >= 2 and tokens[1] == TEXT_ATTRIBUTE:
            text_attr = head[1:]
        elif surface is not None:
            if head in ("OB", "OS"):
                x, y = _numbers(tokens[1:], 2, at)
                surface.append((x * scale, y * scale))
            elif head == "OC" and surface:
                xe, ye, xc, yc = (v * scale for v in _numbers(tokens[1:], 4, at))
                cw = len(tokens) > 5 and tokens[5].upper() == "Y"
                surface.extend(arc_points(surface[-1], (xe, ye), (xc, yc), cw)[1:])
            elif head == "SE":
                if surface:
                    out.append(Drawing(tuple(surface)))
                surface = None
        elif text_attr is not None and any(a.split("=", 1)[0].strip() == text_attr for a in attrs.split(",")):
            continue
        elif head == "L":
            if len(tokens) < 7:
                raise CadError(f"{at}: a line needs <xs> <ys> <xe> <ye> <symbol> <P|N>; it has {len(tokens) - 1}")
            if tokens[6].upper() == "P":
                xs, ys, xe, ye = (v * scale for v in _numbers(tokens[1:], 4, at))
                out.append(Drawing(((xs, ys), (xe, ye)), stroke=True))
        elif head == "A":
            if len(tokens) < 9:
                raise CadError(f"{at}: an arc needs <xs> <ys> <xe> <ye> <xc> <yc> <symbol> <P|N>; it has "
                               f"{len(tokens) - 1}")
            if tokens[8].upper() == "P":
                xs, ys, xe, ye, xc, yc = (v * scale for v in _numbers(tokens[1:], 6, at))
                cw = len(tokens) > 10 and tokens[10].upper() == "Y"
                out.append(Drawing(tuple(arc_points((xs, ys), (xe, ye), (xc, yc), cw)), stroke=True))
        elif head == "P":
            if len(tokens) < 5:
                raise CadError(f"{at}: a pad needs <x> <y> <symbol> <P|N>; it has {len(tokens) - 1}")
            shape = symbols.get(tokens[3])
            if tokens[4].upper() != "P" or shape is None:
                continue
            x, y = (v * scale for v in _numbers(tokens[1:], 2, at))
            orient = tokens[6] if len(tokens) > 6 else "0"
            angle = (_numbers(tokens[7:], 1, at)[0] if orient in ("8", "9") and len(tokens) > 7
                     else 90.0 * (int(orient) % 4) if orient.isdigit() else 0.0)
            kind, w, h = shape
            pts = circle_points((x, y), w) if kind == "circle" else box_points((x, y), w, h, -angle)
            out.append(Drawing(tuple(pts)))
        elif head == "S":
            surface = [] if len(tokens) > 1 and tokens[1].upper() == "P" else None
    return out


def body_layers(parts: list[PlacedPart], layers: dict[str, list[Drawing]]) -> dict[str, tuple[str, dict]]:
    """Side -> (the document layer read as its assembly drawing, reference -> drawn box), for each side some layer
    draws (module docstring)."""
    found = []
    for side in ("top", "bottom"):
        mine = {p.ref: p for p in parts if p.side == side and p.extent() is not None}
        if not mine:
            continue
        for name, drawn in layers.items():
            given, held, total = drawn_boxes(list(mine.values()), drawn)
            boxes = {ref: box for ref, box in given.items() if not is_outline(mine[ref], box)}
            if held >= ON_PARTS * total and len(boxes) >= ENOUGH * len(mine):
                found.append((len(boxes), side, name, boxes))
    chosen: dict[str, tuple[str, dict]] = {}
    for _given, side, name, boxes in sorted(found, key=lambda s: -s[0]):
        if side not in chosen and all(name != n for n, _b in chosen.values()):
            chosen[side] = (name, boxes)
    return chosen
