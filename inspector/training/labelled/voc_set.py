"""A Pascal VOC set (LabelImg's default, CVAT's and Roboflow's export): one `.xml` per image (`<object><name>` and
`<bndbox>` xmin ymin xmax ymax, 1-based pixels, the max inclusive), under `DIR/Annotations/` with the images in
`DIR/JPEGImages/`, or beside its image anywhere under DIR; the set is its annotation files (a clean image is an .xml
without objects). Split folders (`DIR/train/`, `DIR/valid/`, `DIR/test/`: Roboflow's export), or else VOC's own
lists (`ImageSets/Main/train.txt`, `val.txt`, `test.txt`, or `trainval.txt`), are the set's own split; with the
lists, an annotation none of them names is not of the detection set (VOC2012 annotates more images than it lists
for detection) and is left out, said. An object marked `<difficult>1</difficult>` is an ignored box (boxes.py), as
VOC's own scoring ignores it.

VOC lists no classes: a `classes.txt`, `labels.txt` (a name a line) or CVAT's `labelmap.txt` (its `background` left
out) at DIR gives them in order, and an object named otherwise is refused; without one the names found, sorted.
"""
from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from .boxes import Box, BoxedImage, BoxSet, check_split_complete, split_named
from .folder import IMAGE_SUFFIXES, FolderError, identity_of, image_size

CLASS_LISTS = ("classes.txt", "labels.txt", "labelmap.txt")  # VOC's class order, where the exporter wrote one


def read_voc(root: Path, xmls: list[Path]) -> BoxSet:
    xmls, sides, note = _in_lists(root, xmls)
    listed = _voc_classes(root)
    read = [_voc_file(root, xml) for xml in xmls]
    names = listed or tuple(sorted({name for *_image, objects in read for name, *_ in objects}))
    if not names:
        raise FolderError(f"{root}: no .xml names an object and no {' or '.join(CLASS_LISTS)} lists the classes; "
                          "a detector needs at least one class")
    index = {n: i for i, n in enumerate(names)}
    images = []
    for (path, size, objects), xml, side in zip(read, xmls, sides):
        boxes = []
        for name, n, x1, y1, x2, y2, difficult in objects:
            if name not in index:
                raise FolderError(f"{xml}: object {n} is named {name!r}, which {root / _voc_list(root)} does not "
                                  f"list ({', '.join(names)}); add it there or correct the label")
            boxes.append(Box(index[name], x1, y1, x2, y2, difficult))
        images.append(BoxedImage(path, size, tuple(boxes), identity_of(path), side))
    check_split_complete(root, images)
    return BoxSet(root, names, images, "voc", note)


def _in_lists(root: Path, xmls: list[Path]) -> tuple[list[Path], list[str | None], str]:
    """The annotations of the set, each one's side, and what was left out: without split folders, VOC's lists
    decide, before any annotation is read (VOC2012 annotates thousands of images it does not list for detection:
    their image headers are not read, their names shape no class list, a missing image of theirs is not refused)."""
    sides = [split_named(root, xml) for xml in xmls]
    listed = _image_sets(root)
    if not listed or any(sides):
        return xmls, sides, ""
    kept = [xml for xml in xmls if xml.stem in listed]
    if not kept:
        raise FolderError(f"{root / 'ImageSets' / 'Main'}'s lists name none of the set's annotations; list "
                          "their names (without .xml), a name a line")
    unlisted = [xml.name for xml in xmls if xml.stem not in listed]
    note = (f"{len(unlisted)} annotations are in none of {root / 'ImageSets' / 'Main'}'s lists (e.g. {unlisted[0]}): "
            "left out of the set") if unlisted else ""
    return kept, [listed[xml.stem] for xml in kept], note


IMAGE_SET_LISTS = {"train.txt": "train", "val.txt": "val", "test.txt": "test", "trainval.txt": "train"}


def _image_sets(root: Path) -> dict[str, str]:
    """VOC's own split: annotation stem -> side, from ImageSets/Main/{train,val,test}.txt (trainval.txt where there
    is no train.txt: its images are taught, a share held out by identity); {} when there are none. The per-class
    lists (`<class>_train.txt`) are left aside."""
    folder = root / "ImageSets" / "Main"
    names = [n for n in IMAGE_SET_LISTS if (folder / n).is_file()]
    if "train.txt" in names and "trainval.txt" in names:
        names.remove("trainval.txt")
    sides: dict[str, str] = {}
    for name in names:
        side = IMAGE_SET_LISTS[name]
        for n, line in enumerate((folder / name).read_text(encoding="utf-8-sig").splitlines(), 1):
            stem = line.split()[0] if line.split() else ""
            if not stem:
                continue
            other = sides.setdefault(stem, side)
            if other != side:
                raise FolderError(f"{folder / name}:{n}: {stem} is listed for {side} and for {other}; an image held "
                                  "out must not be taught: list it once")
    return sides


def _voc_list(root: Path) -> str:
    return next((name for name in CLASS_LISTS if (root / name).is_file()), "")


def _voc_classes(root: Path) -> tuple[str, ...]:
    """The class names a list file at `root` gives, in its order (CVAT's labelmap: `name:colour:parts:actions`,
    `#` comments, and its `background`, a segmentation label no box carries, left out), or () where there is none."""
    name = _voc_list(root)
    if not name:
        return ()
    names = []
    for line in (root / name).read_text(encoding="utf-8-sig").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            names.append(line.split(":", 1)[0].strip() if name == "labelmap.txt" else line)
    if name == "labelmap.txt" and "background" in names:
        names.remove("background")
    if len(set(names)) != len(names) or not all(names):
        raise FolderError(f"{root / name}: a class is named twice or empty ({names}); one name a line, each once")
    return tuple(names)


def _voc_file(root: Path, xml: Path) -> tuple[Path, tuple[int, int], list[tuple[str, int, float, float, float, float,
                                                                                bool]]]:
    """One annotation file: its image, that image's size (checked against the file's) and its objects, each (name,
    its number in the file, x1, y1, x2, y2 in 0-based pixels with the max exclusive, difficult)."""
    try:
        doc = ET.parse(xml).getroot()
    except ET.ParseError as exc:
        raise FolderError(f"{xml}: line {exc.position[0]}: not readable XML ({exc}); export it again") from None
    if doc.tag != "annotation":
        raise FolderError(f"{xml}: the root element is <{doc.tag}>, not a Pascal VOC <annotation>")
    image = _voc_image(root, xml, (doc.findtext("filename") or "").strip())
    w, h = image_size(image)
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
        difficult = (obj.findtext("difficult") or "0").strip() not in ("0", "", "false", "False")
        objects.append((name, n, x1, y1, x2, y2, difficult))
    return image, (w, h), objects


def _voc_image(root: Path, xml: Path, filename: str) -> Path:
    """The image an annotation names: beside it, under DIR/JPEGImages or DIR/images; by the annotation's own stem
    where the name is missing or stale (a renamed file), its suffix in any case (`.JPG` as cameras write it). A name
    with a folder (the labelling machine's path) is also looked for by its last part."""
    places = (xml.parent, root / "JPEGImages", root / "images")
    base = re.split(r"[\\/]", filename)[-1]  # a path from the labelling machine: its name alone
    named = (place / name for name in dict.fromkeys((filename, base) if filename else ()) for place in places)
    stems = (p for place in places if place.is_dir() for p in sorted(place.glob(f"{_glob_literal(xml.stem)}.*"))
             if p.suffix.lower() in IMAGE_SUFFIXES)  # a directory listing each: only when the name is not there
    found = next((p for p in itertools.chain(named, stems) if p.is_file()), None)
    if found is None:
        raise FolderError(f"{xml}: its image {filename or xml.stem!r} is neither beside it nor under "
                          f"{root / 'JPEGImages'} or {root / 'images'}")
    return found


def _number(text: str | None, default: float | None) -> float | None:
    try:
        return float(text) if text is not None and text.strip() else default
    except ValueError:
        return default


def _glob_literal(text: str) -> str:
    """`text` matched as itself by glob (its [, * and ? bracketed)."""
    return "".join(f"[{c}]" if c in "[]*?" else c for c in text)
