"""Component shapes: what a body looks like, whether it has a polarity mark.

Shared by the rule validator (a rule names a shape) and the synthetic board
renderer (which draws it), so both agree on what exists.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    name: str
    body_bgr: tuple[int, int, int]
    polarized: bool
    leads: int  # terminals per long side (0: two end caps, as on chip passives)


SHAPES: dict[str, Shape] = {s.name: s for s in (
    Shape("resistor", (40, 40, 40), False, 0),
    Shape("capacitor", (90, 140, 190), False, 0),
    Shape("inductor", (70, 70, 90), False, 0),
    Shape("diode", (30, 30, 30), True, 0),
    Shape("led", (200, 220, 230), True, 0),
    Shape("electrolytic", (150, 90, 40), True, 0),
    Shape("tantalum", (20, 160, 200), True, 0),
    Shape("sot23", (25, 25, 25), True, 2),
    Shape("soic", (35, 35, 35), True, 4),
    Shape("qfp", (45, 45, 45), True, 6),
)}
