"""Another photo's light matched to the golden board's: a known change of exposure and white balance is undone on
a drawn board, a part that differs (missing) stays different, and what is not a change of light is refused."""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from inspector.board.light import light_map, match_light
from inspector.ingest.synthetic import render_board
from inspector.routing.rules import body_box

from .test_registration import BOARD_A


def _golden_and_live() -> tuple[np.ndarray, np.ndarray, tuple[int, int, int, int]]:
    board = render_board(BOARD_A, "G", np.random.default_rng(3), rates={})
    golden = board.image
    live = golden.copy()
    comp, place = BOARD_A.placements()[0]
    x0, y0, x1, y1 = body_box(comp, place, 0)
    live[y0:y1, x0:x1] = golden[0:y1 - y0, 0:x1 - x0]  # the part gone: the board's edge pasted where it was
    return golden, live, (x0, y0, x1, y1)


def _relit(image: np.ndarray, gains: tuple[float, float, float], offsets: tuple[float, float, float]) -> np.ndarray:
    out = image.astype(np.float32) * np.array(gains, np.float32) + np.array(offsets, np.float32)
    return np.clip(out, 0, 255).astype(np.uint8)


def test_another_light_is_undone_and_a_missing_part_stays_missing() -> None:
    golden, live, (x0, y0, x1, y1) = _golden_and_live()
    photo = _relit(live, (0.6, 0.75, 0.9), (12.0, 4.0, -3.0))  # darker, bluer: another camera's white balance
    matched, note = match_light(photo, golden)
    assert "matched" in note and "not matched" not in note
    part = np.zeros(golden.shape[:2], bool)
    part[y0:y1, x0:x1] = True
    before = np.abs(photo.astype(float) - golden)[~part].mean()
    after = np.abs(matched.astype(float) - golden)[~part].mean()
    assert after < 0.25 * before and after < 6.0
    # the missing part is still as far from the golden board as it was under the golden light
    assert np.abs(matched.astype(float) - golden)[part].mean() > 0.6 * np.abs(live.astype(float) - golden)[part].mean()


def test_a_blurrier_camera_is_not_taken_for_more_contrast() -> None:
    """A camera less sharp than the golden board's squeezes the board's fine detail, not its light: the fit finds
    the light it was given (fitted on the sharp values, a 1 px blur read as 70% more contrast)."""
    golden, live, _ = _golden_and_live()
    for sigma in (1.0, 1.5):
        photo = _relit(cv2.GaussianBlur(live, (0, 0), sigma), (0.8, 0.8, 0.8), (10.0, 10.0, 10.0))
        fits = light_map(photo, golden)
        assert fits is not None
        for gain, offset in fits:
            assert gain == pytest.approx(1 / 0.8, rel=0.08) and offset == pytest.approx(-10 / 0.8, abs=8)


def test_the_same_light_is_left_alone() -> None:
    golden, live, _ = _golden_and_live()
    fits = light_map(live, golden)
    assert fits is not None
    for gain, offset in fits:
        assert gain == pytest.approx(1.0, abs=0.08) and abs(offset) < 10


def test_what_is_not_a_change_of_light_is_refused() -> None:
    golden, live, _ = _golden_and_live()
    negative = 255 - live  # a light never turns a board into its negative
    out, note = match_light(negative, golden)
    assert "not matched" in note and out is negative


def test_another_frame_is_refused_with_the_reason() -> None:
    golden, live, _ = _golden_and_live()
    with pytest.raises(ValueError, match="register the board first"):
        light_map(live[:-1], golden)
