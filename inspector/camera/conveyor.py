"""A synthetic camera over a conveyor: boards slide in, lie still, slide out, with empty conveyor between.

What a fixed camera over a line delivers when it runs free: the stream the board gate (gate.py) is for.
`inspector camera video` writes one to try the gate and the line on (`inspector run --source camera:FILE`);
the tests and benchmarks use it too.
"""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from ..ingest.camera_model import CONVEYOR_BGR
from ..ingest.synthetic import rates_for, render_board
from ..routing.rules import RuleSet


def conveyor_frames(rules: RuleSet, boards: int, seed: int = 5, still: int = 6, slide: int = 3, gap: int = 6,
                    noise: float = 3.0, back_to_back: bool = False,
                    defect_rate: float = 0.005) -> tuple[list[np.ndarray], list[str]]:
    """(frames, the serials of the boards shown in order). Each board slides in over `slide` frames, lies still for
    `still` frames (sensor noise differs frame to frame), slides out, then `gap` frames of empty conveyor follow
    (none with `back_to_back`: the next board pushes in as this one leaves). Parts are defective at `defect_rate`
    (the demo line's 0.5%: most boards pass)."""
    rng = np.random.default_rng(seed)
    w, h = rules.board_size
    empty = np.empty((h, w, 3), np.uint8)
    empty[:] = CONVEYOR_BGR
    frames, serials = [], []

    def shot(image: np.ndarray) -> np.ndarray:
        return np.clip(image.astype(np.float32) + rng.normal(0, noise, image.shape), 0, 255).astype(np.uint8)

    def at(board: np.ndarray, dx: int, behind: np.ndarray | None = None) -> np.ndarray:
        out = empty.copy() if behind is None else behind.copy()
        if abs(dx) < w:
            src = board[:, max(0, -dx):w - max(0, dx)]
            out[:, max(0, dx):max(0, dx) + src.shape[1]] = src
        return out

    for i in range(boards):
        board = render_board(rules, f"{rules.recipe.upper()}-{seed}-{i:05d}", rng, rates_for(defect_rate))
        serials.append(board.serial)
        step = w // (slide + 1)
        for k in range(slide, 0, -1):  # in from the left
            frames.append(shot(at(board.image, -k * step)))
        rest = int(rng.integers(-2, 3))  # where it stops differs by a pixel or two
        for _ in range(still):
            frames.append(shot(at(board.image, rest)))
        if back_to_back and i < boards - 1:
            continue  # the next board pushes this one out: its first sliding frames show no whole board
        for k in range(1, slide + 1):  # out to the right
            frames.append(shot(at(board.image, k * step)))
        frames.extend(shot(empty) for _ in range(gap))
    return frames, serials


def write_video(path: Path, frames: list[np.ndarray], fourcc: str = "MJPG", fps: int = 18) -> Path:
    h, w = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), fps, (w, h))
    writer.set(cv2.VIDEOWRITER_PROP_QUALITY, 95)
    for f in frames:
        writer.write(f)
    writer.release()
    return path
