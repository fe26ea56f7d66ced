"""Cutting a board image into component crops from the rule set's layout.

Each crop is the part's body window plus the rule set's margin, turned back to
rotation 0 so a classifier sees every part of its type the same way round.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..routing.rules import ComponentRule, Placement, RuleSet, body_box


class BoardSizeMismatch(ValueError):
    """The image is not the size the rule set's layout was drawn for."""


@dataclass
class Crop:
    ref: str
    component: ComponentRule
    image: np.ndarray  # HxWx3 BGR uint8, rotation undone

    def tensor(self) -> torch.Tensor:
        return crop_tensor(self.image)


def crop_tensor(image: np.ndarray) -> torch.Tensor:
    """An HxWx3 BGR crop as 3xHxW RGB uint8, what the engine's experts take (and training feeds them)."""
    return torch.from_numpy(np.ascontiguousarray(image[:, :, ::-1].transpose(2, 0, 1)))


def crop_part(image: np.ndarray, comp: ComponentRule, place: Placement, margin: int) -> np.ndarray:
    x0, y0, x1, y1 = body_box(comp, place, margin)
    h, w = image.shape[:2]
    out = np.zeros((y1 - y0, x1 - x0, 3), np.uint8)
    sx0, sy0, sx1, sy1 = max(0, x0), max(0, y0), min(w, x1), min(h, y1)
    out[sy0 - y0:sy1 - y0, sx0 - x0:sx1 - x0] = image[sy0:sy1, sx0:sx1]
    return np.ascontiguousarray(np.rot90(out, -(place.rotation // 90)))


def cut_board(image: np.ndarray, rules: RuleSet) -> list[Crop]:
    """Every part's crop in scan order; the image must match the layout's board size."""
    if image.ndim != 3 or image.shape[2] != 3:
        raise BoardSizeMismatch(f"a board image must be HxWx3 colour, got shape {image.shape}")
    expect_w, expect_h = rules.board_size
    if image.shape[1] != expect_w or image.shape[0] != expect_h:
        raise BoardSizeMismatch(
            f"board image is {image.shape[1]}x{image.shape[0]} px but rule set {rules.recipe} lays out a "
            f"{expect_w}x{expect_h} board; check the camera's resolution or the recipe in use")
    return [Crop(p.ref, c, crop_part(image, c, p, rules.crop_margin)) for c, p in rules.placements()]
