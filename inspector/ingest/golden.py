"""Golden comparison: a live crop beside the same window of the golden board, the way AOI compares a board with
its known-good one.

An expert taught with a reference (`reference: composite` in its spec) reads one 3-channel crop made of three
greys: the live crop, the golden crop, and their absolute difference. Each grey is standardised on its own first
(ingest/photometric.py's numbers), so a golden photo taken under other light still lines up with the live one;
the difference is what a defect leaves, and the two crops beside it let the expert tell a real change from a
trace's edge off by a pixel. The same function makes the training crops and the line's, so nothing differs.
Colour is given up for it: a golden comparison is about shape.
"""
from __future__ import annotations

import torch

from .photometric import MEAN, MIN_STD, SPREAD

_GREY = torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)  # RGB order, as crop tensors are


def _standard_grey(x: torch.Tensor) -> torch.Tensor:
    g = (x.float() * _GREY).sum(dim=1)  # N x H x W
    mean = g.mean(dim=(1, 2), keepdim=True)
    std = g.std(dim=(1, 2), keepdim=True).clamp(min=MIN_STD)
    return (g - mean) * (SPREAD / std) + MEAN


def compose(live: torch.Tensor, golden: torch.Tensor) -> torch.Tensor:
    """N x 3 x H x W uint8 RGB live and golden crops (one window each) -> N x 3 x H x W uint8: live grey, golden grey,
    |live - golden| (channels in that order)."""
    if live.shape != golden.shape:
        raise ValueError(f"a live crop {tuple(live.shape[-2:])} and its golden crop {tuple(golden.shape[-2:])} must "
                         "be one window: the same size")
    a, b = _standard_grey(live), _standard_grey(golden)
    out = torch.stack([a, b, (a - b).abs()], dim=1)
    return out.round_().clamp_(0, 255).to(torch.uint8)
