"""A detector taught on tiles of its served images and served them whole (training/labelled/tiles.py)."""
from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.experts.yolo import YoloDetector
from inspector.training.labelled.boxes import Box, BoxedImage
from inspector.training.labelled.detector_set import write_split
from inspector.training.labelled.tiles import KEEP, Tiling, choose_tiling, cut

from .test_labelled_detector import cli

BARS = ((20, 60), (100, 130), (170, 210))  # copper bars across the board, y from..to


def board(rng: np.random.Generator, kinds: list[int]) -> tuple[np.ndarray, list[tuple[int, int, int, int, int]]]:
    """A 256-px laminate with three copper bars: a void is a dark 24-px hole in a bar, a spur a bright 24-px stub
    below one, anywhere along it (defects the size of YOLO's three cells at the served 256 px)."""
    image = np.full((256, 256, 3), (40, 80, 40), np.uint8)
    for y0, y1 in BARS:
        image[y0:y1, :] = (60, 160, 200)
    boxes = []
    for kind in kinds:
        x = int(rng.integers(8, 224))
        y0, y1 = BARS[int(rng.integers(0, 3))]
        if kind == 0:
            y = (y0 + y1) // 2 - 12
            image[y:y + 24, x:x + 24] = (40, 80, 40)
            boxes.append((0, x - 1, y - 1, x + 25, y + 25))
        else:
            image[y1:y1 + 24, x:x + 24] = (60, 160, 200)
            boxes.append((1, x - 1, y1 - 1, x + 25, y1 + 25))
    return np.clip(image + rng.normal(0, 4, image.shape), 0, 255).astype(np.uint8), boxes


def yolo_boards(root: Path, count: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    (root / "data.yaml").write_text("names: [void, spur]\n")
    for b in range(count):
        image, boxes = board(rng, [[], [0], [1], [0, 1]][b % 4])
        name = f"s{seed}b{b:03d}__top"
        cv2.imwrite(str(root / "images" / f"{name}.png"), image)
        (root / "labels" / f"{name}.txt").write_text("".join(
            f"{k} {(x1 + x2) / 512:.5f} {(y1 + y2) / 512:.5f} {(x2 - x1) / 256:.5f} {(y2 - y1) / 256:.5f}\n"
            for k, x1, y1, x2, y2 in boxes))
    return root


def test_tiles_cover_the_image_overlap_by_the_larger_boxes_and_keep_a_box_where_most_of_it_lies(
        tmp_path: Path) -> None:
    t = Tiling(128, 32)
    assert t.starts(128) == [0] and t.starts(256) == [0, 64, 128] and t.starts(300) == [0, 86, 172]
    for length in (129, 256, 300, 1000):
        starts = t.starts(length)
        assert starts[0] == 0 and starts[-1] + 128 == length  # covered end to end
        assert all(b - a <= 128 - 32 for a, b in zip(starts, starts[1:]))  # neighbours share 32 px at least
    assert choose_tiling(128, np.array([10.0] * 20)).overlap == 32  # a quarter of the tile at least
    assert choose_tiling(128, np.array([50.0] * 20)).overlap == 50  # the larger boxes' side
    assert choose_tiling(128, np.array([90.0] * 20)).overlap == 64  # half the tile at most
    image = np.arange(256 * 256 * 3, dtype=np.uint32).reshape(256, 256, 3)
    tiles = cut(image, [(1, 100.0, 10.0, 120.0, 30.0)], t)
    assert len(tiles) == 9 and all(tile.shape == (128, 128, 3) for tile, _ in tiles)
    assert np.array_equal(tiles[1][0], image[0:128, 64:192])
    held = [(i, boxes) for i, (_, boxes) in enumerate(tiles) if boxes]
    # wholly inside tiles 0 and 1 (x 0..128, 64..192); in tile 2 (x 128..256) none of it: not there
    assert held == [(0, [(1, 100.0, 10.0, 120.0, 30.0)]), (1, [(1, 36.0, 10.0, 56.0, 30.0)])]
    edge = cut(image, [(0, 120.0, 10.0, 140.0, 30.0)], t)  # 8 of 20 px inside tile 0: 40%, kept at KEEP
    assert KEEP == 0.4 and edge[0][1] == [(0, 120.0, 10.0, 128.0, 30.0)]
    # a served image's tiles and their labels, as the trainer reads them
    picture = np.zeros((256, 256, 3), np.uint8)
    cv2.imwrite(str(tmp_path / "b__1.png"), picture)
    im = BoxedImage(tmp_path / "b__1.png", (256, 256), (Box(0, 100, 10, 120, 30),), "b")
    written = write_split(tmp_path / "set", "train", YoloDetector("yolov8n.yaml", 256, 1, 0.25, "find"), [im], [0],
                          tiling=t)
    assert written == 9 and len(list((tmp_path / "set" / "images" / "train").glob("*.png"))) == 9
    rows = (tmp_path / "set" / "labels" / "train" / "000000_001.txt").read_text().split()
    assert rows == ["0", f"{46 / 128:.6f}", f"{20 / 128:.6f}", f"{20 / 128:.6f}", f"{20 / 128:.6f}"]


def test_a_detector_taught_on_tiles_is_served_whole_images_and_finds_what_it_was_taught(tmp_path: Path) -> None:
    train = yolo_boards(tmp_path / "train", 48, seed=1)
    test = yolo_boards(tmp_path / "test", 16, seed=2)
    r = cli("zoo", "train", "--new", "det-tiled", "--kind", "detector", "--from", str(train), "--tile", "128",
            "--zoo", str(tmp_path / "zoo"), "--epochs", "20", "--patience", "20", "--false-calls", "0.1", "--json",
            str(tmp_path / "taught.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "taught in tiles of 128 px overlapping by 32 (9 an image); served whole images at 256 px" in r.stderr
    taught = json.loads((tmp_path / "taught.json").read_text())
    assert taught["input_size"] == 256 and taught["tile"] == {"size": 128, "overlap": 32}
    r = cli("zoo", "evaluate", "--expert", "det-tiled", "--on", str(test), "--zoo", str(tmp_path / "zoo"), "--json",
            str(tmp_path / "eval.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    scores = json.loads((tmp_path / "eval.json").read_text())
    assert scores["map"] > 0.75 and min(c["ap"] for c in scores["per_class"].values()) > 0.5, r.stdout
    assert scores["defect_recall"] >= 0.85 and scores["false_call_rate"] <= 0.25, r.stdout


@pytest.mark.parametrize("tile", ["100", "32"])
def test_a_tile_that_is_no_multiple_of_32_or_too_small_is_refused(tmp_path: Path, tile: str) -> None:
    train = yolo_boards(tmp_path / "train", 8, seed=3)
    r = cli("zoo", "train", "--new", "det-t", "--kind", "detector", "--from", str(train), "--tile", tile, "--zoo",
            str(tmp_path / "zoo"), "--epochs", "1", cwd=tmp_path)
    assert r.returncode == 1 and f"--tile {tile}: a tile's side is a multiple of 32 px, at least 64" in r.stderr
