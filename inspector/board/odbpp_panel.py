"""ODB++ panels: a step that places boards by step-and-repeat, read as the one board the line carries.

An SMT line moves, registers and (over Hermes) names panels, not the boards in them, so a panel is inspected as one
board whose parts are every copy's. A step's `stephdr` gives its datum and its `STEP-REPEAT` blocks: NX x NY copies
of a child step, the child's datum at (X + i*DX, Y + j*DY) in the parent, turned ANGLE degrees clockwise about it
(the format's direction, as for a component). A child may itself be a panel (an array of arrays).

Copies are numbered 1..N as an operator reads the panel from above, the top row first and left to right, and a
copied part's reference is its board's number and its own (`2-R1`: R1 of the second board), so every part of the
panel has a name of its own. A copy turned over (FLIP) or mirrored is refused by the reader: which of its parts face
the camera then depends on layer pairs this reader does not follow.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .design import CadError, PlacedPart, turned


@dataclass(frozen=True)
class Repeat:
    """One STEP-REPEAT block of a step's header (mm, degrees clockwise)."""

    step: str
    x: float
    y: float
    dx: float
    dy: float
    nx: int
    ny: int
    angle: float
    line: int  # where the block starts in its stephdr, for messages


@dataclass(frozen=True)
class StepHeader:
    datum: tuple[float, float]
    repeats: tuple[Repeat, ...] = ()


@dataclass(frozen=True)
class Placement:
    """Where a copy of a board step lies in the step imported: its point p is R(angle) p + (tx, ty), R turning
    clockwise."""

    step: str
    angle: float = 0.0
    tx: float = 0.0
    ty: float = 0.0

    def point(self, x: float, y: float) -> tuple[float, float]:
        dx, dy = turned(x, y, -self.angle)
        return dx + self.tx, dy + self.ty

    def within(self, outer: Placement) -> Placement:
        """This placement (inside a step) seen from the step `outer` places that step in."""
        tx, ty = outer.point(self.tx, self.ty)
        return Placement(self.step, (self.angle + outer.angle) % 360.0, tx, ty)


def boards_in(step: str, headers: dict[str, StepHeader], places_parts: set[str], steps: set[str], where: str,
              _path: tuple[str, ...] = (), known: dict[str, list[Placement]] | None = None) -> list[Placement]:
    """Every copy of a board step that `step` places by step-and-repeat (a panel of panels too), in its header's
    order; `step`'s own parts are not among them. Each step's copies are worked out once (`known`), however many
    repeats place it."""
    if step in _path:  # names are the job's steps, so every loop comes back to one
        raise CadError(f"{where}: step {step} repeats itself through {' > '.join((*_path, step))}; the job's "
                       "step-and-repeat has a loop")
    known = {} if known is None else known
    if step in known:
        return known[step]
    out: list[Placement] = []
    header = headers.get(step)
    for r in header.repeats if header is not None else ():
        if r.step not in steps:
            raise CadError(f"{where}: steps/{step}/stephdr:{r.line}: repeats step {r.step}, which the job does not "
                           f"have (its steps: {', '.join(sorted(steps))})")
        inner = [Placement(r.step)] if r.step in places_parts else []
        inner += boards_in(r.step, headers, places_parts, steps, where, (*_path, step), known)
        datum = headers.get(r.step, StepHeader((0.0, 0.0))).datum
        turn = Placement(r.step, r.angle % 360.0)
        ox, oy = turn.point(*datum)
        for i in range(r.nx):
            for j in range(r.ny):
                # the child's datum lands on (x + i dx, y + j dy): p -> R (p - datum) + there
                here = Placement(r.step, turn.angle, r.x + i * r.dx - ox, r.y + j * r.dy - oy)
                out.extend(p.within(here) for p in inner)
    known[step] = out
    return out


def numbered(boards: list[Placement], headers: dict[str, StepHeader]) -> list[tuple[int, Placement]]:
    """The copies numbered 1..N as the panel is read from above: by where each one's datum lies, the top row first
    (y up), left to right."""
    def key(p: Placement) -> tuple[float, float]:
        x, y = p.point(*headers.get(p.step, StepHeader((0.0, 0.0))).datum)
        return -round(y, 3), round(x, 3)

    return list(enumerate(sorted(boards, key=key), 1))


def placed_copy(part: PlacedPart, where: Placement, number: int) -> PlacedPart:
    """`part` of a board step as its copy `number` places it in the panel."""
    x, y = where.point(part.x_mm, part.y_mm)
    return replace(part, ref=f"{number}-{part.ref}", x_mm=x, y_mm=y, rotation=(part.rotation - where.angle) % 360.0)
