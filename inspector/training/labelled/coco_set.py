"""A COCO set: one `DIR/*.json` with `images`, `annotations` (`bbox`: x, y, w, h in pixels) and `categories`; or
one such file in each split folder (`DIR/train/`, `DIR/valid/`, `DIR/test/`: Roboflow's export); or the file(s)
under `DIR/annotations/` (CVAT's `instances_default.json`; COCO's own `instances_train2017.json`,
`instances_val2017.json`, the split read from the name; other kinds, captions or keypoints, left aside). Split
folders and split names are the set's own split. An image's `file_name` is read relative to its file's folder,
its images/, DIR or DIR/images, else found by its name alone anywhere under DIR (an exporter's path from another
machine), where that name is not ambiguous.

A category no annotation uses that names other categories' `supercategory` is a grouping, not a class (Roboflow
writes the project's name so), and is left out; an annotation marked `iscrowd` is an ignored box (boxes.py). Class
names are matched across split files by name; the first file's order is kept.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from .boxes import Box, BoxedImage, BoxSet
from .folder import IMAGE_SUFFIXES, FolderError, identity_of, image_size
from .splits import SPLIT_NAMES

SIDE_ORDER = {"train": 0, "val": 1, "test": 2}  # the first file's class order is kept: train's


def split_files(root: Path) -> list[tuple[Path, str]]:
    """(json, side) for each split folder of `root` holding one .json; [] when none does."""
    out = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and p.name.lower() in SPLIT_NAMES):
        jsons = sorted(folder.glob("*.json"))
        if len(jsons) > 1:
            raise FolderError(f"{folder} holds {len(jsons)} .json files; a COCO split folder holds one")
        if jsons:
            out.append((jsons[0], SPLIT_NAMES[folder.name.lower()]))
    return sorted(out, key=lambda f: SIDE_ORDER[f[1]])


def annotation_files(root: Path) -> list[tuple[Path, str | None]]:
    """(json, side) of DIR/annotations/: its one file, or its instance files each naming its split; [] for none."""
    folder = root / "annotations"
    jsons = sorted(folder.glob("*.json")) if folder.is_dir() else []
    instances = [j for j in jsons if j.stem.lower().startswith("instances")]
    jsons = instances or jsons
    if len(jsons) <= 1:
        return [(j, None) for j in jsons]
    sides = [(j, _side_named(j.stem)) for j in jsons]
    unnamed = [j.name for j, side in sides if side is None]
    if unnamed or len({side for _j, side in sides}) < len(sides):
        raise FolderError(f"{folder} holds {len(jsons)} annotation files ({', '.join(j.name for j in jsons)}); with "
                          "more than one, each names its own split (instances_train.json, instances_val.json, ...)")
    return sorted(sides, key=lambda f: SIDE_ORDER[f[1]])


def _side_named(stem: str) -> str | None:
    """The split a file's name gives (`instances_train2017` -> train), or None."""
    words = {re.sub(r"\d+$", "", w) for w in re.split(r"[^a-z0-9]+", stem.lower())}
    named = {SPLIT_NAMES[w] for w in words if w in SPLIT_NAMES}
    return named.pop() if len(named) == 1 else None


def read_coco(root: Path, files: list[tuple[Path, str | None]]) -> BoxSet:
    docs = [(path, side, _load(path)) for path, side in files]
    used = set()
    for _path, _side, (cats, _files, notes) in docs:
        ids = {a.get("category_id") for a in notes}
        used |= {c["name"] for c in cats if c["id"] in ids}
    groups = {c.get("supercategory") for *_, (cats, _f, _n) in docs for c in cats}
    names: list[str] = []
    for path, _side, (cats, _files, _notes) in docs:
        kept = [str(c["name"]) for c in cats if c["name"] in used or c["name"] not in groups]
        if names and set(kept) != set(names):
            raise FolderError(f"{path}: its classes ({', '.join(sorted(kept))}) are not those of {docs[0][0]} "
                              f"({', '.join(sorted(names))}); export the splits from one project")
        names = names or kept
    images = []
    finder = _Finder(root)
    for path, side, (cats, files, notes) in docs:
        index = {c["id"]: names.index(str(c["name"])) for c in cats if str(c["name"]) in names}
        images += _images(path, side, index, files, notes, finder)
    return BoxSet(root, tuple(names), images, "coco")


class _Finder:
    """An image a file names, where exporters put it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._by_name: dict[str, list[Path]] | None = None

    def find(self, path: Path, file_name: str) -> Path | None:
        here = path.parent
        for place in (here, here / "images", self.root, self.root / "images"):
            if (place / file_name).is_file():
                return place / file_name
        if self._by_name is None:
            self._by_name = {}
            for p in self.root.rglob("*"):
                if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file():
                    self._by_name.setdefault(p.name, []).append(p)
        name = re.split(r"[\\/]", file_name)[-1]
        found = self._by_name.get(name, [])
        if len(found) > 1:
            raise FolderError(f"{path}: image {file_name!r} is not at that path, and {len(found)} images under "
                              f"{self.root} bear its name ({found[0]}, {found[1]}); give the path, or rename one")
        return found[0] if found else None


def _load(path: Path) -> tuple[list[dict], dict, list[dict]]:
    """(categories by id, images by id, annotations) of one file."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8-sig"))
        cats = sorted(doc["categories"], key=lambda c: c["id"])
        for c in cats:
            c["name"] = str(c["name"])
        files = {im["id"]: im for im in doc["images"]}
        notes = list(doc.get("annotations", []))
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise FolderError(f"{path}: not a COCO file with images, annotations and categories ({exc})") from None
    return cats, files, notes


def _images(path: Path, side: str | None, index: dict[int, int], files: dict, notes: list[dict],
            finder: _Finder) -> list[BoxedImage]:
    by_image: dict[int, list[Box]] = {k: [] for k in files}
    for a in notes:
        if a.get("image_id") not in files or a.get("category_id") not in index:
            raise FolderError(f"{path}: annotation {a.get('id')} names image {a.get('image_id')} or category "
                              f"{a.get('category_id')}, which the file does not have")
        try:
            x, y, w, h = (float(v) for v in a["bbox"])
        except (KeyError, TypeError, ValueError):
            raise FolderError(f"{path}: annotation {a.get('id')} has no `bbox` [x, y, w, h] (a detector is taught "
                              "from boxes; export with boxes)") from None
        if w <= 0 or h <= 0:
            raise FolderError(f"{path}: annotation {a.get('id')} has an empty bbox {a['bbox']}")
        by_image[a["image_id"]].append(Box(index[a["category_id"]], x, y, x + w, y + h, bool(a.get("iscrowd"))))
    images = []
    for key, im in files.items():
        file = finder.find(path, str(im["file_name"]))
        if file is None:
            raise FolderError(f"{path}: image {key} ({im['file_name']}) is neither under {path.parent}, its images/, "
                              f"nor anywhere under {finder.root} by its name")
        images.append(BoxedImage(file, image_size(file), tuple(by_image[key]), identity_of(file), side))
    return images
