"""Where a board's fiducials lie on its golden board, for a rule set taught from photos.

A taught board is found in each photo and aligned on the golden board (its outline or picked points, then the golden
board's own content), and then refined on its fiducials. The golden board came from a photo too, so its marks lie
where that photo put them, a few pixels from the CAD's (picked points are a pixel or two off, a lens bends): refined
on the CAD's places, every board would be moved off the golden board it was just aligned on, and its crops off the
golden windows they are compared with (the shared stm32wb55-dev board: its marks fitted the CAD's only through a
homography, 2.8 px beyond what the rule set's similarity takes). So the taught rule set puts each mark where the
golden board has it; a mark the golden board does not show is left out, and the marks with it when too few remain.
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from ..ingest.registration import find_mark
from ..routing.fiducials import FiducialRules


@dataclass
class GoldenMarks:
    at: dict[str, tuple[int, int]]  # mark -> where the golden board has it, px; {}: no fiducials in the taught set
    note: str  # what was moved or left out, for the teaching's report


def golden_marks(golden: np.ndarray, fiducials: FiducialRules) -> GoldenMarks:
    """Every mark of `fiducials` found on the golden board (recipe px), or why the taught set keeps fewer or none."""
    gray = cv2.cvtColor(golden, cv2.COLOR_BGR2GRAY) if golden.ndim == 3 else golden
    at: dict[str, tuple[int, int]] = {}
    missing: list[str] = []
    moved = 0.0
    for mark in fiducials.marks:
        where = find_mark(gray, mark)
        if isinstance(where, str):
            missing.append(f"{mark.name} ({where})")
            continue
        at[mark.name] = (int(round(where[0])), int(round(where[1])))
        moved = max(moved, float(np.hypot(where[0] - mark.x, where[1] - mark.y)))
    if len(at) < fiducials.minimum:
        return GoldenMarks({}, f"fiducials left out of the taught rule set: the golden board shows {len(at)} of them "
                               f"(not found: {', '.join(missing)}), a {fiducials.transform} needs "
                               f"{fiducials.minimum}; boards are aligned on the golden board alone")
    note = f"fiducials placed where the golden board has them (up to {moved:.1f} px from the CAD's)"
    if missing:
        note += f"; left out, not on the golden board: {', '.join(missing)}"
    return GoldenMarks(at, note)
