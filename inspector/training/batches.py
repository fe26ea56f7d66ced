"""Training batches that batch norm can learn from.

A batch of one crop leaves batch norm one value per channel, and torch refuses to train on it. How many crops a
training set has depends on the plant's data (reviewed crops, an epoch's draw), so the remainder after the last full
batch can be one crop: that crop joins the batch before it rather than standing alone or being dropped.
"""
from __future__ import annotations


def batch_slices(n: int, size: int) -> list[slice]:
    """Slices covering range(n) in batches of `size`, none of them a single item unless n itself is 1."""
    if n <= 0:
        return []
    starts = list(range(0, n, size))
    if len(starts) > 1 and n - starts[-1] == 1:
        starts.pop()
    return [slice(s, starts[i + 1] if i + 1 < len(starts) else n) for i, s in enumerate(starts)]
