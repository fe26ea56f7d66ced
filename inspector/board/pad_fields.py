"""Where a package's lands lie, by its name: which pads are a part's, for pads given by place (gerber_parts.py).

Plain Gerbers do not say whose a pad is; a placement file gives a point and a package's name. Two naming schemes
state where the lands lie about that point:
- IPC-7351's land pattern names, which Altium, Eagle/Fusion, PADS, Mentor and the land pattern calculators write:
  the family, the pitch, the lead span (or the body, for a leadless package), the height and the pin count, about
  the part's centre (IPC's zero): `SOIC127P600X175-8N` (two rows 6.00 mm toe to toe, four pins a row at 1.27 mm),
  `SOT95P280X145-5N`, `QFP50P1200X1200X160-100N`, `QFN50P400X400X90-25N`, `BGA100C80P10X10_900X900X140`,
  `SOD3716X135N`, `RESC1005X40N`;
- KiCad's library names of through-hole parts, whose zero is pin 1 (KLC): a two-terminal part's pitch
  (`R_Axial_DIN0207_L6.3mm_D2.5mm_P10.16mm_Horizontal`: its other pin 10.16 mm from pin 1), a DIP's rows
  (`DIP-16_W7.62mm`), a resistor network's row (`R_Array_SIP9`), a header's grid (`PinHeader_2x08_P2.54mm_Vertical`).
A field is where the pads' centres lie, never a window: which way it runs from pin 1 along its axes, and which of an
IPC name's two sizes lies along x, the caller reads off the board's pads.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

HOLE_PITCH_MM = 2.54  # a DIP's pins along its rows, a resistor network's along its one


@dataclass(frozen=True)
class PadField:
    w: float  # the span of the pads' centres along the footprint's x (its zero rotation), mm
    h: float  # ... and along y
    from_pin_one: bool  # the field starts at the placement point (pin 1) and runs one way from it; else centred
    columns: int = 0  # a field from pin 1: its pins on a grid of this many columns (along x) ...
    rows: int = 0  # ... and rows, `w` and `h` apart end to end

    def pins(self, sx: int, sy: int) -> list[tuple[float, float]]:
        """A field from pin 1: where its pins lie, running `sx` (1 or -1) along x and `sy` along y from pin 1."""
        return [(sx * self.w * i / max(1, self.columns - 1), sy * self.h * j / max(1, self.rows - 1))
                for i in range(self.columns) for j in range(self.rows)]


_TWO_ROWS = re.compile(r"^(?:SOIC|SOP|SSOP|TSOP|TSSOP|MSOP|SOT|SOTFL)(\d+)P(\d+)X\d+-(\d+)", re.IGNORECASE)
_QFP = re.compile(r"^[A-Z]?QFP(\d+)P(\d+)X(\d+)X\d+-\d+", re.IGNORECASE)
_LEADLESS = re.compile(r"^(?:[A-Z]{0,2}QFN|[A-Z]?DFN|[A-Z]?SON|LGA|[A-Z]?LCC)(\d+)P(\d+)X(\d+)X\d+-\d+", re.IGNORECASE)
_BGA = re.compile(r"^BGA\d+[CN]\d+P\d+X\d+_(\d+)X(\d+)X\d+", re.IGNORECASE)
_SOD = re.compile(r"^SOD(\d{2})(\d{2})X\d+", re.IGNORECASE)
_CHIP = re.compile(r"^(?:RES|CAP|IND|DIO|LED|FUS|OSC)[A-Z]{1,2}(\d{2})(\d{2})X\d+", re.IGNORECASE)

_TWO_LEADS = re.compile(r"^(?:R|C|CP|L|D|Fuse)_(?:Axial|Radial|Disc|Rect|DO-|Box)[^ ]*?_P(\d+(?:\.\d+)?)mm",
                        re.IGNORECASE)
_DIP = re.compile(r"^(?:DIP|PDIP|CERDIP)-(\d+)_W(\d+(?:\.\d+)?)mm", re.IGNORECASE)
_SIP = re.compile(r"^R_Array_SIP(\d+)", re.IGNORECASE)  # a resistor network: its pins in a row, 2.54 mm apart
_GRID = re.compile(r"^(?:PinHeader|PinSocket|IDC-Header)_(\d+)x(\d+)_P(\d+(?:\.\d+)?)mm", re.IGNORECASE)


def pad_field(package: str) -> PadField | None:
    """Where `package`'s pads lie by its name (see the module), or None where its name does not say."""
    name = package.strip()
    m = _TWO_ROWS.match(name)
    if m:
        pitch, span, pins = int(m.group(1)) / 100, int(m.group(2)) / 100, int(m.group(3))
        return PadField(span, (math.ceil(pins / 2) - 1) * pitch, False)
    m = _QFP.match(name)
    if m:
        return PadField(int(m.group(2)) / 100, int(m.group(3)) / 100, False)
    m = _LEADLESS.match(name)
    if m:
        return PadField(int(m.group(2)) / 100, int(m.group(3)) / 100, False)
    for pattern in (_BGA, _SOD, _CHIP):
        m = pattern.match(name)
        if m:
            scale = 100 if pattern is _BGA else 10
            return PadField(int(m.group(1)) / scale, int(m.group(2)) / scale, False)
    m = _TWO_LEADS.match(name)
    if m:
        return PadField(float(m.group(1)), 0.0, True, 2, 1)
    m = _DIP.match(name)
    if m:
        per_row = int(m.group(1)) // 2
        return PadField(float(m.group(2)), (per_row - 1) * HOLE_PITCH_MM, True, 2, per_row)
    m = _SIP.match(name)
    if m:
        pins = int(m.group(1))
        return PadField((pins - 1) * HOLE_PITCH_MM, 0.0, True, pins, 1)
    m = _GRID.match(name)
    if m:
        pitch, columns, rows = float(m.group(3)), int(m.group(1)), int(m.group(2))
        return PadField((columns - 1) * pitch, (rows - 1) * pitch, True, columns, rows)
    return None


WAYS = ((1, -1), (1, 1), (-1, -1), (-1, 1))  # from pin 1: KiCad's way first (its y runs down the screen, the
# footprint frame's up), then mirrored (a bottom part's frame, another tool's)


def placings(field: PadField) -> list[tuple[float, float, float, float]]:
    """A centred field's boxes (x0, y0, x1, y1) about the placement point, either way round (an IPC name's zero is
    not every tool's), the name's first."""
    return list(dict.fromkeys([(-field.w / 2, -field.h / 2, field.w / 2, field.h / 2),
                               (-field.h / 2, -field.w / 2, field.h / 2, field.w / 2)]))


def way_box(field: PadField, sx: int, sy: int) -> tuple[float, float, float, float]:
    """A field from pin 1 running `sx`, `sy` from it: its box about the placement point."""
    return (min(0.0, sx * field.w), min(0.0, sy * field.h), max(0.0, sx * field.w), max(0.0, sy * field.h))
