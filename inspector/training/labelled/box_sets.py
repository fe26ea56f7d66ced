"""Which layout a labelled set is in (boxes.py says what each is), and its reading."""
from __future__ import annotations

from pathlib import Path

from .boxes import BoxSet
from .coco_set import read_coco, split_files
from .folder import FolderError
from .voc_set import read_voc
from .yolo_set import read_yolo


def read_boxes(root: Path) -> BoxSet:
    """The YOLO, COCO or VOC set at `root`: YOLO when it has data.yaml, COCO when it has one .json (or one in each
    split folder), VOC when it has .xml annotations."""
    root = Path(root)
    if not root.is_dir():
        raise FolderError(f"{root} is not a directory; give a YOLO set (data.yaml, images/, labels/), a COCO set "
                          "(one .json beside its images) or a Pascal VOC set (an .xml per image)")
    if (root / "data.yaml").is_file():
        return read_yolo(root)
    jsons = sorted(root.glob("*.json"))
    if len(jsons) == 1:
        return read_coco(root, [(jsons[0], None)])
    split = split_files(root) if not jsons else []
    if split:
        return read_coco(root, split)
    xmls = sorted(p for p in root.rglob("*.xml") if p.is_file())
    if xmls and not jsons:
        return read_voc(root, xmls)
    raise FolderError(f"{root} holds neither data.yaml (YOLO), exactly one .json (COCO; found {len(jsons)}) nor "
                      ".xml annotations alone (Pascal VOC)")
