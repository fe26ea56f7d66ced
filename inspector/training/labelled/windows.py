"""Labelled boxes on whole images -> an ImageFolder of windows, for teaching a window classifier.

The windows tile the image on a fixed grid: where a window is cut depends on the image alone, never on where a
defect lies, so a classifier cannot learn the defect from the framing (a defect-centred crop would teach "the
middle matters"). A window is labelled with a defect class when the centre of a box of that class, and of no
other class, lies inside it; it is **good** when no box touches it; any other window (a box only grazing it, or two
classes) is left out, counted, since either label would be wrong. The file names carry the image's identity
(`<image>__x<col>y<row>.png`), so every window of one board falls on one side of a split.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...ingest.images import write_image

GOOD = "good"


@dataclass
class WindowCounts:
    written: Counter = field(default_factory=Counter)  # class -> windows
    skipped: int = 0  # touched by a box whose centre is elsewhere, or by two classes
    thinned: int = 0  # good windows left out to keep the ratio asked for

    def line(self) -> str:
        return (", ".join(f"{k} {v}" for k, v in sorted(self.written.items())) +
                f"; {self.skipped} windows left out as ambiguous, {self.thinned} good windows thinned")


def window_label(x: int, y: int, size: int, boxes: Sequence[tuple[tuple[int, int, int, int], str]]) -> str | None:
    """The window's class, or None when it is ambiguous."""
    centred, touched = set(), False
    for (x1, y1, x2, y2), name in boxes:
        if x1 < x + size and x2 > x and y1 < y + size and y2 > y:
            touched = True
            cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
            if x <= cx < x + size and y <= cy < y + size:
                centred.add(name)
            else:
                return None
    if not touched:
        return GOOD
    return next(iter(centred)) if len(centred) == 1 else None


def write_windows(out: Path, identity: str, image: np.ndarray,
                  boxes: Sequence[tuple[tuple[int, int, int, int], str]], size: int, counts: WindowCounts,
                  keep_good: float = 1.0, rng: np.random.Generator | None = None,
                  classes: Iterable[str] = (), golden: tuple[Path, np.ndarray] | None = None) -> None:
    """Every whole window of `image` on the grid of `size`, into OUT/<class>/. `keep_good`: the share of good
    windows written (drawn with `rng`). `golden`: (folder, golden image): the same window of the golden image is
    written there under the same class and name."""
    for name in (GOOD, *classes):
        (out / name).mkdir(parents=True, exist_ok=True)
        if golden is not None:
            (golden[0] / name).mkdir(parents=True, exist_ok=True)
    h, w = image.shape[:2]
    for y in range(0, h - size + 1, size):
        for x in range(0, w - size + 1, size):
            label = window_label(x, y, size, boxes)
            if label is None:
                counts.skipped += 1
                continue
            if label == GOOD and keep_good < 1.0 and (rng or np.random.default_rng()).random() >= keep_good:
                counts.thinned += 1
                continue
            name = f"{identity}__x{x // size}y{y // size}.png"
            write_image(out / label / name, image[y:y + size, x:x + size])
            if golden is not None:
                write_image(golden[0] / label / name, golden[1][y:y + size, x:x + size])
            counts.written[label] += 1
