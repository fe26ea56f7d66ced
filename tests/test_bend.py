"""The bend a homography leaves (board/bend.py): a lens's barrel taken out against the golden board, while a part
really placed off stays off, and nothing is bent where nothing is."""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from inspector.board.bend import measure_bend
from inspector.board.register import Registration, refine_on_reference, standard_grey
from inspector.ingest.synthetic import render_board

from .test_registration import BOARD_A

BARREL_PX = 8.0  # how far the lens moves the board's corners (1.1% of its half diagonal: a phone's lens)


def _barrel(image: np.ndarray, k: float) -> tuple[np.ndarray, np.ndarray]:
    """(the image bent as a lens bends it: a pixel at radius r from the centre moves out by k r^2 of the half
    diagonal; the move at each pixel (H x W x 2))."""
    h, w = image.shape[:2]
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    cx, cy, half = (w - 1) / 2, (h - 1) / 2, np.hypot(w, h) / 2
    u, v = (xs - cx) / half, (ys - cy) / half
    r2 = u * u + v * v
    move = np.stack([k * r2 * u * half, k * r2 * v * half], axis=-1).astype(np.float32)
    # the golden board's pixel p shows at p + move(p); sampling back at q - move(q) is that to well under a pixel
    bent = cv2.remap(image, xs - move[..., 0], ys - move[..., 1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return bent, move


def _window_shift(a: np.ndarray, b: np.ndarray, box: tuple[int, int, int, int]) -> float:
    x0, y0, x1, y1 = box
    ta, tb = (standard_grey(im)[y0:y1, x0:x1].copy() for im in (a, b))
    (dx, dy), _ = cv2.phaseCorrelate(ta, tb, cv2.createHanningWindow(ta.shape[::-1], cv2.CV_32F))
    return float(np.hypot(dx, dy))


@pytest.fixture(scope="module")
def golden() -> np.ndarray:
    return render_board(BOARD_A, "golden", np.random.default_rng(1), rates={}).image


@pytest.fixture(scope="module")
def other() -> np.ndarray:
    """Another good board: its own parts' tones, nothing wrong with it."""
    return render_board(BOARD_A, "B1", np.random.default_rng(11), rates={}).image


def test_a_lens_barrel_is_taken_out_against_the_golden_board(golden: np.ndarray, other: np.ndarray) -> None:
    h, w = golden.shape[:2]
    k = BARREL_PX / (np.hypot(w, h) / 2)
    bent, move = _barrel(other, k)
    identity = Registration(np.eye(3), "outline", 0.0, 0.0, "edges")
    reg, _ = refine_on_reference(bent, identity, golden, px_per_mm=10.0)
    assert reg.bend is not None and "unbent" in reg.note, reg.note
    assert reg.method == "outline+reference" and reg.residual_mm == pytest.approx(reg.residual_px / 10)
    # the homography and the bend together are the lens's, where the board has content to measure it by
    ys, xs = np.mgrid[40:h - 40:20, 40:w - 40:20].astype(np.float64)
    dx, dy = reg.bend.field(xs.ravel(), ys.ravel())
    seen = np.stack([xs.ravel() + dx, ys.ravel() + dy], axis=-1).reshape(-1, 1, 2)
    photo = cv2.perspectiveTransform(seen, np.linalg.inv(reg.homography)).reshape(-1, 2)
    true = np.stack([xs.ravel(), ys.ravel()], axis=-1) + move[ys.astype(int), xs.astype(int)].reshape(-1, 2)
    assert np.median(np.hypot(*(photo - true).T)) < 0.5
    # and what the line cuts from is back on the golden board: every part's window within half a pixel
    unbent = reg.warp(bent, (w, h))
    for _c, p in BOARD_A.placements():
        box = (int(p.x) - 24, int(p.y) - 24, int(p.x) + 24, int(p.y) + 24)
        if min(box) < 0 or box[2] > w or box[3] > h:
            continue
        assert _window_shift(golden, unbent, box) < 0.75, p.ref
    assert reg.to_json()["bend_px"] > 1.0


def test_a_part_placed_off_stays_off(golden: np.ndarray, other: np.ndarray) -> None:
    """One part's window moved 5 px on an otherwise straight board: the bend does not follow it."""
    h, w = golden.shape[:2]
    _c, p = next((c, p) for c, p in BOARD_A.placements() if 40 < p.x < w - 40 and 40 < p.y < h - 40)
    x0, y0, x1, y1 = int(p.x) - 16, int(p.y) - 16, int(p.x) + 16, int(p.y) + 16
    moved = other.copy()
    moved[y0:y1, x0 + 5:x1 + 5] = other[y0:y1, x0:x1]
    bend, before, after, note = measure_bend(standard_grey(golden), standard_grey(moved))
    unbent = bend.undo(moved) if bend is not None else moved
    assert _window_shift(golden, unbent, (x0 - 8, y0 - 8, x1 + 13, y1 + 8)) > 3.5, note


def test_nothing_is_bent_where_nothing_is(golden: np.ndarray, other: np.ndarray) -> None:
    bend, before, after, note = measure_bend(standard_grey(golden), standard_grey(other))
    assert bend is None and before == after and "no bend" in note
    flat = np.full_like(golden, 90)  # a board with nothing on it to measure by
    bend, _b, _a, note = measure_bend(standard_grey(golden), standard_grey(flat))
    assert bend is None and "no bend fitted" in note
