"""A YOLO set: `DIR/data.yaml` naming the classes (`names:` a list, or a map index -> name) and the images; or,
as LabelImg, Label Studio and CVAT's "YOLO 1.1" write it, a class list (`classes.txt` or `obj.names`, a name a
line) with the images anywhere under DIR and their labels beside them or in a mirrored labels/ folder.

Where the images are: data.yaml's `train:`, `val:` and `test:` when it has them (Ultralytics' and Roboflow's
exports), each a folder of images, a .txt listing image paths, or a list of either, relative to its `path:` (itself
relative to data.yaml; a `path:` not here, the exporting machine's, falls back to data.yaml's folder) or to
data.yaml's folder; a path written `../x` that is not there is read as `x` there (Roboflow writes
`train: ../train/images` beside the set's own train/). The keys are the set's own split. Without
them, every image under `DIR/images/` (any depth), its split named by a split folder under images/ where there
is one (`images/train/`, `images/val/`).

An image's labels are at its path with its last `images` folder read as `labels` and the suffix `.txt`
(Ultralytics' rule; an image without one, or with an empty one, has no boxes). A line is a box `class cx cy w h`,
or a polygon `class x1 y1 x2 y2 x3 y3 ...` (a segmentation or oriented-box export), whose bounds are the box, as
Ultralytics reads one for detection; coordinates normalised to the image.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from .boxes import Box, BoxedImage, BoxSet, check_split_complete, split_named
from .folder import IMAGE_SUFFIXES, FolderError, identity_of, image_size
from .splits import SPLIT_NAMES

SPLIT_KEYS = ("train", "val", "test")
NAME_LISTS = ("classes.txt", "obj.names")  # a darknet-style export's class list, a name a line


def find_yaml(root: Path) -> Path | None:
    """The set's data.yaml; else the one .yaml at DIR that names classes (an export that named it otherwise)."""
    if (root / "data.yaml").is_file():
        return root / "data.yaml"
    named = []
    for path in sorted([*root.glob("*.yaml"), *root.glob("*.yml")]):
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8-sig"))
        except (yaml.YAMLError, UnicodeDecodeError):
            continue
        if isinstance(doc, dict) and "names" in doc:
            named.append(path)
    if len(named) > 1:
        raise FolderError(f"{root} holds {len(named)} YAML files naming classes ({', '.join(p.name for p in named)}); "
                          "keep the one describing this set, or name it data.yaml")
    return named[0] if named else None


def find_listing(root: Path) -> Path | None:
    """A darknet-style export's class list (NAME_LISTS) at DIR, when label .txt files lie under DIR too."""
    listing = next((root / n for n in NAME_LISTS if (root / n).is_file()), None)
    if listing is None:
        return None
    return listing if any(p.name not in NAME_LISTS for p in root.rglob("*.txt")) else None


def read_yolo(root: Path, spec: Path) -> BoxSet:
    if spec.name in NAME_LISTS:
        return _read_listed(root, spec)
    try:
        doc = yaml.safe_load(spec.read_text(encoding="utf-8-sig")) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise FolderError(f"{spec}: {where}not readable YAML ({getattr(exc, 'problem', exc)}); correct it") from None
    names = _names(spec, doc)
    listed = {k: doc.get(k) for k in SPLIT_KEYS if isinstance(doc, dict) and doc.get(k)}
    if listed:
        sources = {side: _listed_images(spec, doc, key, value) for key, value in listed.items()
                   for side in (SPLIT_NAMES[key],)}
        _check_disjoint(spec, sources)
        found = [(path, side) for side, paths in sources.items() for path in paths]
    else:
        images_dir = root / "images"
        if not images_dir.is_dir():
            raise FolderError(f"{root} has no images/ folder and {spec.name} no `train:`/`val:` (YOLO layout: images/"
                              "..., labels/... with the same paths, or data.yaml saying where the images are)")
        found = [(path, split_named(images_dir, path)) for path in _images_under(images_dir)]
    images = [BoxedImage(path, size, _labels(path, size, len(names), spec.name), identity_of(path), side)
              for path, side in found for size in (image_size(path),)]
    if not images:
        raise FolderError(f"{root}: no images ({', '.join(sorted(IMAGE_SUFFIXES))}) where {spec.name} says")
    check_split_complete(root, images)
    return BoxSet(root, tuple(names), images, "yolo")


def _names(spec: Path, doc: object) -> list[str]:
    names = doc.get("names") if isinstance(doc, dict) else None
    if isinstance(names, dict):
        try:
            names = [names[k] for k in sorted(names, key=int)]
        except (ValueError, KeyError):
            names = None
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise FolderError(f"{spec}: `names:` must list the class names (a list, or a map 0: name)")
    return names


def _images_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())


def _listed_images(spec: Path, doc: dict, key: str, value: object) -> list[Path]:
    """The images one key names: folders, .txt lists, or a list of either."""
    base = Path(doc["path"]) if isinstance(doc.get("path"), str) and doc["path"] else Path(".")
    base = base if base.is_absolute() else spec.parent / base
    bases = [base] if base.is_dir() else [base, spec.parent]  # `path:` of the exporting machine: read from here
    entries = value if isinstance(value, list) else [value]
    out: list[Path] = []
    for entry in entries:
        if not isinstance(entry, str):
            raise FolderError(f"{spec}: `{key}:` must be a folder, a .txt list of images, or a list of them; got "
                              f"{entry!r}")
        tried = [b / e for b in bases for e in dict.fromkeys([entry, entry[3:] if entry.startswith("../") else entry])]
        place = next((p for p in tried if p.exists()), None)
        if place is None:
            raise FolderError(f"{spec}: `{key}: {entry}` is not there (looked for {' and '.join(map(str, tried))}); "
                              "correct the path, or remove the key")
        if place.is_dir():
            out += _images_under(place)
        else:
            out += _image_list(place)
    return out


def _image_list(listing: Path) -> list[Path]:
    """A .txt of image paths, a line each, relative to the list's folder unless absolute."""
    out = []
    for n, line in enumerate(listing.read_text(encoding="utf-8-sig").splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        path = Path(line) if Path(line).is_absolute() else listing.parent / line
        if not path.is_file():
            raise FolderError(f"{listing}:{n}: the image {line!r} is not there ({path})")
        out.append(path)
    return out


def _check_disjoint(spec: Path, sources: dict[str, list[Path]]) -> None:
    """One image on two sides would be scored on what it was taught."""
    seen: dict[Path, str] = {}
    for side, paths in sources.items():
        for path in paths:
            other = seen.setdefault(path.resolve(), side)
            if other != side:
                raise FolderError(f"{spec}: {path} is listed under both `{other}` and `{side}`; an image held out must "
                                  "not be taught: point each key at its own images, or drop `val:` and `test:` to let "
                                  "the teacher hold out a share by identity")


def label_path(image: Path) -> Path:
    """Ultralytics' rule: the last `images` folder of the path read as `labels`, the suffix .txt."""
    parts = list(image.parts)
    at = max((i for i, p in enumerate(parts[:-1]) if p == "images"), default=None)
    if at is None:
        return image.with_suffix(".txt")  # labels beside their images
    parts[at] = "labels"
    return Path(*parts).with_suffix(".txt")


def _labels(image: Path, size: tuple[int, int], classes: int, listing: str = "data.yaml") -> tuple[Box, ...]:
    label = label_path(image)
    if not label.is_file():
        return ()
    w, h = size
    boxes = []
    for n, line in enumerate(label.read_text(encoding="utf-8-sig").splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        try:
            kind, numbers = _class_index(fields[0]), [float(f) for f in fields[1:]]
        except ValueError:
            raise FolderError(f"{label}:{n}: expected `class cx cy w h` or a polygon `class x1 y1 x2 y2 x3 y3 ...` "
                              f"(normalised), got {line!r}") from None
        if len(numbers) != 4 and (len(numbers) < 6 or len(numbers) % 2):
            hint = " (a sixth field: is it a prediction file with confidences?)" if len(numbers) == 5 else ""
            raise FolderError(f"{label}:{n}: expected `class cx cy w h` or a polygon `class x1 y1 x2 y2 x3 y3 ...` "
                              f"(normalised), got {line!r}{hint}")
        if not 0 <= kind < classes:
            raise FolderError(f"{label}:{n}: class {kind} is not one of {listing}'s 0..{classes - 1}")
        if len(numbers) == 4:
            cx, cy, bw, bh = numbers
            if not (0 <= cx <= 1 and 0 <= cy <= 1 and 0 < bw <= 1 and 0 < bh <= 1):
                raise FolderError(f"{label}:{n}: centre and size must be normalised to the image (0..1), got {line!r}")
            x1, y1, x2, y2 = cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2
        else:
            xs, ys = numbers[0::2], numbers[1::2]
            if not all(-0.01 <= v <= 1.01 for v in numbers):
                raise FolderError(f"{label}:{n}: polygon points must be normalised to the image (0..1), got {line!r}")
            x1, y1, x2, y2 = (min(1.0, max(0.0, v)) for v in (min(xs), min(ys), max(xs), max(ys)))
            twice_area = sum(xs[i] * ys[i - 1] - xs[i - 1] * ys[i] for i in range(len(xs)))  # the shoelace
            if not (x1 < x2 and y1 < y2) or abs(twice_area) * w * h < 1e-6:
                raise FolderError(f"{label}:{n}: the polygon encloses nothing (its points lie on a line): {line!r}")
        boxes.append(Box(kind, x1 * w, y1 * h, x2 * w, y2 * h))
    return tuple(boxes)


def _read_listed(root: Path, listing: Path) -> BoxSet:
    """A darknet-style export: its class list and every image under DIR, split by split folders where it has them."""
    names = [line.strip() for line in listing.read_text(encoding="utf-8-sig").splitlines() if line.strip()]
    if not names or len(set(names)) != len(names):
        raise FolderError(f"{listing}: a class is named twice, or none is named ({names}); one name a line, each once")
    images = [BoxedImage(path, size, _labels(path, size, len(names), listing.name), identity_of(path),
                         split_named(root, path)) for path in _images_under(root) for size in (image_size(path),)]
    if not images:
        raise FolderError(f"{root}: no images ({', '.join(sorted(IMAGE_SUFFIXES))}) beside {listing.name}")
    check_split_complete(root, images)
    return BoxSet(root, tuple(names), images, "yolo")


def _class_index(text: str) -> int:
    """`3`, or `3.0` as some exporters write it; anything else is not a class index."""
    value = float(text)
    if not value.is_integer():
        raise ValueError(text)
    return int(value)
