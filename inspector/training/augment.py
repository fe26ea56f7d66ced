"""Training augmentation of crops (torchvision.transforms.v2): what a real camera does to a crop.

The line sees crops through a camera: exposure and contrast drift, light falls
off across the board, lenses are soft, sensors are noisy, frames are JPEG, and
registration leaves a fraction of a pixel and a fraction of a degree. The
line's correction (inspector/camera) undoes the lens, vignetting and the
colour cast only as well as its reference capture allows, and nothing undoes
motion blur: so training also smears crops along the conveyor (x or y in a
crop, since crops are cut with the part's rotation undone) and leaves a small
residual cast per channel, and puts some crops through a colour camera's
Bayer mosaic and demosaic. Each training crop gets a fresh draw of all of
that every epoch. Nothing here flips
or turns a crop: the polarity classes are left against right.

Crops are 3xHxW uint8 RGB in, uint8 out, before photometric normalisation
(inspector/ingest/photometric.py), exactly where the line's crops are.
`augment_stack` runs the pipeline over an expert's crops (all of one size) in
small groups: v2 draws one set of parameters per call, so each group of
GROUP crops shares a draw and the next group gets a fresh one; per crop, the
call overhead would make training several times slower.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from ..ingest.bayer import PATTERNS, through_bayer
from ..ingest.camera_model import motion_kernel
from ..ingest.crops import crop_tensor
from ..ingest.photometric import normalize_crop


class SubpixelJitter(v2.Transform):
    """A small shift (a fraction of a pixel), rotation and scale, sampled from an edge-padded crop (no black rim)."""

    def __init__(self, shift_px: float = 0.6, degrees: float = 0.6, scale: float = 0.012) -> None:
        super().__init__()
        self.shift_px, self.degrees, self.scale = shift_px, degrees, scale

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        u = torch.empty(4).uniform_(-1.0, 1.0).tolist()
        return {"translate": [u[0] * self.shift_px, u[1] * self.shift_px], "angle": u[2] * self.degrees,
                "scale": 1.0 + u[3] * self.scale}

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        pad = 2 + math.ceil(self.shift_px)
        h, w = inpt.shape[-2:]
        x = F.pad(inpt.float(), [pad, pad, pad, pad], padding_mode="edge")
        x = F.affine(x, angle=params["angle"], translate=params["translate"], scale=params["scale"], shear=[0.0, 0.0],
                     interpolation=v2.InterpolationMode.BILINEAR)
        return x[..., pad:pad + h, pad:pad + w].round_().clamp_(0, 255).to(inpt.dtype)


class Illumination(v2.Transform):
    """Exposure (gain), contrast around the crop's mean, and a light gradient across the crop."""

    def __init__(self, gain: tuple[float, float] = (0.5, 1.5), contrast: tuple[float, float] = (0.6, 1.2),
                 gradient: float = 0.06) -> None:
        super().__init__()
        self.gain, self.contrast, self.gradient = gain, contrast, gradient

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        return {"gain": float(torch.empty(()).uniform_(*self.gain)),
                "contrast": float(torch.empty(()).uniform_(*self.contrast)),
                "slope": torch.empty(2).uniform_(-self.gradient, self.gradient).tolist()}

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        x = inpt.float()
        h, w = x.shape[-2:]
        ys = torch.linspace(-1, 1, h).view(h, 1)
        xs = torch.linspace(-1, 1, w).view(1, w)
        x = x * (1 + params["slope"][0] * xs + params["slope"][1] * ys) * params["gain"]
        mean = x.mean(dim=(-3, -2, -1), keepdim=True)  # per crop
        x = mean + params["contrast"] * (x - mean)
        return x.round_().clamp_(0, 255).to(inpt.dtype)


class SensorNoise(v2.Transform):
    """Gaussian noise of a sigma (grey levels) drawn per crop."""

    def __init__(self, sigma: tuple[float, float] = (0.0, 9.0)) -> None:
        super().__init__()
        self.sigma = sigma

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        return {"sigma": float(torch.empty(()).uniform_(*self.sigma))}

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        x = inpt.float() + torch.randn(inpt.shape) * params["sigma"]
        return x.round_().clamp_(0, 255).to(inpt.dtype)


class MotionBlur(v2.Transform):
    """The board's travel while the shutter is open: a line kernel up to `max_px` long, along a crop's x or y."""

    def __init__(self, max_px: float = 5.0) -> None:
        super().__init__()
        self.max_px = max_px

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        return {"length": float(torch.empty(()).uniform_(1.0, self.max_px)), "vertical": bool(torch.rand(()) < 0.5)}

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        line = torch.from_numpy(motion_kernel(params["length"]))[0]
        n = len(line)
        kernel = line.view(1, 1, n, 1) if params["vertical"] else line.view(1, 1, 1, n)
        x = inpt.float()
        shape = x.shape
        flat = x.reshape(-1, 1, *shape[-2:])
        pad = [0, 0, n // 2, n // 2] if params["vertical"] else [n // 2, n // 2, 0, 0]
        flat = torch.nn.functional.conv2d(torch.nn.functional.pad(flat, pad, mode="replicate"), kernel)
        return flat.reshape(shape).round_().clamp_(0, 255).to(inpt.dtype)


class BayerMosaic(v2.Transform):
    """A colour camera's Bayer filter and its driver's demosaic (ingest/bayer.py), at one of the four phases a crop
    can start on: the colour fringes along edges that no render has."""

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        return {"pattern": PATTERNS[int(torch.randint(len(PATTERNS), ()))]}

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        flat = inpt.reshape(-1, *inpt.shape[-3:])  # N x 3 x H x W, RGB
        out = torch.empty_like(flat)
        for i, crop in enumerate(flat):
            bgr = np.ascontiguousarray(crop.numpy().transpose(1, 2, 0)[:, :, ::-1])
            out[i] = torch.from_numpy(through_bayer(bgr, params["pattern"])[:, :, ::-1].transpose(2, 0, 1).copy())
        return out.reshape(inpt.shape)


class ResidualCast(v2.Transform):
    """What white balance leaves: red and blue pulled apart by up to `cast`, and each channel off by up to `jitter`
    (RGB order, as the crops are here)."""

    def __init__(self, cast: float = 0.06, jitter: float = 0.03) -> None:
        super().__init__()
        self.cast, self.jitter = cast, jitter

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        c = float(torch.empty(()).uniform_(-self.cast, self.cast))
        gains = torch.tensor([1.0 + c, 1.0, 1.0 - c]) * (1.0 + torch.empty(3).uniform_(-self.jitter, self.jitter))
        return {"gains": gains}

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        x = inpt.float() * params["gains"].view(3, 1, 1)
        return x.round_().clamp_(0, 255).to(inpt.dtype)


GROUP = 8


def augment_stack(crops: torch.Tensor, pipeline: v2.Compose, group: int = GROUP) -> torch.Tensor:
    """An Nx3xHxW uint8 stack through `pipeline`, a fresh draw for every `group` crops."""
    return torch.cat([pipeline(crops[i:i + group]) for i in range(0, len(crops), group)]) if len(crops) else crops


def camera_augmentation(strength: float = 1.0) -> v2.Compose:
    """The training pipeline for one uint8 crop; `strength` 0 returns it unchanged."""
    p = min(1.0, strength)
    return v2.Compose([
        v2.RandomApply([SubpixelJitter()], p=0.7 * p),
        v2.RandomApply([Illumination()], p=0.8 * p),
        v2.RandomApply([ResidualCast()], p=0.5 * p),
        v2.RandomApply([MotionBlur()], p=0.4 * p),
        v2.RandomApply([v2.GaussianBlur(kernel_size=7, sigma=(0.2, 1.6))], p=0.6 * p),
        v2.RandomApply([SensorNoise()], p=0.6 * p),
        v2.RandomApply([BayerMosaic()], p=0.3 * p),
        v2.RandomApply([v2.JPEG(quality=(45, 95))], p=0.5 * p),
    ])


def augmented_stacks(crops: list[np.ndarray],
                     pipeline: v2.Compose | None = None) -> Iterator[tuple[list[int], torch.Tensor]]:
    """HxWx3 BGR crops as (indices, Nx3xHxW uint8 RGB stack) per crop size, each stack augmented when a pipeline is
    given; not yet normalised (a golden comparison composes first: ingest/golden.py)."""
    by_shape: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for i, crop in enumerate(crops):
        by_shape[crop.shape].append(i)
    for idx in by_shape.values():
        stack = torch.stack([crop_tensor(crops[i]) for i in idx])
        yield idx, augment_stack(stack, pipeline) if pipeline is not None else stack


def seen_stacks(crops: list[np.ndarray],
                pipeline: v2.Compose | None = None) -> Iterator[tuple[list[int], torch.Tensor]]:
    """HxWx3 BGR crops as the experts see them: (indices, Nx3xHxW uint8 stack) per crop size, each stack first
    augmented when a pipeline is given, then photometrically normalised like the line's crops."""
    for idx, stack in augmented_stacks(crops, pipeline):
        yield idx, normalize_crop(stack)


def turned(image: np.ndarray, k: int) -> np.ndarray:
    """`image` under the k-th of the square's 8 symmetries (k // 2 quarter turns, mirrored when k is odd): the same
    part seen from another side, for classes that do not depend on orientation (a short turned is still a short; a
    reversed diode mirrored is not, so it is the teacher's to declare)."""
    out = np.rot90(image, k // 2)
    return np.ascontiguousarray(out[:, ::-1] if k % 2 else out)
