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


class _Exposed:
    """The renderer's random generator with each drawn board's own exposure (its gain of 0.85-1.15) held at 1, so
    that a board relit by a known light has a known answer."""

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def uniform(self, low: float = 0.0, high: float = 1.0, size=None):  # noqa: ANN001, ANN201 - numpy's signature
        return 1.0 if (low, high) == (0.85, 1.15) else self._rng.uniform(low, high, size)

    def __getattr__(self, name: str):  # noqa: ANN204 - everything else is numpy's
        return getattr(self._rng, name)


def test_a_board_with_its_parts_missing_is_brought_to_the_light_a_good_board_is() -> None:
    """The fit is taken over the pixels where the two boards agree: fitted over every pixel, half the parts missing
    put mid-grey 15 grey levels off and every part missing 30 (red: empty lands read as a redder light)."""
    refs = [p.ref for _c, p in BOARD_A.placements()]
    golden = render_board(BOARD_A, "G", _Exposed(3), rates={}).image
    boards = {"good": render_board(BOARD_A, "H", _Exposed(5), rates={}).image,
              "half": render_board(BOARD_A, "B", _Exposed(6), rates={}, forced={r: "missing" for r in refs[::2]}).image,
              "bare": render_board(BOARD_A, "B", _Exposed(4), rates={}, forced={r: "missing" for r in refs}).image}
    gains, offsets = (0.7, 0.8, 0.9), (10.0, 5.0, -4.0)
    for name, board in boards.items():
        fits = light_map(_relit(board, gains, offsets), golden)
        assert fits is not None, name
        grey = [(128 * g0 + o0) * g + o for (g, o), g0, o0 in zip(fits, gains, offsets)]  # the golden's 128, back
        assert all(abs(v - 128) < 2.5 for v in grey), (name, grey)
