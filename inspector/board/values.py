"""A passive part's value as a quantity, however a CAD file or a BOM writes it, so two files can be compared.

`10k`, `10K`, `10 kOhm`, `10kΩ`, `Resistor, 10K` are one resistance; `4K7` and `5R1` put the multiplier where the
decimal point is (IEC 60062's RKM code); `0.1uF`, `100n`, `100 nF`, `Ceramic capacitor, 100 nF, 6.3 V` are one
capacitance; `39nH` and `2u2` one inductance. Only resistors, capacitors and inductors (by their designator's letter,
R, C, L) are read, and a text holding no such quantity, or two different ones, is no value (None): nothing is
compared where it cannot be told.
"""
from __future__ import annotations

import re

PREFIX = {"p": 1e-12, "n": 1e-9, "u": 1e-6, "µ": 1e-6, "μ": 1e-6, "m": 1e-3, "": 1.0, "k": 1e3, "K": 1e3,
          "M": 1e6, "G": 1e9}
UNIT = {"R": "ohm", "C": "F", "L": "H"}  # designator letter -> the quantity its value states
# a number, an optional prefix, an optional unit (`4.7 kOhm`, `100nF`, `10k`, `15R`), not inside a word
_PLAIN = re.compile(r"(?<![\w.])(\d+(?:[.,]\d+)?)\s?([pnuµμmkKMG]?)\s?((?i:ohms?)|Ω|R|F|H)?(?![\w])")
# IEC 60062: the prefix (or R for ohms) as the decimal point, `4K7`, `2R2`, `4u7`, `1n0`
_RKM = re.compile(r"(?<![\w.])(\d+)([pnuµμkKMGR])(\d+)(F|H|Ω)?(?![\w])")


def kind_of(ref: str) -> str | None:
    """The quantity a part's value states, by its designator's letters (R7 -> ohm); None for other parts."""
    letters = re.match(r"(?:\d+-)?([A-Za-z]+)", ref)  # 2-R7, a panel's copy, is R7
    return UNIT.get(letters.group(1).upper()) if letters else None


def quantity(text: str, kind: str) -> float | None:
    """The one `kind` quantity `text` states (ohms, farads, henries), or None where it states none or two."""
    found: set[float] = set()
    for m in _RKM.finditer(text):
        prefix, unit = m.group(2), m.group(4)
        if (prefix == "R" and kind != "ohm") or not _fits(unit, kind):
            continue
        found.add(_round(float(f"{m.group(1)}.{m.group(3)}") * (1.0 if prefix == "R" else PREFIX[prefix])))
    rest = _RKM.sub(" ", text)
    for m in _PLAIN.finditer(rest):
        number, prefix, unit = float(m.group(1).replace(",", ".")), m.group(2), m.group(3)
        if unit is None and kind != "ohm" and not prefix:
            continue  # a bare number is a resistor's ohms, not a capacitor's farads (`6.3 V` left aside too)
        if unit == "R" and prefix:
            continue
        if not _fits(unit, kind) or (unit is None and _followed_by_other_unit(rest, m.end())):
            continue
        found.add(_round(number * PREFIX[prefix]))
    return found.pop() if len(found) == 1 else None


def _fits(unit: str | None, kind: str) -> bool:
    if unit is None:
        return True
    if unit in ("F", "H"):
        return unit == kind
    return kind == "ohm"  # ohm, ohms, Ω, R


def _followed_by_other_unit(text: str, end: int) -> bool:
    """`6.3 V`, `200 mA`, `5 %`: a number whose unit is another quantity's."""
    return re.match(r"\s?[pnuµμmkM]?(?:[VAW%]|Hz|ppm|mm|°)", text[end:]) is not None


def _round(value: float) -> float:
    return float(f"{value:.6g}")
