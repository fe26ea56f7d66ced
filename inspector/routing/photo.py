"""Photo registration in a rule set: boards photographed whole, registered on their outline or picked points.

A line with fiducials and a fixture registers each frame on the marks (fiducials.py). A plant's own board often has
neither: its rule set (written by `board teach`) names the board geometry `board import` wrote (the outline, and
the pads that tell the board's turn) and, where the outline cannot do it, the points picked once on this camera's
view. The line then finds the board in each photo, whatever its size, and warps it to the recipe's pixels first
(app/board_photos.py). Paths are relative to the rule file, like `golden:`.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..yamlio import Fields, beside


@dataclass(frozen=True)
class PhotoRegistration:
    geometry: str | None  # absolute path of RULES.board.json (outline and pads)
    points: str | None  # absolute path of RULES.points.yaml (picked points), when the camera needs them


def parse_photo_registration(f: Fields, source: str) -> PhotoRegistration:
    f.unknown({"geometry", "points"})
    paths = {key: beside(source, f.text(key)) for key in ("geometry", "points") if f.has(key)}
    if not paths:
        raise f.error("geometry", "name the board geometry `board import` wrote (geometry: RULES.board.json) or the "
                                  "picked points (points: RULES.points.yaml)")
    return PhotoRegistration(paths.get("geometry"), paths.get("points"))
