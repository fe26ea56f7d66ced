"""A crop's result on a GPU must not depend on which other crops share its batch.

The engine batches by what happens to be queued, so the same request meets a
batch of 1 under one policy and of 6 under another. On a CPU the arithmetic per
sample is the same either way; on a GPU it is not: cuDNN picks its algorithm by
shape (and autotunes with `benchmark`), TF32 rounds convolutions to a 10-bit
mantissa, and near a threshold a different last digit is a different verdict.
So on CUDA every batch runs at one fixed shape (padded, or cut into pieces of
that size), in full float32, with deterministic algorithms: the same crop gives
the same bits in any batch. Measured on an H100: without this, `inspector bench`
reported different verdicts across policies; padding a batch of 1 to 8 costs a
small expert almost nothing there (launch-bound).
"""
from __future__ import annotations

from collections.abc import Callable

import torch

GPU_BATCH = 8  # the one shape a GPU batch runs at; larger batches run as pieces of it

_exact = False


def exact_cuda() -> None:
    """Full-precision, deterministic cuDNN and matmuls for this process (idempotent)."""
    global _exact
    if _exact:
        return
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    _exact = True


def fixed_shape(forward: Callable[[torch.Tensor], torch.Tensor], batch: torch.Tensor,
                size: int = GPU_BATCH) -> torch.Tensor:
    """`forward(batch)` computed at batch size `size` only: zero-padded, or in pieces; rows as given."""
    exact_cuda()
    n = batch.shape[0]
    outs: list[torch.Tensor] = []
    for i in range(0, n, size):
        part = batch[i:i + size]
        k = part.shape[0]
        if k < size:
            part = torch.cat([part, part.new_zeros((size - k, *part.shape[1:]))])
        outs.append(forward(part)[:k])
    return outs[0] if len(outs) == 1 else torch.cat(outs)
