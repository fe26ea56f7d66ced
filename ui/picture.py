"""What the line view draws of a board: the parts' boxes at the rule set's placements, coloured by their
verdicts, the fiducials where registration found them; and a kept crop read from this machine's disk."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from inspector.results.units import PanelResult
from inspector.routing.rules import RuleSet, body_box


def read_crop(path: str | None) -> np.ndarray | None:
    """A crop file on this machine, or None."""
    if not path or not Path(path).is_file():
        return None
    import cv2

    return cv2.imread(path, cv2.IMREAD_COLOR)


@dataclass(frozen=True)
class PartBox:
    ref: str
    component: str
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 on the board
    verdict: str
    defect: str


@dataclass(frozen=True)
class FiducialMark:
    name: str
    at: tuple[float, float]  # where it was found (image px), or its nominal place when it was not
    found: bool


@dataclass(frozen=True)
class BoardRegistration:
    """How the board was registered, as stored with it: what the line view draws."""

    transform: tuple[float, ...] | None = None  # 2x3 row-major, recipe px -> image px
    residual_px: float | None = None
    fiducials: dict[str, tuple[float, float]] = field(default_factory=dict)  # found, image px
    error: str | None = None  # board-level: registration failed ...


@dataclass
class BoardPicture:
    """The newest board as the line view draws it: the image when this process has it, else a schematic."""

    serial: str
    verdict: str
    size: tuple[int, int]
    image: np.ndarray | None
    boxes: list[PartBox] = field(default_factory=list)
    marks: list[FiducialMark] = field(default_factory=list)
    registration: BoardRegistration = BoardRegistration()
    panel: PanelResult | None = None  # a panel's boards and those that did not pass; None: one board

    def to_view(self, x: float, y: float) -> tuple[float, float]:
        """A recipe point where the picture shows it: through the registration on a camera image, else as is."""
        t = self.registration.transform
        if self.image is None or t is None:
            return x, y
        return t[0] * x + t[1] * y + t[2], t[3] * x + t[4] * y + t[5]

    def describe_registration(self) -> str:
        reg = self.registration
        if reg.error:
            return reg.error
        if reg.transform is None:
            return "not registered (the recipe has no fiducials, or registration is off)"
        t = reg.transform
        return (f"registered on {len(reg.fiducials)} fiducials: residual {reg.residual_px:.2f} px, shift "
                f"({t[2]:+.1f}, {t[5]:+.1f}) px, rotation {math.degrees(math.atan2(t[3], t[0])):+.2f} deg")


SKIPPED = "skipped"  # a box's verdict for a part of an x-out: not inspected


def board_picture(rules: RuleSet | None, serial: str, verdict: str, parts: list[tuple[str, str, str]],
                  image: np.ndarray | None, registration: BoardRegistration | None = None,
                  panel: PanelResult | None = None) -> BoardPicture:
    """Boxes at the rule set's placements, coloured later by each part's (ref, verdict, defect), and the fiducials."""
    size = (image.shape[1], image.shape[0]) if image is not None else (rules.board_size if rules else (640, 400))
    pic = BoardPicture(serial, verdict, size, image, registration=registration or BoardRegistration(), panel=panel)
    if rules is None:
        return pic
    where = {p.ref: (c, p) for c, p in rules.placements()}
    for ref, part_verdict, defect in parts:
        window = ref.rpartition(".")[0]  # a bare board's difference W1-2.1 is drawn as its window W1-2
        if ref in where or window in where:
            c, p = where[ref] if ref in where else where[window]
            pic.boxes.append(PartBox(ref, c.name, body_box(c, p, 2), part_verdict, defect))
    if panel is not None and panel.skipped:  # an x-out's parts where they would be, drawn as not inspected
        for c, p in rules.placements():
            if panel.position_of(p.ref) in panel.skipped:
                pic.boxes.append(PartBox(p.ref, c.name, body_box(c, p, 2), SKIPPED, "x-out"))
    found = pic.registration.fiducials
    for m in rules.fiducials.marks if rules.fiducials else ():
        if m.name in found:
            at = found[m.name] if image is not None else (float(m.x), float(m.y))
            pic.marks.append(FiducialMark(m.name, at, True))
        else:
            pic.marks.append(FiducialMark(m.name, (float(m.x), float(m.y)), False))
    return pic
