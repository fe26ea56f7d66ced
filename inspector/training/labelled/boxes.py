"""Images with labelled boxes, in the three layouts plants export: YOLO, COCO and Pascal VOC.

YOLO (yolo_set.py): `DIR/data.yaml` naming the classes, the images under `DIR/images/` or wherever its `train:`,
`val:` and `test:` point (Ultralytics' and Roboflow's exports), one label file per image (`class cx cy w h`, or a
polygon whose bounds are the box). COCO (coco_set.py): one `DIR/*.json`, or one in each split folder
(`DIR/train/`, `DIR/valid/`, `DIR/test/`, Roboflow's), `bbox` x, y, w, h in pixels. Pascal VOC (voc_set.py): an
`.xml` per image (`<bndbox>` xmin ymin xmax ymax, 1-based pixels, the max inclusive).

A box is kept in pixels, corners x1 y1 x2 y2. A box marked `difficult` (VOC) or `iscrowd` (COCO) is **ignored**:
not taught, and neither a hit nor a miss when scoring (VOC's and COCO's own protocols); a box found on it counts for
nothing. An image's identity (folder.py: the file name up to `__`) keeps every image of one board on one side of a
split. A set may carry **its own split** (split folders, or data.yaml's keys): each image then names its side
(train, val or test; own_split.py says how teaching and scoring use it). Every error names the file and line (or
annotation id) and what to fix.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .folder import FolderError
from .own_split import own_splits
from .splits import SPLIT_NAMES


@dataclass(frozen=True)
class Box:
    kind: int  # index into the set's classes
    x1: float
    y1: float
    x2: float
    y2: float
    ignore: bool = False  # difficult (VOC) or a crowd (COCO): neither taught nor scored


@dataclass(frozen=True)
class BoxedImage:
    path: Path
    size: tuple[int, int]  # width, height
    boxes: tuple[Box, ...]
    identity: str
    split: str | None = None  # train | val | test: the set's own split, where it has one

    @property
    def scored(self) -> tuple[Box, ...]:
        """The boxes that are taught and scored (not ignored)."""
        return tuple(b for b in self.boxes if not b.ignore)


@dataclass
class BoxSet:
    root: Path
    classes: tuple[str, ...]
    images: list[BoxedImage]
    layout: str  # yolo | coco | voc
    note: str = ""  # what reading left out and why, said where the set is taught or scored

    def counts(self) -> dict[str, int]:
        """Boxes a class, the ignored ones left out."""
        out = {c: 0 for c in self.classes}
        for im in self.images:
            for b in im.scored:
                out[self.classes[b.kind]] += 1
        return out

    def ignored(self) -> int:
        return sum(len(im.boxes) - len(im.scored) for im in self.images)

    def splits(self) -> dict[str, int]:
        """The set's own split: side -> images ({} when it has none)."""
        return own_splits(self.images)


def split_named(root: Path, path: Path) -> str | None:
    """The side a file's first folder under `root` names (train/, valid/, test/, ...), or None."""
    parts = path.relative_to(root).parts
    return SPLIT_NAMES.get(parts[0].lower()) if len(parts) > 1 else None


def check_split_complete(root: Path, images: list[BoxedImage]) -> None:
    """A set is split by its folders everywhere or nowhere: an image outside them would fall on no side."""
    outside = [im.path for im in images if im.split is None]
    if outside and len(outside) < len(images):
        raise FolderError(f"{root} is split into folders ({', '.join(sorted({im.split for im in images if im.split}))}"
                          f") but {len(outside)} images lie outside them, e.g. {outside[0]}; move them into a split "
                          "folder, or out of the set")
