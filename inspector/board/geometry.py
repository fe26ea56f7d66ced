"""What teaching needs of the CAD beside the rule set: the board's outline and every inspected part's pads.

A rule set holds windows, not copper. Registering a photo on the board's outline needs the outline, and a made
`missing` defect is the part's own pads on bare board, so `board import` writes both beside the rule set
(`RULES.board.json`), in the rule set's image frame (x right, y down, pixels at its scale). It is read back by
`board teach`; a rule set without it (hand-written, or imported before this file existed) is taught on picked
points, and its made defects lay pads at the two ends of each window.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

PxRect = tuple[float, float, float, float]  # x0, y0, x1, y1 in the rule set's pixels
SUFFIX = ".board.json"


@dataclass
class BoardGeometry:
    outline: PxRect  # the board's edge (its bounding box), image px
    px_per_mm: float
    pads: dict[str, list[PxRect]] = field(default_factory=dict)  # inspected part -> its pads, image px
    source: str = ""

    def to_json(self) -> dict:
        return {"outline": list(self.outline), "px_per_mm": self.px_per_mm, "source": self.source,
                "pads": {ref: [list(p) for p in pads] for ref, pads in self.pads.items()}}


def rect_mask(shape: tuple[int, int], rects: list[PxRect]) -> np.ndarray:
    """A uint8 mask of `shape` (height, width), 255 inside every rectangle (pads, windows), clipped to it."""
    mask = np.zeros(shape, np.uint8)
    for x0, y0, x1, y1 in rects:
        mask[max(0, round(y0)):max(0, round(y1)), max(0, round(x0)):max(0, round(x1))] = 255
    return mask


def geometry_path(rules_path: Path) -> Path:
    return rules_path.with_name(rules_path.stem + SUFFIX)


def write_geometry(geometry: BoardGeometry, rules_path: Path) -> Path:
    path = geometry_path(rules_path)
    path.write_text(json.dumps(geometry.to_json(), indent=1), encoding="utf-8")
    return path


def read_geometry(rules_path: Path) -> BoardGeometry | None:
    """The geometry written beside `rules_path`, or None when there is none."""
    path = geometry_path(rules_path)
    return read_geometry_file(path) if path.is_file() else None


def read_geometry_file(path: Path) -> BoardGeometry:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not the board geometry `board import` writes ({exc}); import the board again "
                         "to write it anew") from None
    return geometry_of(doc, str(path))


def geometry_of(doc: object, what: str) -> BoardGeometry:
    """The geometry a `RULES.board.json` document holds (read from a file, or sent to a kiosk); ValueError naming
    `what` when it is not one."""
    try:
        return BoardGeometry(tuple(float(v) for v in doc["outline"]), float(doc["px_per_mm"]),  # type: ignore[index]
                             {ref: [tuple(float(v) for v in p) for p in pads]
                              for ref, pads in doc["pads"].items()},  # type: ignore[index]
                             str(doc.get("source", "")))  # type: ignore[union-attr]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{what}: not the board geometry `board import` writes ({type(exc).__name__}: {exc}); "
                         "import the board again to write it anew") from None
