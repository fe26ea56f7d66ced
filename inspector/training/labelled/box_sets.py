"""Which layout a labelled set is in (boxes.py says what each is), and its reading."""
from __future__ import annotations

from pathlib import Path

from .boxes import BoxSet
from .coco_set import annotation_files, read_coco, split_files
from .folder import FolderError
from .voc_set import read_voc
from .yolo_set import NAME_LISTS, find_listing, find_yaml, read_yolo


def read_boxes(root: Path) -> BoxSet:
    """The YOLO, COCO or VOC set at `root`: YOLO when it has data.yaml (or one .yaml naming classes), COCO when it
    has one .json (or one in each split folder), VOC when it has .xml annotations, YOLO again when it has a class
    list and .txt labels (a darknet-style export)."""
    root = Path(root)
    if not root.is_dir():
        raise FolderError(f"{root} is not a directory; give a YOLO set (data.yaml, images/, labels/), a COCO set "
                          "(one .json beside its images) or a Pascal VOC set (an .xml per image)")
    spec = find_yaml(root)
    if spec is not None:
        return read_yolo(root, spec)
    jsons = sorted(root.glob("*.json"))
    if len(jsons) == 1:
        return read_coco(root, [(jsons[0], None)])
    if jsons:
        raise FolderError(f"{root} holds {len(jsons)} .json files; a COCO set has one (or one in each split folder, "
                          "or under annotations/): keep the set's own")
    split = split_files(root) or annotation_files(root)
    if split:
        return read_coco(root, split)
    xmls = sorted(p for p in root.rglob("*.xml") if p.is_file())
    if xmls:
        return read_voc(root, xmls)
    listing = find_listing(root)
    if listing is not None:
        return read_yolo(root, listing)
    raise FolderError(f"{root} holds neither data.yaml (YOLO), a .json (COCO), .xml annotations (Pascal VOC) nor a "
                      f"class list ({' or '.join(NAME_LISTS)}) with .txt labels (YOLO as LabelImg, Label Studio or "
                      "CVAT write it)")
