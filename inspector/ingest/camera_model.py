"""A camera model for synthetic boards: how a real camera sees a rendered board.

A renderer places every board to the pixel under perfect light; a plant's
camera does not. `CameraModel.view` turns a rendered board into a camera frame:
the board is placed with a small shift, rotation and scale on a dark conveyor,
seen by a camera tilted a little off square (perspective) through a lens that
bends straight lines (radial distortion) and darkens the corners (vignetting),
under light with a colour cast and a gradient, smeared along the conveyor while
the shutter is open (motion blur), softened, on a noisy sensor, JPEG-compressed.
It returns the frame and the true placement (recipe px -> frame px before the
lens's distortion, 3x3), so the registration can be checked against it. Each
parameter is a range drawn per board; a fixed condition sets both ends alike.
The lens is a pinhole of focal length FOCAL x the frame's larger side with one
radial coefficient k1 (OpenCV's model), so a calibration can recover it.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import lru_cache

import cv2
import numpy as np

from .bayer import check_pattern, demosaic, mosaic

CONVEYOR_BGR = (58, 58, 62)
FOCAL = 1.2  # the synthetic lens's focal length in units of the frame's larger side (a normal lens)
Range = tuple[float, float]


def intrinsics(w: int, h: int) -> np.ndarray:
    """The synthetic camera's 3x3 camera matrix for a w x h frame (principal point at the centre)."""
    f = FOCAL * max(w, h)
    return np.array([[f, 0.0, (w - 1) / 2], [0.0, f, (h - 1) / 2], [0.0, 0.0, 1.0]])


@lru_cache(maxsize=16)
def _distortion_maps(w: int, h: int, k1: float) -> tuple[np.ndarray, np.ndarray]:
    """remap() maps that draw an ideal w x h picture as the lens with radial coefficient k1 shows it."""
    k = intrinsics(w, h)
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    pts = np.stack([xs.ravel(), ys.ravel()], 1).reshape(-1, 1, 2)
    ideal = cv2.undistortPoints(pts, k, np.array([k1, 0, 0, 0, 0], np.float64), P=k).reshape(h, w, 2)
    return ideal[:, :, 0].astype(np.float32), ideal[:, :, 1].astype(np.float32)


def distort(image: np.ndarray, k1: float, border: tuple[int, ...] = CONVEYOR_BGR) -> np.ndarray:
    """`image` as the synthetic lens (radial coefficient k1; negative: barrel) shows it."""
    h, w = image.shape[:2]
    mx, my = _distortion_maps(w, h, float(k1))
    return cv2.remap(image, mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=border)


def camera_rotation(w: int, h: int, ax_deg: float, ay_deg: float) -> np.ndarray:
    """The picture's change when the camera turns about its own centre by ax (x axis) and ay degrees: K R K^-1."""
    k = intrinsics(w, h)
    rx, ry = np.radians(ax_deg), np.radians(ay_deg)
    r = (np.array([[1, 0, 0], [0, np.cos(rx), -np.sin(rx)], [0, np.sin(rx), np.cos(rx)]])
         @ np.array([[np.cos(ry), 0, np.sin(ry)], [0, 1, 0], [-np.sin(ry), 0, np.cos(ry)]]))
    return k @ r @ np.linalg.inv(k)


def tilt_homography(w: int, h: int, ax_deg: float, ay_deg: float) -> np.ndarray:
    """The picture of a camera turned by ax (about the frame's x axis) and ay degrees, re-aimed at the centre."""
    hm = camera_rotation(w, h, ax_deg, ay_deg)
    c = np.array([(w - 1) / 2, (h - 1) / 2, 1.0])
    src = np.linalg.solve(hm, c)  # the point of the square-on view the turned camera sees at the centre ...
    src = src / src[2]
    move = np.array([[1, 0, src[0] - c[0]], [0, 1, src[1] - c[1]], [0, 0, 1]])  # ... put there first (the board
    out = hm @ move  # moved in its plane, not the picture: the view stays a true pinhole one, as a lens calibrates)
    return out / out[2, 2]


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
    tilt_deg: Range = (0.0, 0.0)  # the camera off square to the conveyor, about x and about y (fixed, not drawn)
    distortion: Range = (0.0, 0.0)  # the lens's radial coefficient k1 (negative: barrel), fixed per camera
    vignette: Range = (0.0, 0.0)  # corners darker by this fraction (falling off with the radius squared)
    cast: Range = (0.0, 0.0)  # colour cast: red x (1 + c), blue x (1 - c) (negative: a cool light)
    motion_px: Range = (0.0, 0.0)  # the board's travel along the conveyor (x) while the shutter is open
    bayer: str | None = None  # a colour sensor's Bayer pattern (RG, GR, GB, BG; ingest/bayer.py), demosaicked

    @property
    def is_identity(self) -> bool:
        return self == CameraModel()

    def view(self, board: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(camera frame of the board's size, 3x3 float64 matrix mapping recipe px to frame px, before the lens's
        distortion)."""
        h, w = board.shape[:2]
        matrix = self._placement(w, h, rng)
        frame = board
        if not np.allclose(matrix, np.eye(3)):
            flags, border = cv2.INTER_LINEAR, cv2.BORDER_CONSTANT
            frame = (cv2.warpAffine(board, matrix[:2], (w, h), flags=flags, borderMode=border,
                                    borderValue=CONVEYOR_BGR) if not any(self.tilt_deg) else
                     cv2.warpPerspective(board, matrix, (w, h), flags=flags, borderMode=border,
                                         borderValue=CONVEYOR_BGR))
        k1 = _draw(rng, self.distortion)
        if k1:
            frame = distort(frame, k1)
        return self._photometric(frame, rng), matrix

    def _placement(self, w: int, h: int, rng: np.random.Generator) -> np.ndarray:
        angle = rng.uniform(-self.rotation_deg, self.rotation_deg) if self.rotation_deg else 0.0
        scale = 1.0 + (rng.uniform(-self.scale, self.scale) if self.scale else 0.0)
        dx, dy = (rng.uniform(-self.shift_px, self.shift_px, 2) if self.shift_px else (0.0, 0.0))
        matrix = np.vstack([cv2.getRotationMatrix2D(((w - 1) / 2, (h - 1) / 2), float(angle), float(scale)),
                            [0.0, 0.0, 1.0]])
        matrix[:2, 2] += (dx, dy)
        if any(self.tilt_deg):
            matrix = tilt_homography(w, h, *self.tilt_deg) @ matrix  # the camera's mount: the same every board
        return matrix

    def _photometric(self, frame: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        draws = {name: _draw(rng, getattr(self, name)) for name in ("gain", "contrast", "blur_sigma", "noise_sigma",
                                                                     "vignette", "cast", "motion_px")}
        light = (draws["gain"] != 1.0 or self.gradient or draws["contrast"] != 1.0 or draws["vignette"]
                 or draws["cast"])
        if not (light or draws["blur_sigma"] or draws["noise_sigma"] or draws["motion_px"] or self.jpeg_quality
                or self.bayer):
            return frame
        img = frame.astype(np.float32)
        if draws["vignette"]:
            img *= _vignette(img.shape[1], img.shape[0], draws["vignette"])[:, :, None]
        if draws["cast"]:
            c = draws["cast"]
            img *= np.array([1.0 - c, 1.0, 1.0 + c], np.float32)  # BGR
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
        if draws["motion_px"] > 0:
            img = cv2.filter2D(img, -1, motion_kernel(draws["motion_px"]), borderType=cv2.BORDER_REFLECT)
        if draws["blur_sigma"] > 0:
            img = cv2.GaussianBlur(img, (0, 0), draws["blur_sigma"])
        if self.bayer:  # the sensor sees one colour a pixel; its noise is on that one; the driver interpolates
            raw = mosaic(img, self.bayer)
            if draws["noise_sigma"] > 0:
                raw += rng.normal(0.0, draws["noise_sigma"], raw.shape).astype(np.float32)
            out = demosaic(np.clip(np.rint(raw), 0, 255).astype(np.uint8), self.bayer)
        else:
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


@lru_cache(maxsize=8)
def _vignette(w: int, h: int, strength: float) -> np.ndarray:
    """Light falloff: 1 at the centre, 1 - strength at the corners, with the radius squared."""
    xs, ys = np.meshgrid(np.linspace(-1, 1, w, dtype=np.float32), np.linspace(-1, 1, h, dtype=np.float32))
    r2 = (xs * xs * w * w + ys * ys * h * h) / float(w * w + h * h)
    return (1.0 - strength * r2).astype(np.float32)


def motion_kernel(length: float) -> np.ndarray:
    """A horizontal line `length` px long (a fractional end pixel weighted by its part), summing to 1."""
    n = int(np.ceil(length))
    k = np.ones(n | 1, np.float32)  # odd, centred
    extra = (len(k) - length) / 2
    k[0] -= extra
    k[-1] -= extra
    return (k / k.sum()).reshape(1, -1)


def _draw(rng: np.random.Generator, r: Range | None) -> float:
    if r is None:
        return 0.0
    lo, hi = r
    return float(lo if lo == hi else rng.uniform(lo, hi))


# Named cameras for `--camera`: what a plant's camera does on a normal day, and the accuracy suite's conditions.
PRESETS: dict[str, CameraModel] = {
    "none": CameraModel(),
    "bayer": CameraModel(bayer="RG"),  # a colour camera's raw mosaic (GenICam BayerRG8), demosaicked by its driver
    "realistic": CameraModel(shift_px=6, rotation_deg=0.4, scale=0.005, gain=(0.8, 1.2), contrast=(0.85, 1.1),
                             gradient=0.1, blur_sigma=(0.0, 0.8), noise_sigma=(0.0, 4.0), jpeg_quality=(75, 95)),
}
_SCALARS = {"shift_px": "shift", "rotation_deg": "rotation", "scale": "scale", "gradient": "gradient"}
_RANGES = {"gain": "gain", "contrast": "contrast", "blur_sigma": "blur", "noise_sigma": "noise",
           "jpeg_quality": "jpeg", "distortion": "k1", "vignette": "vignette", "cast": "cast", "motion_px": "motion",
           "tilt_deg": "tilt"}  # tilt=AX:AY, degrees about x and y (tilt=2: 2 about each)


def parse_camera(spec: str) -> CameraModel:
    """A preset name, or `key=value` pairs (`shift=10,rotation=1,blur=1.2,gain=0.6:1.4,jpeg=60`, and a real
    lens's `tilt=2,k1=-0.1,vignette=0.3,cast=0.15,motion=3`); a preset may start the list (`realistic,jpeg=60`).
    Ranges are `lo:hi`."""
    model = CameraModel()
    keys = {v: k for k, v in {**_SCALARS, **_RANGES, "bayer": "bayer"}.items()}
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
        if name == "bayer":
            model = replace(model, bayer=check_pattern(value.strip().upper()))
            continue
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
        key = _SCALARS.get(f.name) or _RANGES.get(f.name, f.name)
        if isinstance(value, str):
            out.append(f"{key}={value}")
        elif isinstance(value, tuple):
            out.append(f"{key}={value[0]:g}" + ("" if value[0] == value[1] else f":{value[1]:g}"))
        else:
            out.append(f"{key}={value:g}")
    return ",".join(out) or "none"
