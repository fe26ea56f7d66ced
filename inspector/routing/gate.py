"""The board gate in a rule set: when a frame of a free-running camera is a board to inspect.

A camera over a conveyor delivers frames whether a board is under it or not, and several frames of each
board. The gate (camera/gate.py) inspects a frame only when the recipe's fiducials register and the view has
settled, once per board. Per product, because a small board settles sooner than a large panel and a line's
conveyor speed is per product too; the defaults suit a board that stops under the camera.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..yamlio import Fields


@dataclass(frozen=True)
class GateRules:
    settle_frames: int = 2  # frames in a row that barely differ from the one before: the board lies still
    still_level: float = 2.0  # mean absolute change of a frame's thumbnail (grey levels) below which it is still
    rearm_shift_px: float = 4.0  # a settled board this far from the one inspected is a new board


def parse_gate(f: Fields) -> GateRules:
    f.unknown({"settle_frames", "still_level", "rearm_shift_px"})
    return GateRules(f.number("settle_frames", 2, minimum=0, integer=True),
                     f.number("still_level", 2.0, minimum=0.1), f.number("rearm_shift_px", 4.0, minimum=0.5))
