"""inspector accuracy --dataset deeppcb:DIR on pairs written in DeepPCB's own layout (the shared dataset itself is
measured by the command, README: 'DeepPCB')."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np

from inspector.ingest.difference import Boxing, align, candidates

COPPER, PIN_HOLE = 5, 6  # DeepPCB's type numbers


def board(rng: np.random.Generator, size: int = 192) -> np.ndarray:
    """A binarised bare board as the line-scan camera gives it: white laminate, black traces and pads."""
    image = np.full((size, size), 255, np.uint8)
    for _ in range(6):
        x = int(rng.integers(10, size - 10))
        cv2.line(image, (x, 0), (x + int(rng.integers(-30, 30)), size), 0, int(rng.integers(4, 8)))
    for _ in range(4):
        cv2.circle(image, tuple(int(v) for v in rng.integers(20, size - 20, 2)), int(rng.integers(8, 12)), 0, -1)
    return image


def free_spot(image: np.ndarray, rng: np.random.Generator, value: int, r: int) -> tuple[int, int] | None:
    """A centre whose whole surround (2r) is `value`: laminate for copper, inside a pad for a pin hole."""
    h, w = image.shape
    for _ in range(400):
        x, y = (int(v) for v in rng.integers(2 * r, w - 2 * r, 2))
        if (image[y - 2 * r:y + 2 * r, x - 2 * r:x + 2 * r] == value).all():
            return x, y
    return None


def write_pairs(root: Path, groups: dict[str, int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    lines = []
    for group, count in groups.items():
        (root / f"group{group}" / group).mkdir(parents=True)
        (root / f"group{group}" / f"{group}_not").mkdir(parents=True)
        for i in range(count):
            name = f"{group}{i:03d}"
            template = board(rng)
            test = template.copy()
            notes = []
            for kind, value, r in ((COPPER, 255, 5), (PIN_HOLE, 0, 3)):
                for _ in range(int(rng.integers(1, 3))):
                    at = free_spot(test, rng, value, r + 1)
                    if at is None:
                        continue
                    cv2.circle(test, at, r, 255 - value, -1)
                    notes.append(f"{at[0] - 12} {at[1] - 12} {at[0] + 12} {at[1] + 12} {kind}")
            spot = free_spot(test, rng, 255, 3)  # a speck of dust: a difference, but no defect
            if spot is not None:
                test[spot[1] - 1:spot[1] + 2, spot[0] - 1:spot[0] + 2] = 0
            shift = np.float32([[1, 0, rng.uniform(-2, 2)], [0, 1, rng.uniform(-2, 2)]])  # never quite registered
            test = cv2.warpAffine(test, shift, test.shape[::-1], borderMode=cv2.BORDER_REPLICATE)
            test = np.where(test > 127, 255, 0).astype(np.uint8)
            folder = root / f"group{group}" / group
            cv2.imwrite(str(folder / f"{name}_test.jpg"), test)
            cv2.imwrite(str(folder / f"{name}_temp.jpg"), template)
            (root / f"group{group}" / f"{group}_not" / f"{name}.txt").write_text("\n".join(notes) + "\n")
            lines.append(f"group{group}/{group}/{name}.jpg group{group}/{group}_not/{name}.txt")
    (root / "trainval.txt").write_text("\n".join(lines) + "\n")


def test_a_golden_board_off_by_pixels_is_aligned_and_differs_only_where_it_changed() -> None:
    rng = np.random.default_rng(3)
    golden = board(rng)
    live = cv2.warpAffine(golden, np.float32([[1, 0, 2.6], [0, 1, -1.8]]), golden.shape[::-1],
                          borderMode=cv2.BORDER_REPLICATE)
    boxing = Boxing(opening=3)
    assert candidates(live, golden, boxing)  # unaligned, every edge differs
    assert candidates(live, align(live, golden), boxing) == []
    spot = (golden.shape[1] // 2, 5)
    live[spot[1] - 3:spot[1] + 3, spot[0] - 3:spot[0] + 3] = 255 - live[spot]
    found = candidates(live, align(live, golden), boxing)
    assert len(found) == 1 and found[0][0] <= spot[0] <= found[0][2]


def test_deeppcb_pairs_are_taught_on_some_and_scored_on_a_board_group_never_seen(tmp_path: Path,
                                                                                 box_models: Path) -> None:
    root = tmp_path / "deeppcb"
    write_pairs(root, {"10000": 72, "20000": 12}, seed=1)
    out = tmp_path / "score.json"
    # 6 epochs: these drawn pairs are told apart from the third (8 measured mAP and F 1.0; 15 took two minutes more)
    run = subprocess.run([sys.executable, "-m", "inspector.cli", "--models", str(box_models), "accuracy", "--dataset",
                          f"deeppcb:{root}",
                          "--hold-out-group", "20000", "--epochs", "6", "--patience", "6", "--work",
                          str(tmp_path / "work"), "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    doc = json.loads(out.read_text())
    assert doc["pairs_scored"] == 12 and doc["pairs_trained"] == 72 and "group 20000" in doc["split"]
    for key in ("map", "f_score", "precision", "recall", "boards_per_s", "per_class"):
        assert key in doc, key
    assert doc["proposal_recall"]["scored"] >= 0.9  # the boxing fitted on the trained group fits the other
    assert doc["per_class"]["copper"]["labelled"] > 0 and doc["per_class"]["pin_hole"]["labelled"] > 0
    assert doc["map"] >= 0.8 and doc["f_score"] >= 0.8, run.stdout
    assert doc["boards_per_s"] > 0 and "mAP" in run.stdout and "F-score" in run.stdout


def test_a_dataset_the_command_does_not_know_is_refused_by_name(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "inspector.cli", "accuracy", "--dataset", f"mvtec:{tmp_path}"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "deeppcb:DIR" in run.stderr
    write_pairs(tmp_path / "d", {"10000": 3}, seed=2)
    run = subprocess.run([sys.executable, "-m", "inspector.cli", "accuracy", "--dataset", f"deeppcb:{tmp_path / 'd'}",
                          "--hold-out-group", "99999"], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "no board group '99999'" in run.stderr and "10000" in run.stderr


def test_the_held_back_pairs_of_another_folder_are_scored_and_never_trained_on(tmp_path: Path) -> None:
    from inspector.training.deeppcb_split import choose_split

    write_pairs(tmp_path / "trainval", {"10000": 4}, seed=3)
    write_pairs(tmp_path / "test", {"30000": 3}, seed=4)
    missing: list[str] = []
    train, scored, how = choose_split(tmp_path / "trainval", None, 0.1, None, missing, tmp_path / "test")
    assert len(train) == 4 and len(scored) == 3 and {p.group for p in scored} == {"30000"} and not missing
    assert "scored on the 3 under" in how
    run = subprocess.run([sys.executable, "-m", "inspector.cli", "accuracy", "--dataset",
                          f"deeppcb:{tmp_path / 'trainval'}", "--score-on", str(tmp_path / "trainval")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "both trained on and scored" in run.stderr
