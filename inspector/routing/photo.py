"""Photo registration in a rule set: boards without fiducials, registered on their outline, picked points or the
golden board's own content.

A line with fiducials and a fixture registers each frame on the marks (fiducials.py). A plant's own board often has
neither: its rule set (written by `board teach`) names the board geometry `board import` wrote (the outline, and
the pads that tell the board's turn) and, where the outline cannot do it, the points picked once on this camera's
view. The line then finds the board in each photo, whatever its size, and warps it to the recipe's pixels first
(app/board_photos.py). Where the camera sees the board about where the recipe puts it (a conveyor's stop, a
fixture with some play) but there is nothing to find it by, `using: golden` aligns each frame to the golden board's
content instead (`using: golden`). Paths are relative to the rule file, like `golden:`.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..yamlio import Fields, beside
from .fiducials import DEFAULT_MAX_RESIDUAL_PX

WAYS = ("outline", "points", "golden")


@dataclass(frozen=True)
class PhotoRegistration:
    geometry: str | None  # absolute path of RULES.board.json (outline and pads)
    points: str | None  # absolute path of RULES.points.yaml (picked points), when the camera needs them
    using: str = "outline"  # outline | points | golden (frames of the board's size aligned on the golden board)
    # a frame whose registration leaves more than this (px) is refused, as a board whose fiducials disagree is;
    # by default only on the golden board, where the residual is in the recipe's pixels (a photo's outline residual
    # is in the photo's, at whatever scale it was taken)
    max_residual_px: float | None = None


def parse_photo_registration(f: Fields, source: str) -> PhotoRegistration:
    f.unknown({"geometry", "points", "using", "max_residual_px"})
    paths = {key: beside(source, f.text(key)) for key in ("geometry", "points") if f.has(key)}
    using = f.text("using") if f.has("using") else ("points" if "points" in paths else "outline")
    if using not in WAYS:
        raise f.error("using", f"is {using!r}: one of {', '.join(WAYS)}")
    if using == "golden" and paths:
        raise f.error("using", "`using: golden` aligns frames that already hold the board where the recipe puts "
                               "it; geometry and points find a board in a larger photo: keep one")
    if using != "golden" and not paths:
        raise f.error("geometry", "name the board geometry `board import` wrote (geometry: RULES.board.json), the "
                                  "picked points (points: RULES.points.yaml), or align on the golden board "
                                  "(using: golden)")
    needs = {"outline": "geometry", "points": "points"}.get(using)
    if needs is not None and needs not in paths:
        raise f.error("using", f"registers on the {using} but names no {needs}: add `{needs}:` or say how it "
                               "registers")
    most = f.number("max_residual_px", DEFAULT_MAX_RESIDUAL_PX, minimum=0.05) if using == "golden" or \
        f.has("max_residual_px") else None
    return PhotoRegistration(paths.get("geometry"), paths.get("points"), using, most)
