"""A camera model for synthetic boards: how a real camera sees a rendered board.

A renderer places every board to the pixel under perfect light; a plant's
camera does not. `CameraModel.view` turns a rendered board into a camera frame:
the board is placed with a small shift, rotation and scale on a dark conveyor,
lit unevenly, seen through a soft lens and a noisy sensor, and JPEG-compressed.
It returns the frame and the true placement (recipe px -> frame px), so the
registration can be checked against it. Each parameter is a range drawn per
board; a fixed condition sets both ends alike.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

import cv2
import numpy as np

CONVEYOR_BGR = (58, 58, 62)
Range = tuple[float, float]


@dataclass(frozen=True)
class CameraModel:
    """Per-board draws; `shift_px`, `rotation_deg` and `scale` are the largest deviation either way."""

    shift_px: float = 0.0  # board placement on the conveyor, each axis
    rotation_deg: float = 0.0
    scale: float = 0.0  # relative: 0.01 is +-1% (lens distance)
    gain: Range = (1.0, 1.0)  # exposure / light level
    contrast: Range = (1.0, 1.0)  # around the frame's mean
    gradient: float = 0.0  # uneven illumination: +-this fraction across the board, in a random direction
    blur_sigma: Range = (0.0, 0.0)  # a soft or defocused lens, Gaussian sigma in px
    noise_sigma: Range = (0.0, 0.0)  # sensor noise, grey levels
    jpeg_quality: Range | None = None  # None: lossless

    @property
    def is_identity(self) -> bool:
        return self == CameraModel()

    def view(self, board: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(camera frame of the board's size, 2x3 float64 matrix mapping recipe px to frame px)."""
        h, w = board.shape[:2]
        matrix = self._placement(w, h, rng)
        frame = board
        if not np.allclose(matrix, [[1, 0, 0], [0, 1, 0]]):
            frame = cv2.warpAffine(board, matrix, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                                   borderValue=CONVEYOR_BGR)
        return self._photometric(frame, rng), matrix

    def _placement(self, w: int, h: int, rng: np.random.Generator) -> np.ndarray:
        angle = rng.uniform(-self.rotation_deg, self.rotation_deg) if self.rotation_deg else 0.0
        scale = 1.0 + (rng.uniform(-self.scale, self.scale) if self.scale else 0.0)
        dx, dy = (rng.uniform(-self.shift_px, self.shift_px, 2) if self.shift_px else (0.0, 0.0))
        matrix = cv2.getRotationMatrix2D(((w - 1) / 2, (h - 1) / 2), float(angle), float(scale))
        matrix[:, 2] += (dx, dy)
        return matrix

    def _photometric(self, frame: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        draws = {name: _draw(rng, getattr(self, name)) for name in ("gain", "contrast", "blur_sigma", "noise_sigma")}
        light = draws["gain"] != 1.0 or self.gradient or draws["contrast"] != 1.0
        if not (light or draws["blur_sigma"] or draws["noise_sigma"] or self.jpeg_quality):
            return frame
        img = frame.astype(np.float32)
        if self.gradient:
            h, w = img.shape[:2]
            a = rng.uniform(0, 2 * np.pi)
            xs, ys = np.meshgrid(np.linspace(-1, 1, w, dtype=np.float32), np.linspace(-1, 1, h, dtype=np.float32))
            ramp = (np.cos(a) * xs + np.sin(a) * ys) / max(abs(np.cos(a)) + abs(np.sin(a)), 1e-6)
            img *= (1.0 + self.gradient * ramp)[:, :, None]
        if draws["gain"] != 1.0:
            img *= draws["gain"]
        if draws["contrast"] != 1.0:
            mean = img.mean()
            img = mean + draws["contrast"] * (img - mean)
        if draws["blur_sigma"] > 0:
            img = cv2.GaussianBlur(img, (0, 0), draws["blur_sigma"])
        if draws["noise_sigma"] > 0:
            img += rng.normal(0.0, draws["noise_sigma"], img.shape).astype(np.float32)
        out = np.clip(np.rint(img), 0, 255).astype(np.uint8)
        if self.jpeg_quality is not None:
            quality = int(round(_draw(rng, self.jpeg_quality)))
            ok, data = cv2.imencode(".jpg", out, [cv2.IMWRITE_JPEG_QUALITY, quality])
            if not ok:
                raise RuntimeError("OpenCV could not JPEG-encode a frame")
            out = cv2.imdecode(data, cv2.IMREAD_COLOR)
        return out


def _draw(rng: np.random.Generator, r: Range | None) -> float:
    if r is None:
        return 0.0
    lo, hi = r
    return float(lo if lo == hi else rng.uniform(lo, hi))


# Named cameras for `--camera`: what a plant's camera does on a normal day, and the accuracy suite's conditions.
PRESETS: dict[str, CameraModel] = {
    "none": CameraModel(),
    "realistic": CameraModel(shift_px=6, rotation_deg=0.4, scale=0.005, gain=(0.8, 1.2), contrast=(0.85, 1.1),
                             gradient=0.1, blur_sigma=(0.0, 0.8), noise_sigma=(0.0, 4.0), jpeg_quality=(75, 95)),
}
_SCALARS = {"shift_px": "shift", "rotation_deg": "rotation", "scale": "scale", "gradient": "gradient"}
_RANGES = {"gain": "gain", "contrast": "contrast", "blur_sigma": "blur", "noise_sigma": "noise",
           "jpeg_quality": "jpeg"}


def parse_camera(spec: str) -> CameraModel:
    """A preset name, or `key=value` pairs (`shift=10,rotation=1,blur=1.2,gain=0.6:1.4,jpeg=60`); a preset may
    start the list (`realistic,jpeg=60`). Ranges are `lo:hi`."""
    model = CameraModel()
    keys = {v: k for k, v in {**_SCALARS, **_RANGES}.items()}
    for i, item in enumerate(p.strip() for p in spec.split(",") if p.strip()):
        if "=" not in item:
            if i == 0 and item in PRESETS:
                model = PRESETS[item]
                continue
            raise ValueError(f"unknown camera {item!r}: use a preset ({', '.join(PRESETS)}) or key=value pairs "
                             f"({', '.join(keys)}), e.g. shift=10,rotation=1,blur=1.2,jpeg=60")
        key, _, value = item.partition("=")
        name = keys.get(key.strip())
        if name is None:
            raise ValueError(f"unknown camera setting {key!r}; known: {', '.join(keys)}")
        try:
            lo, _, hi = value.partition(":")
            pair = (float(lo), float(hi or lo))
        except ValueError:
            raise ValueError(f"camera setting {key}={value!r} must be a number or a range lo:hi") from None
        model = replace(model, **{name: pair[1] if name in _SCALARS else pair})
    return model


def describe(model: CameraModel) -> str:
    """The settings that differ from a perfect camera, in parse_camera's spelling."""
    base, out = CameraModel(), []
    for f in fields(model):
        value = getattr(model, f.name)
        if value == getattr(base, f.name):
            continue
        key = _SCALARS.get(f.name) or _RANGES[f.name]
        if isinstance(value, tuple):
            out.append(f"{key}={value[0]:g}" + ("" if value[0] == value[1] else f":{value[1]:g}"))
        else:
            out.append(f"{key}={value:g}")
    return ",".join(out) or "none"
