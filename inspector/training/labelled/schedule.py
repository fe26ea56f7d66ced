"""The labelled trainer's schedule, torch-free so the command line can state it without loading torch: the batch,
the least epoch, the one-cycle warm-up and where patience starts counting (trainer.py says why each is so)."""
from __future__ import annotations

import math

LR = 4e-3
WARM_UP = 0.3  # share of the epochs over which the one-cycle step rises to its peak (torch's default)
BATCH = 64
MIN_EPOCH = 16 * BATCH  # crops an epoch draws at the least when not told: draws are fresh augmentations, not a pass
HALF_DOWN = WARM_UP + (1 - WARM_UP) / 2  # share of the epochs after which the cosine step is below half its peak


def patience_from(epochs: int) -> int:
    """The epoch from which `patience` counts: where the one-cycle step (cosine, peak at WARM_UP of the run) has
    fallen to half its peak. Epochs before it are taken at a large step; stopping among them keeps an unannealed
    model, chosen by a held-out score that jumps about from one epoch to the next."""
    return math.ceil(epochs * HALF_DOWN)
