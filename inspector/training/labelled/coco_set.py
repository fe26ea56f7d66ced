"""A COCO set: one `DIR/*.json` with `images`, `annotations` (`bbox`: x, y, w, h in pixels) and `categories`, the
images beside it (their `file_name` relative to its folder, or to its images/); or one such file in each split folder
(`DIR/train/`, `DIR/valid/`, `DIR/test/`: Roboflow's export), which is the set's own split.

A category no annotation uses that names other categories' `supercategory` is a grouping, not a class (Roboflow
writes the project's name so), and is left out; an annotation marked `iscrowd` is an ignored box (boxes.py). Class
names are matched across split files by name; the first file's order is kept.
"""
from __future__ import annotations

import json
from pathlib import Path

from .boxes import Box, BoxedImage, BoxSet, image_size
from .folder import FolderError, identity_of
from .splits import SPLIT_NAMES


def split_files(root: Path) -> list[tuple[Path, str]]:
    """(json, side) for each split folder of `root` holding one .json; [] when none does."""
    out = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and p.name.lower() in SPLIT_NAMES):
        jsons = sorted(folder.glob("*.json"))
        if len(jsons) > 1:
            raise FolderError(f"{folder} holds {len(jsons)} .json files; a COCO split folder holds one")
        if jsons:
            out.append((jsons[0], SPLIT_NAMES[folder.name.lower()]))
    order = {"train": 0, "val": 1, "test": 2}
    return sorted(out, key=lambda f: order[f[1]])


def read_coco(root: Path, files: list[tuple[Path, str | None]]) -> BoxSet:
    docs = [(path, side, _load(path)) for path, side in files]
    used = {c["name"] for _path, _side, (cats, _files, notes) in docs for c in cats
            if any(a.get("category_id") == c["id"] for a in notes)}
    groups = {c.get("supercategory") for *_, (cats, _f, _n) in docs for c in cats}
    names: list[str] = []
    for path, _side, (cats, _files, _notes) in docs:
        kept = [str(c["name"]) for c in cats if c["name"] in used or c["name"] not in groups]
        if names and set(kept) != set(names):
            raise FolderError(f"{path}: its classes ({', '.join(sorted(kept))}) are not those of {docs[0][0]} "
                              f"({', '.join(sorted(names))}); export the splits from one project")
        names = names or kept
    images = []
    for path, side, (cats, files, notes) in docs:
        index = {c["id"]: names.index(str(c["name"])) for c in cats if str(c["name"]) in names}
        images += _images(path, side, index, files, notes)
    return BoxSet(root, tuple(names), images, "coco")


def _load(path: Path) -> tuple[list[dict], dict, list[dict]]:
    """(categories by id, images by id, annotations) of one file."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        cats = sorted(doc["categories"], key=lambda c: c["id"])
        for c in cats:
            c["name"] = str(c["name"])
        files = {im["id"]: im for im in doc["images"]}
        notes = list(doc.get("annotations", []))
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise FolderError(f"{path}: not a COCO file with images, annotations and categories ({exc})") from None
    return cats, files, notes


def _images(path: Path, side: str | None, index: dict[int, int], files: dict, notes: list[dict]) -> list[BoxedImage]:
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
    here = path.parent
    images = []
    for key, im in files.items():
        file = next((p for p in (here / im["file_name"], here / "images" / im["file_name"]) if p.is_file()), None)
        if file is None:
            raise FolderError(f"{path}: image {key} ({im['file_name']}) is neither under {here} nor {here / 'images'}")
        images.append(BoxedImage(file, image_size(file), tuple(by_image[key]), identity_of(file), side))
    return images
