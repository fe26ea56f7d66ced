"""Fiducials in a rule set: the marks a board image is registered on before it is cut into crops.

A camera never places a board to the pixel, so every board is first fitted to
its recipe on these marks (inspector/ingest/registration.py). This module is
only the schema: where each mark is, what it looks like, how far from its
nominal place it is looked for, and how well the marks must agree.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..yamlio import Fields

FIDUCIAL_SHAPES = ("circle", "square")
TRANSFORMS = {"similarity": 2, "affine": 3, "homography": 4}  # model -> fiducials needed to fit it at all
DEFAULT_SEARCH_PX = 24
DEFAULT_MAX_RESIDUAL_PX = 1.0
# a homography on four marks: their bend from an affine fit (3.2 px for a 2 deg tilt of the demo board about both
# axes; one mark off by d bends them d/4). A calibrated camera (inspector camera calibrate --plane) needs no
# homography; five marks or more let a bad one be named and left out instead
DEFAULT_MAX_PERSPECTIVE_PX = 4.0
CLEARANCE = 1.0  # a mark's bare ring is this many diameters wide around it where the rule set gives no `ring`
MIN_RING_MARGIN_PX = 4  # a `ring` is wider than its mark by this at least (else there is no bare ring to match)


@dataclass(frozen=True)
class Fiducial:
    """One mark: its centre on the recipe's board, its shape and size (diameter or side), its search radius, and
    the outer diameter of its bare ring (the solder mask's opening) where the CAD gives it."""

    name: str
    x: int
    y: int
    shape: str = "circle"
    size: int = 8
    search_px: float = DEFAULT_SEARCH_PX
    ring: int | None = None  # px; None: CLEARANCE diameters of bare board around the mark

    @property
    def reach(self) -> float:
        """Pixels around the centre that belong to the mark and its bare ring. A real mark's ring is what its
        footprint opens in the mask (KiCad's 1.5 mm dot in a 3 mm opening: half a diameter, where CLEARANCE assumes
        one); matched against a wider one, the mask beyond it spoils the match (a real board's marks scored
        0.46-0.62, under MIN_SCORE, and 0.80-0.92 at their own ring)."""
        return self.ring / 2 if self.ring is not None else self.size / 2 + CLEARANCE * self.size


@dataclass(frozen=True)
class FiducialRules:
    marks: tuple[Fiducial, ...]
    transform: str = "similarity"  # similarity: shift, rotation, one scale; affine: also shear and two scales;
    # homography: also perspective (a camera not square to the board)
    max_residual_px: float = DEFAULT_MAX_RESIDUAL_PX
    max_perspective_px: float = DEFAULT_MAX_PERSPECTIVE_PX

    @property
    def minimum(self) -> int:
        """Marks the transform needs; one more lets a single bad mark be found and left out."""
        return TRANSFORMS[self.transform]


_TOP = {"transform", "max_residual_px", "max_perspective_px", "search_px", "marks"}
_MARK = {"at", "shape", "size", "search_px", "ring"}


def parse_fiducials(f: Fields, board: tuple[int, int]) -> FiducialRules:
    """The `fiducials:` block of a rule set, every error at its line."""
    f.unknown(_TOP)
    transform = f.text("transform", "similarity")
    if transform not in TRANSFORMS:
        raise f.error("transform", f"must be one of {', '.join(TRANSFORMS)}, got {transform!r}")
    search = f.number("search_px", DEFAULT_SEARCH_PX, minimum=2)
    marks_raw = f.get("marks")
    if not isinstance(marks_raw, dict) or not marks_raw:
        raise f.error("marks", "must map fiducial names to {at: [x, y], shape, size} (see "
                               "docs/pages/reference/rule-sets.md)")
    marks = tuple(_mark(Fields(body, f.source, f"{f.where}.marks.{name}"), str(name), search, board)
                  for name, body in marks_raw.items())
    need = TRANSFORMS[transform]
    if len(marks) < need:
        raise f.error("marks", f"a {transform} transform needs at least {need} fiducials, {len(marks)} given; "
                               f"add marks (one more than {need} also lets a bad one be left out)")
    return FiducialRules(marks, transform, f.number("max_residual_px", DEFAULT_MAX_RESIDUAL_PX, minimum=0.05),
                         f.number("max_perspective_px", DEFAULT_MAX_PERSPECTIVE_PX, minimum=0.5))


def _mark(f: Fields, name: str, search: float, board: tuple[int, int]) -> Fiducial:
    f.unknown(_MARK)
    at = f.get("at")
    if not (isinstance(at, list) and len(at) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                          for v in at)):
        raise f.error("at", f"must be [x, y], the mark's centre in integer board pixels, got {at!r}")
    shape = f.text("shape", "circle")
    if shape not in FIDUCIAL_SHAPES:
        raise f.error("shape", f"must be one of {', '.join(FIDUCIAL_SHAPES)}, got {shape!r}")
    size = f.number("size", 8, minimum=3, maximum=64, integer=True)
    ring = f.number("ring", 0, minimum=0, maximum=256, integer=True) if f.has("ring") else None
    if ring is not None and ring < size + MIN_RING_MARGIN_PX:
        raise f.error("ring", f"is the bare ring's outer diameter (the mask's opening), px: it must be wider than the "
                              f"mark's {size} px by {MIN_RING_MARGIN_PX} px or more, got {ring}")
    mark = Fiducial(name, at[0], at[1], shape, size, f.number("search_px", search, minimum=2), ring)
    r = mark.reach
    if not (r <= mark.x <= board[0] - 1 - r and r <= mark.y <= board[1] - 1 - r):
        raise f.error("at", f"the mark at ({mark.x}, {mark.y}) with its bare ring of {r:.0f} px does not fit on the "
                            f"{board[0]}x{board[1]} board; move it inwards")
    return mark
