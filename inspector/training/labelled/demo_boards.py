"""Synthetic bare boards with boxed defects: a labelled set to teach a detector from, and panels for its line.

A board is a dark laminate with copper bars; a **void** is a dark hole in a bar, a **spur** a bright stub off one,
both 16 px on a 64-px board. The **new look** is what a line meets after teaching: round holes of the laminate's
colour punched through the upper bar (a design's vias, say), not defects, and never in the taught set. A **narrow
void** is a defect the set never showed either: a gap NARROW px wide through the lower bar, where the set's voids
are 16 px holes in the upper one, which a detector taught on the set misses (an escape an operator boxes). The
detector's loop demo (app/detector_loop_demo.py) and the tests use these; a plant teaches from its own images.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np

from ...ingest.images import write_image

CLASSES = ("void", "spur")
LAMINATE, COPPER = (40, 80, 40), (60, 160, 200)
NARROW = 6  # px: a narrow void's width
PixelBox = tuple[int, int, int, int, int]  # class, x1, y1, x2, y2
WINDOW = 64  # a panel window's side: one board picture
PANEL = (160, 100)  # a panel's width and height: two windows
WINDOWS = {"W1": (8, 18), "W2": (88, 18)}  # each window's top-left corner on the panel
PANEL_RULES = f"""\
recipe: bare-panel
board: {{width: {PANEL[0]}, height: {PANEL[1]}}}
crop_margin: 0
classifier: {{arch: resnet10, input_size: 32}}
detectors:
  DETECTOR: {{arch: yolov8n.yaml, input_size: SIZE}}
components:
  WIN:
    shape: resistor
    size: [{WINDOW}, {WINDOW}]
    detector: DETECTOR
    at: {{{', '.join(f'{ref}: [{x + WINDOW // 2}, {y + WINDOW // 2}]' for ref, (x, y) in WINDOWS.items())}}}
"""


def narrow_void(box: PixelBox) -> bool:
    """A box `board` drew around a narrow void (NARROW px and its one-pixel rim each side)."""
    return box[0] == 0 and box[3] - box[1] <= NARROW + 2


def board(rng: np.random.Generator, kinds: list[int], narrow: bool = False) -> tuple[np.ndarray, list[PixelBox]]:
    """A board (64 px high, 64 or 80 wide) with a defect of each kind in `kinds`, and their boxes. Defects are 16 px,
    a quarter of the board's height (the trainer grows the input until they are 24 px: detector_sizing.py); with
    `narrow`, the void is a gap NARROW px wide through the lower bar."""
    h, w = 64, int(rng.choice([64, 80]))
    image = np.full((h, w, 3), LAMINATE, np.uint8)
    image[4:26, :] = image[30:40, :] = COPPER
    boxes = []
    for kind in kinds:
        x = int(rng.integers(4, w - 20))
        if kind == 0 and narrow:
            image[30:40, x:x + NARROW] = LAMINATE
            boxes.append((0, x - 1, 29, x + NARROW + 1, 41))
        elif kind == 0:
            image[7:23, x:x + 16] = LAMINATE
            boxes.append((0, x - 1, 6, x + 17, 24))
        else:
            image[40:60, x:x + 16] = COPPER
            boxes.append((1, x - 1, 39, x + 17, 61))
    return np.clip(image + rng.normal(0, 4, image.shape), 0, 255).astype(np.uint8), boxes


def boards_of(count: int, seed: int) -> Iterator[tuple[str, np.ndarray, list[PixelBox]]]:
    """(name, image, boxes) of `count` boards: clean, a void, a spur, both, in turn."""
    rng = np.random.default_rng(seed)
    for b in range(count):
        image, boxes = board(rng, [[], [0], [1], [0, 1]][b % 4])
        yield f"s{seed}b{b:03d}__top", image, boxes


def write_yolo_set(root: Path, boards: int, seed: int) -> Path:
    """`boards` boards as a YOLO set (data.yaml, images/, labels/) under `root`."""
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    (root / "data.yaml").write_text(f"names: [{', '.join(CLASSES)}]\n", encoding="utf-8")
    for name, image, boxes in boards_of(boards, seed):
        write_image(root / "images" / f"{name}.png", image)
        h, w = image.shape[:2]
        (root / "labels" / f"{name}.txt").write_text("".join(
            f"{k} {(x1 + x2) / 2 / w:.5f} {(y1 + y2) / 2 / h:.5f} {(x2 - x1) / w:.5f} {(y2 - y1) / h:.5f}\n"
            for k, x1, y1, x2, y2 in boxes), encoding="utf-8")
    return root


def window(rng: np.random.Generator, defective: float, look: float,
           narrow_voids: float = 0.0) -> tuple[np.ndarray, list[PixelBox], bool]:
    """One panel window: a board cut to 64 px with defects at the rate `defective` (each kind or both alike), a
    narrow void through the lower bar at the rate `narrow_voids` of voids, a round hole in the upper bar at the rate
    `look` (kept clear of a void); (image, boxes, holed)."""
    kinds = [[0], [1], [0, 1]][int(rng.integers(3))] if rng.random() < defective else []
    narrow = narrow_voids > 0 and 0 in kinds and rng.random() < narrow_voids  # no draw without them: same panels
    picture, boxes = board(rng, kinds, narrow)
    picture, boxes = picture[:, :WINDOW].copy(), [b for b in boxes if b[3] <= WINDOW]
    holed = False
    if rng.random() < look:
        x = int(rng.integers(10, WINDOW - 10))
        if not any(k == 0 and y1 < 26 and abs(x - (x1 + x2) / 2) < 20 for k, x1, y1, x2, _y2 in boxes):
            cv2.circle(picture, (x, 15), 8, LAMINATE, -1)
            holed = True
    return picture, boxes, holed


def write_panels(root: Path, count: int, seed: int, defective: float = 0.4, look: float = 0.5,
                 narrow_voids: float = 0.0) -> dict[tuple[str, str], tuple[list[PixelBox], bool]]:
    """`count` panels of two windows under `root` (panelNNN.png); (file name, window ref) -> (its boxes in the
    window's pixels, whether it has the new look): the truth an operator sees."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True)
    truth = {}
    for b in range(count):
        image = np.full((PANEL[1], PANEL[0], 3), LAMINATE, np.uint8)
        for ref, (x, y) in WINDOWS.items():
            picture, boxes, holed = window(rng, defective, look, narrow_voids)
            image[y:y + WINDOW, x:x + WINDOW] = picture
            truth[(f"panel{b:03d}.png", ref)] = (boxes, holed)
        write_image(root / f"panel{b:03d}.png", image)
    return truth


def cut_windows(root: Path, truth: dict[tuple[str, str], tuple[list[PixelBox], bool]]) -> list[np.ndarray]:
    """Each window of the panels under `root`, in the order of `truth`."""
    panels: dict[str, np.ndarray] = {}
    out = []
    for name, ref in truth:
        if name not in panels:  # two windows a panel: read once
            panels[name] = cv2.imread(str(root / name), cv2.IMREAD_COLOR)
        image = panels[name]
        x, y = WINDOWS[ref]
        out.append(image[y:y + WINDOW, x:x + WINDOW])
    return out
