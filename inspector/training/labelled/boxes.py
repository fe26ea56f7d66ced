"""Images with labelled boxes, in the two layouts plants export: YOLO and COCO.

YOLO: `DIR/data.yaml` naming the classes (`names:` a list, or a map index -> name), the images under
`DIR/images/` (any depth) and one `DIR/labels/<same path>.txt` per image, a box a line: `class cx cy w h`,
normalised to the image (an image without a label file, or with an empty one, has no boxes). COCO: one
`DIR/*.json` with `images`, `annotations` (`bbox`: x, y, w, h in pixels) and `categories`, the images beside it
(their `file_name` relative to DIR, or to DIR/images).

A box is kept in pixels, corners x1 y1 x2 y2. The image's identity (folder.py: the file name up to `__`) keeps every
image of one board on one side of a split. Every error names the file and line (or annotation id) and what to fix.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml
from PIL import Image

from .folder import IMAGE_SUFFIXES, FolderError, identity_of


@dataclass(frozen=True)
class Box:
    kind: int  # index into the set's classes
    x1: float
    y1: float
    x2: float
    y2: float


@dataclass(frozen=True)
class BoxedImage:
    path: Path
    size: tuple[int, int]  # width, height
    boxes: tuple[Box, ...]
    identity: str


@dataclass
class BoxSet:
    root: Path
    classes: tuple[str, ...]
    images: list[BoxedImage]
    layout: str  # yolo | coco

    def counts(self) -> dict[str, int]:
        out = {c: 0 for c in self.classes}
        for im in self.images:
            for b in im.boxes:
                out[self.classes[b.kind]] += 1
        return out


def read_boxes(root: Path) -> BoxSet:
    """The YOLO or COCO set at `root` (YOLO when it has data.yaml, COCO when it has one .json)."""
    root = Path(root)
    if not root.is_dir():
        raise FolderError(f"{root} is not a directory; give a YOLO set (data.yaml, images/, labels/) or a COCO set "
                          "(one .json beside its images)")
    if (root / "data.yaml").is_file():
        return _yolo(root)
    jsons = sorted(root.glob("*.json"))
    if len(jsons) == 1:
        return _coco(root, jsons[0])
    raise FolderError(f"{root} holds neither data.yaml (YOLO) nor exactly one .json (COCO; found {len(jsons)})")


def _size(path: Path) -> tuple[int, int]:
    try:
        with Image.open(path) as im:
            return im.size
    except OSError:
        raise FolderError(f"{path} cannot be read as an image (corrupt or not an image); remove or "
                          "replace it") from None


def _yolo(root: Path) -> BoxSet:
    doc = yaml.safe_load((root / "data.yaml").read_text(encoding="utf-8")) or {}
    names = doc.get("names") if isinstance(doc, dict) else None
    if isinstance(names, dict):
        try:
            names = [names[k] for k in sorted(names, key=int)]
        except (ValueError, KeyError):
            names = None
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise FolderError(f"{root / 'data.yaml'}: `names:` must list the class names (a list, or a map 0: name)")
    images_dir = root / "images"
    if not images_dir.is_dir():
        raise FolderError(f"{root} has no images/ folder (YOLO layout: images/..., labels/... with the same paths)")
    images = []
    for path in sorted(p for p in images_dir.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file()):
        w, h = _size(path)
        label = (root / "labels" / path.relative_to(images_dir)).with_suffix(".txt")
        boxes = []
        if label.is_file():
            for n, line in enumerate(label.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                fields = line.split()
                try:
                    kind, cx, cy, bw, bh = int(fields[0]), *(float(f) for f in fields[1:5])
                    if len(fields) != 5:
                        raise ValueError
                except (ValueError, IndexError):
                    raise FolderError(f"{label}:{n}: expected `class cx cy w h` (normalised), got {line!r}") from None
                if not 0 <= kind < len(names):
                    raise FolderError(f"{label}:{n}: class {kind} is not one of data.yaml's 0..{len(names) - 1}")
                if not (0 <= cx <= 1 and 0 <= cy <= 1 and 0 < bw <= 1 and 0 < bh <= 1):
                    raise FolderError(f"{label}:{n}: centre and size must be normalised to the image (0..1), got "
                                      f"{line!r}")
                boxes.append(Box(kind, (cx - bw / 2) * w, (cy - bh / 2) * h, (cx + bw / 2) * w, (cy + bh / 2) * h))
        images.append(BoxedImage(path, (w, h), tuple(boxes), identity_of(path)))
    if not images:
        raise FolderError(f"{images_dir} holds no images ({', '.join(sorted(IMAGE_SUFFIXES))})")
    return BoxSet(root, tuple(names), images, "yolo")


def _coco(root: Path, path: Path) -> BoxSet:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        cats = sorted(doc["categories"], key=lambda c: c["id"])
        names = tuple(str(c["name"]) for c in cats)
        index = {c["id"]: i for i, c in enumerate(cats)}
        files = {im["id"]: im for im in doc["images"]}
        annotations = doc.get("annotations", [])
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise FolderError(f"{path}: not a COCO file with images, annotations and categories ({exc})") from None
    by_image: dict[int, list[Box]] = {k: [] for k in files}
    for a in annotations:
        if a.get("image_id") not in files or a.get("category_id") not in index:
            raise FolderError(f"{path}: annotation {a.get('id')} names image {a.get('image_id')} or category "
                              f"{a.get('category_id')}, which the file does not have")
        x, y, w, h = (float(v) for v in a["bbox"])
        if w <= 0 or h <= 0:
            raise FolderError(f"{path}: annotation {a.get('id')} has an empty bbox {a['bbox']}")
        by_image[a["image_id"]].append(Box(index[a["category_id"]], x, y, x + w, y + h))
    images = []
    for key, im in files.items():
        file = next((p for p in (root / im["file_name"], root / "images" / im["file_name"]) if p.is_file()), None)
        if file is None:
            raise FolderError(f"{path}: image {key} ({im['file_name']}) is neither under {root} nor {root / 'images'}")
        images.append(BoxedImage(file, _size(file), tuple(by_image[key]), identity_of(file)))
    return BoxSet(root, names, images, "coco")
