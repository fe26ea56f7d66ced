"""An ODB++ job's solder mask layers: the openings their features flash, read for the fiducials' bare rings
(mask_openings.py).

The matrix marks a mask layer `TYPE=SOLDER_MASK`; the side it covers is its place in the stack (`ROW`): above the
first signal layer the top, below the last the bottom (with no signal layer in the matrix: the first mask layer
the top, a second the bottom). Its `steps/<step>/layers/<layer>/features` file holds `UNITS=MM|INCH`, the symbol
table (`$<n> <name> [I|M]`: `r<d>` round, `s<d>` square, `rect<w>x<h>` and `oval<w>x<h>`, sized in mils in an inch
file and microns in a millimetre one unless the line's own I or M says) and the pads (`P <x> <y> <symbol> <P|N>
...`): a positive pad on a mask layer is an opening. Other symbols (user-defined ones, donuts, thermals) open no
ring this reader can measure and are passed over.
"""
from __future__ import annotations

import re

from .design import CadError
from .mask_openings import Opening

SYMBOL_UNIT = {"MM": 0.001, "INCH": 0.0254}  # a symbol's size unit in mm: microns in a metric file, mils otherwise
_SIZED = re.compile(r"^(r|s)(\d+(?:\.\d+)?)$|^(rect|oval)(\d+(?:\.\d+)?)x(\d+(?:\.\d+)?)(?:x.*)?$")


def mask_layers(rows: list[tuple[int, str, str]]) -> dict[str, str]:
    """Solder mask layer name -> the side it covers, from the matrix's layers (row, name, TYPE)."""
    masks = sorted((row, name) for row, name, kind in rows if kind == "SOLDER_MASK")
    signals = sorted(row for row, _name, kind in rows if kind in ("SIGNAL", "POWER_GROUND", "MIXED"))
    sides = {}
    for i, (r, name) in enumerate(masks):
        if signals:
            sides[name] = "top" if r < signals[0] else "bottom" if r > signals[-1] else ""
        else:
            sides[name] = "top" if i == 0 else "bottom"
    return {name: side for name, side in sides.items() if side}


def _symbol_size(name: str, unit: float) -> float | None:
    """The smaller extent of a standard symbol, mm (None: a symbol this reader does not size)."""
    m = _SIZED.match(name.lower())
    if m is None:
        return None
    if m.group(1):
        return float(m.group(2)) * unit
    return min(float(m.group(4)), float(m.group(5))) * unit


def openings(lines: list[str], scale: float, where: str) -> list[Opening]:
    """The positive pads of one mask layer's features file, board frame mm (`scale`: mm per the file's unit)."""
    unit = SYMBOL_UNIT["INCH"] if scale > 1 else SYMBOL_UNIT["MM"]
    sizes: dict[str, float | None] = {}
    out = []
    for n, line in enumerate(lines, 1):
        tokens = line.split(";", 1)[0].split()
        if not tokens:
            continue
        if tokens[0].startswith("$") and len(tokens) >= 2:
            own = {"I": SYMBOL_UNIT["INCH"], "M": SYMBOL_UNIT["MM"]}.get(tokens[2].upper()) if len(tokens) > 2 else None
            sizes[tokens[0][1:]] = _symbol_size(tokens[1], own or unit)
        elif tokens[0] == "P":
            if len(tokens) < 5:
                raise CadError(f"{where}:{n}: a pad record needs <x> <y> <symbol> <P|N>; it has {len(tokens) - 1}")
            if tokens[4].upper() != "P":
                continue
            if tokens[3] not in sizes:
                raise CadError(f"{where}:{n}: the pad names symbol {tokens[3]}, which the file's symbol table ($"
                               f"<n> <name>) does not list")
            size = sizes[tokens[3]]
            try:
                x, y = float(tokens[1]) * scale, float(tokens[2]) * scale
            except ValueError:
                raise CadError(f"{where}:{n}: the pad's place {tokens[1]} {tokens[2]} is not two numbers") from None
            if size is not None:
                out.append(Opening(x, y, size))
    return out
