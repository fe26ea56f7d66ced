"""A colour camera's Bayer filter: one colour a pixel, the other two interpolated (demosaicked) by the driver.

Most industrial colour cameras deliver a Bayer mosaic (GenICam PixelFormat BayerRG8 and its kin): each pixel has
seen one colour through its filter, and the two others are filled in from the neighbours. The interpolation leaves
colour fringes along every sharp edge (a pad's rim, a trace's side, a silk-screen letter) that no render has. The
synthetic camera (camera_model.py) and the training augmentation (training/augment.py) put a frame through the same
mosaic and OpenCV's bilinear demosaic, the plainest one a driver uses and the one with the strongest fringes.

Patterns are named as GenICam names them, by the top-left 2x2: RG is R G / G B. OpenCV names its Bayer
conversions one pixel off, hence the table.
"""
from __future__ import annotations

import cv2
import numpy as np

PATTERNS = ("RG", "GR", "GB", "BG")
# channel (BGR index) of the pixel at (row % 2, column % 2)
_LAYOUT = {"RG": ((2, 1), (1, 0)), "GR": ((1, 2), (0, 1)), "GB": ((1, 0), (2, 1)), "BG": ((0, 1), (1, 2))}
_DEMOSAIC = {"RG": cv2.COLOR_BayerBG2BGR, "GR": cv2.COLOR_BayerGB2BGR, "GB": cv2.COLOR_BayerGR2BGR,
             "BG": cv2.COLOR_BayerRG2BGR}


def check_pattern(pattern: str) -> str:
    if pattern not in PATTERNS:
        raise ValueError(f"unknown Bayer pattern {pattern!r}; one of {', '.join(PATTERNS)} (GenICam's BayerRG8 is RG)")
    return pattern


def mosaic(bgr: np.ndarray, pattern: str) -> np.ndarray:
    """HxWx3 (any dtype) -> HxW: the one colour each pixel's filter lets through."""
    layout = _LAYOUT[check_pattern(pattern)]
    out = np.empty(bgr.shape[:2], bgr.dtype)
    for dy in (0, 1):
        for dx in (0, 1):
            out[dy::2, dx::2] = bgr[dy::2, dx::2, layout[dy][dx]]
    return out


def demosaic(raw: np.ndarray, pattern: str) -> np.ndarray:
    """HxW uint8 mosaic -> HxWx3 BGR uint8, bilinear (OpenCV's default)."""
    return cv2.cvtColor(raw, _DEMOSAIC[check_pattern(pattern)])


def through_bayer(bgr: np.ndarray, pattern: str) -> np.ndarray:
    """A uint8 BGR picture as a Bayer camera of `pattern` delivers it after its driver's demosaic."""
    return demosaic(mosaic(bgr, pattern), pattern)
