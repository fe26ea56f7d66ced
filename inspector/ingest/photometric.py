"""Photometric normalisation of a crop: what makes a classifier indifferent to exposure, contrast and light falloff.

Lighting changes a crop's pixels roughly as `a * x + b` with one `a` and `b`
for the whole crop: gain and contrast by definition, an uneven illumination
because a crop spans a few percent of the board. Standardising each crop
(all channels together, so colours keep their relations) to a fixed mean and
spread removes exactly that, before either expert sees it; the experts are
trained on crops normalised the same way.
"""
from __future__ import annotations

import numpy as np
import torch

INPUT_VERSION = 2  # what a trained expert's crops are: 2 normalised per crop (1: raw pixels, before registration)
MEAN, SPREAD = 128.0, 42.0  # grey level and standard deviation of every normalised crop
MIN_STD = 3.0  # a nearly flat crop (a missing part on bare mask) is not stretched into noise


def _scale_offset(sums: np.ndarray, squares: np.ndarray, n: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """Per crop, float32 (scale, offset) with scale * x + offset standardised: from the exact integer sums of its
    values and their squares, so the arithmetic (not the order of a float reduction) fixes every result."""
    mean = sums / n
    std = np.sqrt(np.maximum(squares - sums * mean, 0.0) / np.maximum(np.asarray(n) - 1, 1))
    scale = SPREAD / np.maximum(std, MIN_STD)
    return scale.astype(np.float32), (MEAN - mean * scale).astype(np.float32)


def normalize_crop(crop: torch.Tensor) -> torch.Tensor:
    """A 3xHxW (or Nx3xHxW) uint8 crop standardised per crop to MEAN +- SPREAD, back in uint8 (training's path;
    the line's is normalize_crops, with the same numbers)."""
    flat = crop.reshape(-1, crop.shape[-3] * crop.shape[-2] * crop.shape[-1]).to(torch.int64)
    scale, offset = _scale_offset(flat.sum(1).numpy().astype(np.float64),
                                  (flat * flat).sum(1).numpy().astype(np.float64), flat.shape[1])
    shape = (-1,) + (1,) * 3
    x = crop.float() * torch.from_numpy(scale).view(shape) + torch.from_numpy(offset).view(shape)
    return x.round_().clamp_(0, 255).to(torch.uint8).reshape(crop.shape)


def normalize_crops(crops: list[np.ndarray]) -> list[torch.Tensor]:
    """HxWx3 BGR uint8 crops of any sizes as 3xHxW RGB uint8 tensors, each standardised like normalize_crop (the
    same numbers): one pass over all of a board's pixels instead of a few torch calls per crop."""
    if not crops:
        return []
    sizes = np.array([c.size for c in crops])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    flat = np.concatenate([c.reshape(-1) for c in crops])
    squares = flat.astype(np.uint16)
    squares *= squares  # 255 ** 2 fits
    scale, offset = _scale_offset(np.add.reduceat(flat, starts, dtype=np.int64).astype(np.float64),
                                  np.add.reduceat(squares, starts, dtype=np.int64).astype(np.float64), sizes)
    x = flat.astype(np.float32) * np.repeat(scale, sizes) + np.repeat(offset, sizes)
    out = np.clip(np.rint(x), 0, 255).astype(np.uint8)
    return [torch.from_numpy(np.ascontiguousarray(out[a:a + c.size].reshape(c.shape)[:, :, ::-1].transpose(2, 0, 1)))
            for a, c in zip(starts, crops)]
