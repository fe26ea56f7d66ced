"""The golden board's image of every labelled image: a second folder mirroring the labelled set's tree, file for file.

A golden-comparison expert (a classifier or a detector taught with `--reference`) reads each image beside the same
window of the golden board (ingest/golden.py). A plant keeps those as a tree of its own, so the labelled set stays
what its labelling tool exported; this module finds each image's golden one and refuses one that cannot be the same
window (another size), naming the file.
"""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from .folder import FolderError


def golden_paths(root: Path, images: list[Path], reference: Path) -> list[Path]:
    """The golden image of each of `images` (files under `root`): the same relative path under `reference`."""
    paths = [Path(reference) / Path(p).relative_to(root) for p in images]
    lacking = [p for p in paths if not p.is_file()]
    if lacking:
        raise FolderError(f"{len(lacking)} of {len(paths)} images have no golden image under {reference} (the first: "
                          f"{lacking[0]}); the golden folder mirrors the labelled one, file for file")
    return paths


def read_golden(path: Path, live: np.ndarray) -> np.ndarray:
    """The golden image at `path` (HxWx3 BGR), checked to be the same window as its live image."""
    golden = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if golden is None:
        raise FolderError(f"{path} cannot be read as an image")
    check_same_window(path, live, golden)
    return golden


def check_same_window(path: Path, live: np.ndarray, golden: np.ndarray) -> None:
    if live.shape[:2] != golden.shape[:2]:
        raise FolderError(f"{path} is {golden.shape[1]}x{golden.shape[0]} px but its live image is "
                          f"{live.shape[1]}x{live.shape[0]}: a golden image is the same window, aligned to it")
