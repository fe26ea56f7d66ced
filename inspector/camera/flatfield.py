"""Light and colour: white balance and flat field from a reference capture of a grey card, and exposure advice.

A lens darkens its corners (vignetting), a light has a colour cast, and both
multiply each channel of each pixel by a slowly varying factor. A grey card
filling the view, captured once under the line's light, shows exactly those
factors; their inverse, smoothed, makes every later frame as if lit evenly by
white light at the reference's own exposure. Per-crop normalisation
(ingest/photometric.py) handles a crop's overall level and contrast; this
handles what it cannot: colour relations and falloff across the board.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field

import cv2
import numpy as np

STORE_SCALE = 8  # the gains are kept at 1/8 of the frame's size: the light varies slowly
CLIPPED_LEVEL, CLIPPED_SHARE = 250, 0.02  # a frame with more than 2% of pixels at 250+ is over-exposed
DARK_MEAN = 45.0  # a frame darker than this on average is under-exposed


class ReferenceRefused(ValueError):
    """The reference capture cannot serve (clipped, too dark, not uniform); the message says why."""


@dataclass
class FlatField:
    gains_small: np.ndarray  # (h/8, w/8, 3) float32 per-channel gains
    size: tuple[int, int]  # (width, height) of the frames it applies to
    level: float  # the grey level the corrected reference has
    _gains: np.ndarray | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_reference(cls, images: list[np.ndarray]) -> FlatField:
        """The correction from captures of a grey card filling the view (averaged: their noise cancels)."""
        sizes = {im.shape[:2] for im in images}
        if not images or len(sizes) != 1:
            raise ReferenceRefused("give one or more reference captures of one size (a grey card filling the view)")
        ref = np.mean([im.astype(np.float32) for im in images], axis=0)
        h, w = ref.shape[:2]
        if (ref >= CLIPPED_LEVEL).mean() > CLIPPED_SHARE:
            raise ReferenceRefused("the reference is clipped (over-exposed); lower ExposureTime or Gain and capture "
                                   "it again")
        if ref.mean() < DARK_MEAN:
            raise ReferenceRefused(f"the reference is too dark (mean {ref.mean():.0f}); raise ExposureTime or Gain "
                                   "and capture it again")
        smooth = cv2.GaussianBlur(ref, (0, 0), max(w, h) / 40)
        level = float(np.median(smooth[h // 3:2 * h // 3, w // 3:2 * w // 3]))  # the centre's grey, all channels
        if smooth.min() < 0.25 * level:
            raise ReferenceRefused("the reference falls below a quarter of its centre's level somewhere: it is not a "
                                   "uniform grey card filling the view (or the light is blocked)")
        gains = level / np.maximum(smooth, 1.0)
        small = cv2.resize(gains, (max(1, w // STORE_SCALE), max(1, h // STORE_SCALE)), interpolation=cv2.INTER_AREA)
        return cls(small.astype(np.float32), (w, h), level)

    def apply(self, image: np.ndarray) -> np.ndarray:
        h, w = image.shape[:2]
        if (w, h) != self.size:
            raise ValueError(f"the flat field was taken on {self.size[0]}x{self.size[1]} frames, this one is {w}x{h}; "
                             f"capture the reference again at the camera's current resolution")
        if self._gains is None:
            self._gains = cv2.resize(self.gains_small, self.size, interpolation=cv2.INTER_LINEAR)
        return cv2.multiply(image, self._gains, dtype=cv2.CV_8U)  # rounded and saturated: 0.3 ms a 640x400 frame

    def to_json(self) -> dict:
        small = self.gains_small.astype(np.float16)
        return {"size": list(self.size), "level": self.level, "shape": list(small.shape),
                "gains_f16": base64.b64encode(small.tobytes()).decode()}

    @classmethod
    def from_json(cls, doc: dict) -> FlatField:
        shape = tuple(int(v) for v in doc["shape"])
        data = np.frombuffer(base64.b64decode(doc["gains_f16"]), np.float16)
        if data.size != int(np.prod(shape)) or len(shape) != 3 or shape[2] != 3:
            raise ValueError("flat field: its gains do not match their shape; capture the reference again")
        return cls(data.reshape(shape).astype(np.float32), (int(doc["size"][0]), int(doc["size"][1])),
                   float(doc["level"]))


def exposure_advice(image: np.ndarray) -> str | None:
    """What is wrong with a frame's exposure and what to change, or None (a 1/8 sample of its pixels)."""
    sample = image[::8, ::8]
    clipped = float((sample >= CLIPPED_LEVEL).mean())
    if clipped > CLIPPED_SHARE:
        return f"over-exposed: {100 * clipped:.1f}% of pixels clipped; lower ExposureTime or Gain"
    mean = float(sample.mean())
    if mean < DARK_MEAN:
        return f"under-exposed: mean level {mean:.0f} of 255; raise ExposureTime (or Gain, at the cost of noise)"
    return None
