"""Photometric normalisation of a crop: what makes a classifier indifferent to exposure, contrast and light falloff.

Lighting changes a crop's pixels roughly as `a * x + b` with one `a` and `b`
for the whole crop: gain and contrast by definition, an uneven illumination
because a crop spans a few percent of the board. Standardising each crop
(all channels together, so colours keep their relations) to a fixed mean and
spread removes exactly that, before either expert sees it; the experts are
trained on crops normalised the same way.
"""
from __future__ import annotations

import torch

INPUT_VERSION = 2  # what a trained expert's crops are: 2 normalised per crop (1: raw pixels, before registration)
MEAN, SPREAD = 128.0, 42.0  # grey level and standard deviation of every normalised crop
MIN_STD = 3.0  # a nearly flat crop (a missing part on bare mask) is not stretched into noise


def normalize_crop(crop: torch.Tensor) -> torch.Tensor:
    """A 3xHxW (or Nx3xHxW) uint8 crop standardised per crop to MEAN +- SPREAD, back in uint8."""
    x = crop.float()
    dims = tuple(range(x.ndim - 3, x.ndim))
    mean = x.mean(dim=dims, keepdim=True)
    std = x.std(dim=dims, keepdim=True).clamp(min=MIN_STD)
    return ((x - mean) * (SPREAD / std) + MEAN).round_().clamp_(0, 255).to(torch.uint8)
