"""A labelled folder of crops, ImageFolder's layout: one sub-folder a class, the class its name.

    DIR/good/p0042__r12.png
    DIR/solder_bridge/p0107__u3.jpg

or that layout in each folder of the set's own split (`DIR/train/good/...`, `DIR/valid/good/...`, `DIR/test/...`:
torchvision's and Roboflow's classification exports); own_split.py says how teaching and scoring use it.

One class is the good one (a part to pass): `--good NAME`, or the folder named `good` or `ok` when there is one.
The others are defect classes, in name order after it (the expert's label 0 is always the good class).

**Identity.** Crops of one physical part, or one board, must fall on one side of a split, else the held-out
figures are measured on near-copies of training crops. A crop's identity is its file name up to the first `__`
(`p0042__r12.png` -> `p0042`), or the whole stem when the name has none; files of one board or part named with one
prefix therefore stay together. Roboflow's exports rename every image `<stem>_<ext>.rf.<hash>` and give each
augmented copy its own hash: the identity is the original's stem (`IMG_12_jpg.rf.3fa9.jpg` -> `IMG_12`), so the
copies of one photo stay together too. The split hashes the identity, so it does not change from run to run or when
crops are added (a crop added later never moves one already held out into training).
"""
from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from .splits import SPLIT_NAMES

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"}
GOOD_NAMES = ("good", "ok")
IDENTITY_SEPARATOR = "__"
MAX_CLASS_NAME = 32  # a result's defect class column (results/schema.py)
ROBOFLOW_NAME = re.compile(r"^(?P<stem>.+)_(?:jpe?g|png|bmp|tiff?|webp)\.rf\.[0-9a-f]+$", re.IGNORECASE)


class FolderError(ValueError):
    """A labelled folder that cannot be used as it is; the message says what to change."""


@dataclass(frozen=True)
class LabelledCrop:
    path: Path
    label: str
    identity: str
    split: str | None = None  # train | val | test: the folder's own split, where it has one


@dataclass
class LabelledFolder:
    root: Path
    classes: tuple[str, ...]  # the good class first, then the defect classes by name
    crops: list[LabelledCrop]

    @property
    def good(self) -> str:
        return self.classes[0]

    def index(self, label: str) -> int:
        return self.classes.index(label)

    def counts(self) -> dict[str, int]:
        c = Counter(x.label for x in self.crops)
        return {k: c.get(k, 0) for k in self.classes}


def identity_of(path: Path) -> str:
    stem = path.stem
    roboflow = ROBOFLOW_NAME.match(stem)
    if roboflow:
        stem = roboflow["stem"]
    return stem.split(IDENTITY_SEPARATOR, 1)[0] if IDENTITY_SEPARATOR in stem else stem


def draw_of(identity: str, purpose: str = "model selection") -> float:
    """The identity's fixed place in [0, 1) for `purpose`: what every split of it compares with its share."""
    return int.from_bytes(hashlib.sha256(f"{purpose}\0{identity}".encode()).digest()[:8], "big") / 2 ** 64


def split_of(identity: str, heldout_share: float, purpose: str = "model selection") -> str:
    """'heldout' for about `heldout_share` of identities, 'train' for the rest; fixed by the identity and `purpose`.
    Each purpose splits on its own hash: a folder that was itself cut from a split (a test set held back first) is
    split again independently, not along the same line."""
    return "heldout" if draw_of(identity, purpose) < heldout_share else "train"


def stratified_heldout(strata: Mapping[str, str], heldout_share: float,
                       purpose: str = "model selection") -> frozenset[str]:
    """The identities held out when each belongs to a stratum (identity -> stratum, e.g. a part -> its type).

    Why: a board has few parts a type, so a plain hash split may hold out no part of a type (its validation row is
    empty) or every part of it (the expert never trains on it). Each identity is held out as `split_of` holds it
    out, then a stratum of two or more identities with none held out gives up its lowest draw, and one with all
    held out keeps its highest draw for training. A stratum of one identity follows its hash. Fixed by the
    identities and `purpose`; unlike the plain split, adding identities to a stratum can move its one forced
    identity (a board's parts are fixed by its rule set, so within one board's teaching it never moves)."""
    groups: dict[str, list[tuple[float, str]]] = {}
    for identity, stratum in strata.items():
        groups.setdefault(stratum, []).append((draw_of(identity, purpose), identity))
    held: set[str] = set()
    for members in groups.values():
        members.sort()
        mine = {i for d, i in members if d < heldout_share}
        if len(members) >= 2:
            if not mine:
                mine = {members[0][1]}
            elif len(mine) == len(members):
                mine.discard(members[-1][1])
        held |= mine
    return frozenset(held)


def read_folder(root: Path, good: str | None = None, classes: tuple[str, ...] | None = None) -> LabelledFolder:
    """The folder's crops (paths only; `load` reads them). `classes`: an expert's classes, which the folder's must
    be among (evaluation); the folder may lack some of them."""
    root = Path(root)
    if not root.is_dir():
        raise FolderError(f"{root} is not a directory; give a folder with one sub-folder of images per class")
    found, sides = _class_folders(root)
    empty = [n for n, files in found.items() if not files]
    found = {n: f for n, f in found.items() if f}
    if not found:
        raise FolderError(f"{root} has no class folders with images ({', '.join(sorted(IMAGE_SUFFIXES))}); lay it "
                          "out as DIR/<class>/<image>, one folder per class")
    long = [n for n in found if len(n) > MAX_CLASS_NAME]
    if long:
        raise FolderError(f"class folder {long[0]!r} of {root} is longer than the {MAX_CLASS_NAME} characters a result "
                          "stores as its defect class; rename the folder")
    if classes is not None:
        unknown = sorted(set(found) - set(classes))
        if unknown:
            raise FolderError(f"{root} has classes the expert does not know: {', '.join(unknown)}; its classes are "
                              f"{', '.join(classes)} (rename the folders, or teach a new expert with them)")
        order = tuple(classes)
    else:
        good = good or _conventional_good(found, root)
        if good not in found:
            raise FolderError(f"the good class {good!r} is not a folder of {root} with images; its classes: "
                              f"{', '.join(sorted(found))}" + (f" (empty: {', '.join(empty)})" if empty else ""))
        if len(found) < 2:
            raise FolderError(f"{root} has only the class {good!r}; an expert needs at least one defect class beside "
                              "the good one")
        order = (good, *sorted(n for n in found if n != good))
    crops = [LabelledCrop(f, label, identity_of(f), sides.get(f)) for label in order for f in found.get(label, [])]
    return LabelledFolder(root, order, crops)


def _class_folders(root: Path) -> tuple[dict[str, list[Path]], dict[Path, str]]:
    """(class -> its images, image -> its side of the folder's own split) of `root`: its class folders, or those of
    each of its split folders."""
    def subfolders(d: Path) -> list[Path]:
        return sorted(x for x in d.iterdir() if x.is_dir() and not x.name.startswith("."))

    def images(d: Path) -> list[Path]:
        return sorted(f for f in d.rglob("*") if f.suffix.lower() in IMAGE_SUFFIXES and f.is_file())

    top = subfolders(root)
    named = [d for d in top if d.name.lower() in SPLIT_NAMES]
    if not named:
        return {d.name: images(d) for d in top}, {}
    others = [d.name for d in top if d not in named]
    if others:
        raise FolderError(f"{root} mixes split folders ({', '.join(d.name for d in named)}) with class folders "
                          f"({', '.join(others)}); put every class folder inside a split folder, or none")
    found: dict[str, list[Path]] = {}
    sides: dict[Path, str] = {}
    for split in named:
        for d in subfolders(split):
            files = images(d)
            found.setdefault(d.name, []).extend(files)
            sides.update((f, SPLIT_NAMES[split.name.lower()]) for f in files)
    return found, sides


def _conventional_good(found: dict[str, list[Path]], root: Path) -> str:
    named = [n for n in found if n.lower() in GOOD_NAMES]
    if len(named) == 1:
        return named[0]
    raise FolderError(f"which class of {root} is the good one? Its classes: {', '.join(sorted(found))}; say it with "
                      "--good CLASS (a folder named good or ok is taken without asking)")


EXIF_ORIENTATION = 0x0112
TURNED = {5, 6, 7, 8}  # EXIF orientations that turn the picture a quarter


def image_size(path: Path) -> tuple[int, int]:
    """(width, height) of the image as it is read for teaching and on the line (OpenCV turns a photo by its EXIF
    orientation, as labelling tools show it), or a FolderError naming it."""
    try:
        with Image.open(path) as im:
            turned = im.getexif().get(EXIF_ORIENTATION) in TURNED
            return (im.size[1], im.size[0]) if turned else im.size
    except OSError:
        raise FolderError(f"{path} cannot be read as an image (corrupt or not an image); remove or "
                          "replace it") from None


def load(crop: LabelledCrop) -> np.ndarray:
    """The crop as HxWx3 BGR uint8, the way the line's crops are (grey images repeated over three channels)."""
    data = np.fromfile(str(crop.path), dtype=np.uint8)
    image = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    if image is None:
        raise FolderError(f"{crop.path} cannot be read as an image (corrupt or not an image); remove or replace it")
    if min(image.shape[:2]) < 8:
        raise FolderError(f"{crop.path} is {image.shape[1]}x{image.shape[0]} px; crops must be at least 8 px a side")
    return image
