"""What a trained version must be trained with again to come out the same: its seed is recorded beside it; this
adds what the seed does not pin down.

Training on a CPU is deterministic for one seed, one torch release and one count of intra-op threads; another
thread count sums the same floats in another order (a convolution's weight gradient is reduced across threads),
so the same command on a box with more cores teaches other weights, as good but not the same. Each version records
the count and the release, so `zoo train --threads N` on that release reproduces it.
"""
from __future__ import annotations

from typing import Any

import torch


def trained_with() -> dict[str, Any]:
    """The conditions of this process's training beyond its seed."""
    return {"threads": torch.get_num_threads(), "torch": torch.__version__}
