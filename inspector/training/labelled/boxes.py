"""Images with labelled boxes, in the three layouts plants export: YOLO, COCO and Pascal VOC.

YOLO: `DIR/data.yaml` naming the classes (`names:` a list, or a map index -> name), the images under
`DIR/images/` (any depth) and one `DIR/labels/<same path>.txt` per image, a box a line: `class cx cy w h`,
normalised to the image (an image without a label file, or with an empty one, has no boxes). COCO: one
`DIR/*.json` with `images`, `annotations` (`bbox`: x, y, w, h in pixels) and `categories`, the images beside it
(their `file_name` relative to DIR, or to DIR/images). Pascal VOC (LabelImg's default, CVAT's and Roboflow's
export): one `.xml` per image (`<object><name>` and `<bndbox>` xmin ymin xmax ymax, 1-based pixels, the max
inclusive), under `DIR/Annotations/` with the images in `DIR/JPEGImages/`, or beside its image anywhere under DIR;
the set is its annotation files (a clean image is an .xml without objects). VOC lists no classes: a `classes.txt`,
`labels.txt` (a name a line) or CVAT's `labelmap.txt` (its `background` left out) at DIR gives them in order, and
an object named otherwise is refused; without one the names found, sorted.

A box is kept in pixels, corners x1 y1 x2 y2. The image's identity (folder.py: the file name up to `__`) keeps every
image of one board on one side of a split. Every error names the file and line (or annotation id) and what to fix.
"""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
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
    layout: str  # yolo | coco | voc

    def counts(self) -> dict[str, int]:
        out = {c: 0 for c in self.classes}
        for im in self.images:
            for b in im.boxes:
                out[self.classes[b.kind]] += 1
        return out


def read_boxes(root: Path) -> BoxSet:
    """The YOLO, COCO or VOC set at `root` (YOLO when it has data.yaml, COCO when it has one .json, VOC when it has
    .xml annotations)."""
    root = Path(root)
    if not root.is_dir():
        raise FolderError(f"{root} is not a directory; give a YOLO set (data.yaml, images/, labels/), a COCO set "
                          "(one .json beside its images) or a Pascal VOC set (an .xml per image)")
    if (root / "data.yaml").is_file():
        return _yolo(root)
    jsons = sorted(root.glob("*.json"))
    if len(jsons) == 1:
        return _coco(root, jsons[0])
    xmls = sorted(p for p in root.rglob("*.xml") if p.is_file())
    if xmls and not jsons:
        return _voc(root, xmls)
    raise FolderError(f"{root} holds neither data.yaml (YOLO), exactly one .json (COCO; found {len(jsons)}) nor "
                      ".xml annotations alone (Pascal VOC)")


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


CLASS_LISTS = ("classes.txt", "labels.txt", "labelmap.txt")  # VOC's class order, where the exporter wrote one


def _voc(root: Path, xmls: list[Path]) -> BoxSet:
    listed = _voc_classes(root)
    read = [_voc_file(root, xml) for xml in xmls]
    names = listed or tuple(sorted({name for *_image, objects in read for name, *_ in objects}))
    if not names:
        raise FolderError(f"{root}: no .xml names an object and no {' or '.join(CLASS_LISTS)} lists the classes; "
                          "a detector needs at least one class")
    index = {n: i for i, n in enumerate(names)}
    images = []
    for (path, size, objects), xml in zip(read, xmls):
        boxes = []
        for name, n, x1, y1, x2, y2 in objects:
            if name not in index:
                raise FolderError(f"{xml}: object {n} is named {name!r}, which {root / _voc_list(root)} does not "
                                  f"list ({', '.join(names)}); add it there or correct the label")
            boxes.append(Box(index[name], x1, y1, x2, y2))
        images.append(BoxedImage(path, size, tuple(boxes), identity_of(path)))
    return BoxSet(root, names, images, "voc")


def _voc_list(root: Path) -> str:
    return next((name for name in CLASS_LISTS if (root / name).is_file()), "")


def _voc_classes(root: Path) -> tuple[str, ...]:
    """The class names a list file at `root` gives, in its order (CVAT's labelmap: `name:colour:parts:actions`,
    `#` comments, and its `background`, a segmentation label no box carries, left out), or () where there is none."""
    name = _voc_list(root)
    if not name:
        return ()
    names = []
    for line in (root / name).read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            names.append(line.split(":", 1)[0].strip() if name == "labelmap.txt" else line)
    if name == "labelmap.txt" and "background" in names:
        names.remove("background")
    if len(set(names)) != len(names) or not all(names):
        raise FolderError(f"{root / name}: a class is named twice or empty ({names}); one name a line, each once")
    return tuple(names)


def _voc_file(root: Path, xml: Path) -> tuple[Path, tuple[int, int], list[tuple[str, int, float, float, float, float]]]:
    """One annotation file: its image, that image's size (checked against the file's) and its objects, each (name,
    its number in the file, x1, y1, x2, y2) in 0-based pixels with the max exclusive."""
    try:
        doc = ET.parse(xml).getroot()
    except ET.ParseError as exc:
        raise FolderError(f"{xml}: line {exc.position[0]}: not readable XML ({exc}); export it again") from None
    if doc.tag != "annotation":
        raise FolderError(f"{xml}: the root element is <{doc.tag}>, not a Pascal VOC <annotation>")
    image = _voc_image(root, xml, (doc.findtext("filename") or "").strip())
    w, h = _size(image)
    stated = tuple(_number(doc.findtext(f"size/{k}"), 0.0) for k in ("width", "height"))
    if all(stated) and stated != (w, h):
        raise FolderError(f"{xml}: says its image is {stated[0]:g}x{stated[1]:g} px but {image.name} is {w}x{h}; "
                          "its boxes belong to another size of the image: export them again")
    objects = []
    for n, obj in enumerate(doc.iter("object"), 1):
        name = (obj.findtext("name") or "").strip()
        corners = [_number(obj.findtext(f"bndbox/{k}"), None) for k in ("xmin", "ymin", "xmax", "ymax")]
        if not name or None in corners:
            raise FolderError(f"{xml}: object {n} lacks its <name> or a <bndbox> xmin, ymin, xmax, ymax number")
        xmin, ymin, xmax, ymax = corners
        x1, y1, x2, y2 = max(0.0, xmin - 1), max(0.0, ymin - 1), min(float(w), xmax), min(float(h), ymax)
        if not (x1 < x2 and y1 < y2):
            raise FolderError(f"{xml}: object {n} ({name}) has an empty box within the {w}x{h} image: xmin {xmin:g}, "
                              f"ymin {ymin:g}, xmax {xmax:g}, ymax {ymax:g}")
        objects.append((name, n, x1, y1, x2, y2))
    return image, (w, h), objects


def _voc_image(root: Path, xml: Path, filename: str) -> Path:
    """The image an annotation names: beside it, under DIR/JPEGImages or DIR/images; by the annotation's own stem
    where the name is missing or stale (a renamed file)."""
    places = (xml.parent, root / "JPEGImages", root / "images")
    named = [place / filename for place in places] if filename else []
    stems = [place / (xml.stem + suffix) for place in places for suffix in sorted(IMAGE_SUFFIXES)]
    found = next((p for p in [*named, *stems] if p.is_file()), None)
    if found is None:
        raise FolderError(f"{xml}: its image {filename or xml.stem!r} is neither beside it nor under "
                          f"{root / 'JPEGImages'} or {root / 'images'}")
    return found


def _number(text: str | None, default: float | None) -> float | None:
    try:
        return float(text) if text is not None and text.strip() else default
    except ValueError:
        return default
