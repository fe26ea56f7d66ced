"""Which way round a batched decode step multiplies an expert's few rows by its weights: measured, per box.

In a decode step of several sequences each expert gets one to a few rows.
`F.linear(x, W)` hands such a skinny product to the BLAS as a GEMM, which on
some CPUs is several times slower than the same product written the other way
round, `(W @ x.T).T` (this project's box: 4x at four rows); on others it is not.
An expert only one row of the batch picked is a matrix-vector product, which
on this box's BLAS reads a wide weight at half the speed the two-row form does;
so for one row the other candidate is that row paired with itself, flipped,
half the answer kept. The serving engine times each candidate against
`F.linear` on the model's own resident expert weights before it serves, for
each row count up to its batch, and keeps the faster.

Only a step that batches several sequences uses the choice. A prefill or a
single sequence's step always runs `F.linear`, transformers' own arithmetic,
so exact mode stays exact; a batched step is already not bit-equal to each
sequence alone (the tokens are the same: tested), and no form changes that.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence

import torch
from torch.nn import functional as F

from .quant.weights import QPair, QWeight

MARGIN = 0.9  # the flipped form must take under 90% of F.linear's time to be chosen: no flapping on noise
SAMPLES = 24  # distinct weight tensors timed per shape (more than a cache holds, as serving sees them)


class RowKernels:
    def __init__(self) -> None:
        self.flip: dict[tuple[int, int, int], bool] = {}  # (rows, out features, in features) -> use W @ x.T

    def linear(self, x: torch.Tensor, w: torch.Tensor | QWeight | QPair) -> torch.Tensor:
        """x [r, in] times w [out, in]^T, the way measured faster for r rows (F.linear unless told otherwise); a
        quantized weight always through its own kernel."""
        if not isinstance(w, torch.Tensor):
            return w.linear(x)
        if self.flip.get((x.shape[0], w.shape[0], w.shape[1])):
            return _flipped(x, w)
        return F.linear(x, w)

    def tune(self, weights: Iterable[torch.Tensor], rows: Sequence[int]) -> dict[tuple[int, int, int], float]:
        """Time both forms for each weight shape and row count (one row: paired with itself); the flipped
        form's time over F.linear's."""
        by_shape: dict[tuple[int, int], list[torch.Tensor]] = {}
        for w in weights:
            group = by_shape.setdefault((w.shape[0], w.shape[1]), [])
            if len(group) < SAMPLES:
                group.append(w)
        ratios: dict[tuple[int, int, int], float] = {}
        for (out, inner), group in by_shape.items():
            for r in rows:
                x = torch.randn(r, inner, dtype=group[0].dtype, device=group[0].device)
                plain = _best(lambda x=x, g=group: [F.linear(x, w) for w in g], group[0])
                flipped = _best(lambda x=x, g=group: [_flipped(x, w) for w in g], group[0])
                ratios[(r, out, inner)] = flipped / plain
                self.flip[(r, out, inner)] = flipped < MARGIN * plain
        return ratios


def _flipped(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """(W @ x.T).T; one row goes in paired with itself (a matrix-vector product is the slow case)."""
    if x.shape[0] == 1:
        return (w @ torch.cat([x, x]).T)[:, :1].T
    return (w @ x.T).T


def _best(run: Callable[[], object], like: torch.Tensor, repeats: int = 3) -> float:
    """The fastest of a few passes (the first also warms the kernels up)."""
    best = float("inf")
    for _ in range(repeats):
        if like.is_cuda:
            torch.cuda.synchronize(like.device)
        t0 = time.perf_counter()
        run()
        if like.is_cuda:
            torch.cuda.synchronize(like.device)
        best = min(best, time.perf_counter() - t0)
    return best
