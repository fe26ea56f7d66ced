"""DeepPCB (Tang et al. 2019, MIT licence): pairs of a defect-free template and a tested image of a bare board.

Each pair is `<group>/<G>/<id>_temp.jpg` (the template: the golden board) and `<id>_test.jpg` (640x640, a line-scan
camera at ~48 px/mm, binarised), with `<group>/<G>_not/<id>.txt` holding one defect a line, `x1 y1 x2 y2 type`
(spaces, or commas as the dataset's README writes them). A list file (`trainval.txt`, `test.txt`) names the pairs
as `<group>/<G>/<id>.jpg <group>/<G>_not/<id>.txt`. The dataset's protocol: a detection is right when its IoU with
a ground-truth box of the same class exceeds 0.33.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

CLASSES = ("open", "short", "mousebite", "spur", "copper", "pin_hole")  # type 1..6 in the files
IOU_MATCH = 0.33  # the dataset's own protocol


class DatasetError(ValueError):
    """A DeepPCB folder or list that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class Defect:
    box: tuple[int, int, int, int]  # x1, y1, x2, y2 in image px
    kind: int  # index into CLASSES


@dataclass(frozen=True)
class Pair:
    name: str  # the image id, e.g. 20085000
    group: str  # the board group, e.g. 20085
    test: Path
    template: Path
    defects: tuple[Defect, ...]

    def images(self) -> tuple[np.ndarray, np.ndarray]:
        """(tested, template) as HxWx3 BGR uint8."""
        out = []
        for path in (self.test, self.template):
            image = cv2.imread(str(path), cv2.IMREAD_COLOR)
            if image is None:
                raise DatasetError(f"{path} cannot be read as an image")
            out.append(image)
        return out[0], out[1]


def read_annotations(path: Path) -> tuple[Defect, ...]:
    defects = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        fields = line.replace(",", " ").split()
        try:
            x1, y1, x2, y2, kind = (int(float(f)) for f in fields)
        except ValueError:
            raise DatasetError(f"{path}:{n}: expected `x1 y1 x2 y2 type` (integers), got {line!r}") from None
        if not 1 <= kind <= len(CLASSES):
            raise DatasetError(f"{path}:{n}: defect type {kind} is not one of 1..{len(CLASSES)} "
                               f"({', '.join(f'{i + 1} {c}' for i, c in enumerate(CLASSES))})")
        if x2 <= x1 or y2 <= y1:
            raise DatasetError(f"{path}:{n}: an empty box ({x1} {y1} {x2} {y2})")
        defects.append(Defect((x1, y1, x2, y2), kind - 1))
    return tuple(defects)


def read_pairs(root: Path, list_file: Path | None = None, missing: list[str] | None = None) -> list[Pair]:
    """The pairs a list file names (default: ROOT/trainval.txt, else ROOT/test.txt), in its order. A pair whose
    files are not all there is an error, unless `missing` is given: then its `file:line: what` is added there and
    the pair left out (a copy of the dataset that lacks a few pairs is still measured on the rest)."""
    root = Path(root)
    if list_file is None:
        list_file = next((root / n for n in ("trainval.txt", "test.txt") if (root / n).is_file()), None)
        if list_file is None:
            raise DatasetError(f"{root} has neither trainval.txt nor test.txt; pass the list of pairs (--list)")
    pairs = []
    for n, line in enumerate(Path(list_file).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 2:
            raise DatasetError(f"{list_file}:{n}: expected `<image>.jpg <annotation>.txt`, got {line!r}")
        image, notes = root / fields[0], root / fields[1]
        test = image.with_name(image.stem + "_test" + image.suffix)
        template = image.with_name(image.stem + "_temp" + image.suffix)
        lacking = [path for path in (test, template, notes) if not path.is_file()]
        if lacking:
            if missing is None:
                raise DatasetError(f"{list_file}:{n}: {lacking[0]} is missing")
            missing.append(f"{list_file}:{n}: {', '.join(map(str, lacking))} missing")
            continue
        pairs.append(Pair(image.stem, image.parent.name, test, template, read_annotations(notes)))
    if not pairs:
        raise DatasetError(f"{list_file} names no pairs")
    return pairs
