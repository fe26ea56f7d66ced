"""Detectors taught from labelled boxes (training/labelled/teach_detector.py): YOLO and COCO sets, the scores."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.experts.zoo import Zoo
from inspector.training.labelled.boxes import Box, read_boxes
from inspector.training.labelled.detection import Found, average_precision, iou, score
from inspector.training.labelled.folder import FolderError

CLASSES = ("void", "spur")


def board(rng: np.random.Generator, kinds: list[int]) -> tuple[np.ndarray, list[tuple[int, int, int, int, int]]]:
    """A dark laminate with copper bars; a void is a dark hole in a bar, a spur a bright stub off one."""
    h, w = 64, int(rng.choice([64, 80]))
    image = np.full((h, w, 3), (40, 80, 40), np.uint8)
    for y in (6, 30):
        image[y:y + 16, :] = (60, 160, 200)
    boxes = []
    for kind in kinds:
        x = int(rng.integers(4, w - 16))
        if kind == 0:
            image[9:19, x:x + 10] = (40, 80, 40)
            boxes.append((0, x - 1, 8, x + 11, 20))
        else:
            image[46:60, x:x + 8] = (60, 160, 200)
            boxes.append((1, x - 1, 45, x + 9, 61))
    return np.clip(image + rng.normal(0, 4, image.shape), 0, 255).astype(np.uint8), boxes


def yolo_set(root: Path, boards: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    (root / "data.yaml").write_text("names: [void, spur]\n")
    for b in range(boards):
        kinds = [[], [0], [1], [0, 1]][b % 4]
        image, boxes = board(rng, kinds)
        name = f"s{seed}b{b:03d}__top"
        cv2.imwrite(str(root / "images" / f"{name}.png"), image)
        h, w = image.shape[:2]
        (root / "labels" / f"{name}.txt").write_text("".join(
            f"{k} {(x1 + x2) / 2 / w:.5f} {(y1 + y2) / 2 / h:.5f} {(x2 - x1) / w:.5f} {(y2 - y1) / h:.5f}\n"
            for k, x1, y1, x2, y2 in boxes))
    return root


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inspector.cli", *args], capture_output=True, encoding="utf-8",
                          cwd=cwd, timeout=900)


def test_a_detector_is_taught_from_a_yolo_set_and_finds_what_it_was_taught(tmp_path: Path) -> None:
    train = yolo_set(tmp_path / "train", 160, seed=1)
    test = yolo_set(tmp_path / "test", 24, seed=2)
    r = cli("zoo", "train", "--new", "det-pcb", "--kind", "detector", "--from", str(train), "--zoo",
            str(tmp_path / "zoo"), "--epochs", "30", "--patience", "30", "--false-calls", "0.1", "--json",
            str(tmp_path / "taught.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "finds void, spur" in r.stdout and "mAP" in r.stdout
    entry = Zoo.load(tmp_path / "zoo").entries["det-pcb"]
    assert entry.role == "detector" and entry.classes == CLASSES
    assert entry.spec["mode"] == "find" and entry.spec["fit"] == "letterbox" and entry.spec["input_size"] in (64, 96)
    r = cli("zoo", "evaluate", "--expert", "det-pcb", "--on", str(test), "--zoo", str(tmp_path / "zoo"), "--json",
            str(tmp_path / "eval.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    scores = json.loads((tmp_path / "eval.json").read_text())
    for key in ("map", "f_score", "precision", "recall", "per_class", "defect_recall", "false_call_rate"):
        assert key in scores
    assert scores["per_class"]["void"]["labelled"] == 12 and scores["per_class"]["spur"]["labelled"] == 12
    assert scores["map"] > 0.6 and scores["defect_recall"] >= 0.8 and scores["false_call_rate"] <= 0.34, r.stdout


def test_box_sets_that_are_wrong_are_named_with_their_file_and_line(tmp_path: Path) -> None:
    root = yolo_set(tmp_path / "y", 4, seed=3)
    label = root / "labels" / "s3b001__top.txt"
    label.write_text("0 0.5 0.5 0.1\n")
    with pytest.raises(FolderError, match=r"s3b001__top.txt:1: expected `class cx cy w h`"):
        read_boxes(root)
    label.write_text("7 0.5 0.5 0.1 0.1\n")
    with pytest.raises(FolderError, match=r":1: class 7 is not one of data.yaml's 0..1"):
        read_boxes(root)
    label.write_text("0 1.5 0.5 0.1 0.1\n")
    with pytest.raises(FolderError, match="normalised to the image"):
        read_boxes(root)
    (root / "data.yaml").write_text("names: 3\n")
    with pytest.raises(FolderError, match="`names:` must list the class names"):
        read_boxes(root)
    coco = tmp_path / "c"
    coco.mkdir()
    cv2.imwrite(str(coco / "a.png"), np.zeros((20, 30, 3), np.uint8))
    doc = {"images": [{"id": 1, "file_name": "a.png"}, {"id": 2, "file_name": "gone.png"}],
           "categories": [{"id": 5, "name": "short"}], "annotations": [{"id": 9, "image_id": 1, "category_id": 5,
                                                                          "bbox": [2, 3, 4, 5]}]}
    (coco / "set.json").write_text(json.dumps(doc))
    with pytest.raises(FolderError, match=r"image 2 \(gone.png\) is neither under"):
        read_boxes(coco)
    doc["images"].pop()
    (coco / "set.json").write_text(json.dumps(doc))
    s = read_boxes(coco)
    assert s.layout == "coco" and s.classes == ("short",) and s.images[0].boxes == (Box(0, 2, 3, 6, 8),)
    assert s.images[0].size == (30, 20)


def test_detection_scores_follow_the_protocol() -> None:
    assert iou(Box(0, 0, 0, 10, 10), Box(0, 5, 0, 15, 10)) == pytest.approx(1 / 3)
    # two labelled, boxes at 0.9 (hit), 0.8 (miss), 0.7 (hit): precision 1, 0.5, 0.67 at recall 0.5, 0.5, 1
    assert average_precision(np.array([1.0, 0.0, 1.0]), np.array([0.9, 0.8, 0.7]), 2) == pytest.approx(
        0.5 * 1 + 0.5 * (2 / 3))
    truth = [(Box(0, 0, 0, 10, 10),), (), (Box(1, 0, 0, 10, 10), Box(1, 20, 20, 30, 30))]
    found = [[Found(0, 0.9, 1, 1, 10, 10), Found(0, 0.8, 0, 0, 9, 10)],  # a hit, then a duplicate: a miss
             [Found(1, 0.3, 0, 0, 5, 5)],  # a clean image, flagged only below 0.5
             [Found(1, 0.6, 4, 0, 14, 10), Found(0, 0.95, 20, 20, 30, 30)]]  # IoU 0.43: a hit at 0.33, not 0.5
    loose, strict = score(("a", "b"), truth, found, 0.5, 0.33), score(("a", "b"), truth, found, 0.5, 0.5)
    assert loose.per_class["b"]["hits"] == 1 and strict.per_class["b"]["hits"] == 0
    assert loose.per_class["a"]["given"] == 3 and loose.per_class["a"]["hits"] == 1
    assert loose.flagged_clean == 0 and loose.clean == 1 and loose.flagged_with_defects == 2
    assert loose.recall == pytest.approx(2 / 3) and loose.precision == pytest.approx(2 / 4)
