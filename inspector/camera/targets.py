"""Synthetic calibration captures: a chessboard target and a grey card, as a synthetic camera shows them.

What a technician does at a real line with a printed target and a grey card,
done for the synthetic camera model (ingest/camera_model.py), so the accuracy
suite and the tests calibrate the very lens and light they then inspect under.
"""
from __future__ import annotations

from dataclasses import replace

import cv2
import numpy as np

from ..ingest.camera_model import CONVEYOR_BGR, CameraModel, camera_rotation, tilt_homography

GREY_BGR = (150, 150, 150)
CALIBRATION_TILT_DEG = 25.0  # the target is shown well tilted: views that differ in tilt pin the focal length
# the targets a technician would reach for, most corners first; a small field of view takes one with fewer, larger
# squares, since a square under ~12 px (held tilted, through a soft lens) is where corner finding starts to fail.
# Each has one odd and one even count of inner corners, so it is no longer the same chessboard turned half a turn and
# its corners cannot be read in reverse order (7x5 or 6x4 could)
PATTERNS = ((9, 6), (7, 4), (5, 4), (4, 3))
MIN_SQUARE_PX = 12


def square_px(size: tuple[int, int], pattern: tuple[int, int]) -> int:
    """The side of one square of `chessboard(size, pattern)`, in pixels."""
    w, h = size
    return int(min(0.4 * w / (pattern[0] + 1), 0.4 * h / (pattern[1] + 1)))


def target_pattern(size: tuple[int, int]) -> tuple[int, int]:
    """The chessboard for a frame of `size`: the one with most corners whose squares still resolve (a 640x400 view
    takes 9x6; a 200x120 one 4x3, whose squares are twice the size of a 9x6's there)."""
    return next((p for p in PATTERNS if square_px(size, p) >= MIN_SQUARE_PX), PATTERNS[-1])


def chessboard(size: tuple[int, int], pattern: tuple[int, int]) -> np.ndarray:
    """A white sheet of the frame's size with a chessboard of `pattern` inner corners in its middle 40%."""
    w, h = size
    square = square_px(size, pattern)
    sheet = np.full((h, w, 3), 235, np.uint8)
    x0 = (w - square * (pattern[0] + 1)) // 2
    y0 = (h - square * (pattern[1] + 1)) // 2
    for i in range(pattern[0] + 1):
        for j in range(pattern[1] + 1):
            if (i + j) % 2 == 0:
                cv2.rectangle(sheet, (x0 + i * square, y0 + j * square),
                              (x0 + (i + 1) * square - 1, y0 + (j + 1) * square - 1), (20, 20, 20), -1)
    return sheet


def target_views(camera: CameraModel, size: tuple[int, int], pattern: tuple[int, int], views: int,
                 rng: np.random.Generator) -> list[np.ndarray]:
    """`views` captures of the target through `camera`'s lens and light, held tilted differently each time and
    moved about, so that its corners visit the frame's edges (where the distortion is)."""
    w, h = size
    # the camera's own tilt is a turn about its centre, composed with the target's pose before one warp (a turn of
    # an already tilted picture re-aimed by shifting it would not be a pinhole view); lens and light come after
    shown = replace(camera, motion_px=(0.0, 0.0), shift_px=0.0, rotation_deg=0.0, scale=0.0, tilt_deg=(0.0, 0.0))
    mount = camera_rotation(w, h, *camera.tilt_deg)
    sheet = chessboard(size, pattern)
    reach = np.array([0.3 * w, 0.3 * h])  # the target's corners must visit the frame's corners, where k1 shows
    out = []
    for _ in range(views):  # the target moved on its own plane, then that plane turned: a true pinhole view
        move = cv2.getRotationMatrix2D(((w - 1) / 2, (h - 1) / 2), float(rng.uniform(-10, 10)), 1.0)
        move[:, 2] += rng.uniform(-reach, reach)
        ax, ay = rng.uniform(-CALIBRATION_TILT_DEG, CALIBRATION_TILT_DEG, 2)
        pose = mount @ tilt_homography(w, h, float(ax), float(ay)) @ np.vstack([move, [0.0, 0.0, 1.0]])
        held = cv2.warpPerspective(sheet, pose, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                                   borderValue=CONVEYOR_BGR)
        out.append(shown.view(held, rng)[0])
    return out


def plane_view(camera: CameraModel, size: tuple[int, int], pattern: tuple[int, int],
               rng: np.random.Generator) -> np.ndarray:
    """The target lying flat on the conveyor where boards lie, square to it: what fixes the camera's tilt."""
    flat = replace(camera, shift_px=0.0, rotation_deg=0.0, scale=0.0, motion_px=(0.0, 0.0))
    return flat.view(chessboard(size, pattern), rng)[0]


def grey_card_views(camera: CameraModel, size: tuple[int, int], views: int,
                    rng: np.random.Generator) -> list[np.ndarray]:
    """`views` captures of a grey card filling the view, through `camera`'s lens and light (held square on)."""
    card = np.full((size[1], size[0], 3), GREY_BGR, np.uint8)
    held = replace(camera, tilt_deg=(0.0, 0.0), shift_px=0.0, rotation_deg=0.0, scale=0.0, distortion=(0.0, 0.0))
    return [held.view(card, rng)[0] for _ in range(views)]


def needs_correction(camera: CameraModel) -> bool:
    """The camera has what a plant calibrates away at install: tilt, lens distortion, vignetting, a colour cast."""
    return any(camera.tilt_deg) or any(camera.distortion) or any(camera.vignette) or any(camera.cast)


def synthetic_correction(camera: CameraModel, size: tuple[int, int], seed: int = 0,
                         pattern: tuple[int, int] | None = None):  # noqa: ANN201 - a CameraCorrection
    """What `inspector camera calibrate` and `inspector camera reference` make of this synthetic camera: its lens
    and tilt from 25 target views and one flat one (a target sized to the frame unless `pattern` is given), then
    its light from 4 grey-card captures."""
    from .correction import CameraCorrection
    from .flatfield import FlatField
    from .lens import calibrate

    pattern = pattern or target_pattern(size)
    rng = np.random.default_rng([seed, 4242])
    lens = calibrate(target_views(camera, size, pattern, 25, rng), pattern, plane=plane_view(camera, size, pattern,
                                                                                                 rng))
    flat = FlatField.from_reference([lens.undistort(v) for v in grey_card_views(camera, size, 4, rng)])
    return CameraCorrection(lens, flat)
