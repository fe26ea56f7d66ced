"""DAOP (DATE'25, shared/papers/daop-date25.txt) on this runtime.

- calibrated initial placement: each layer's most frequently activated experts (§III-A);
- sequence-specific allocation in prefill (Algorithm 1): the sequence's hottest away experts swap with its
  coldest resident ones when 1.05x hotter;
- next-layer prediction with the next layer's gate on this layer's hidden state, from block
  `predict_from` on (the paper: block 4 of Mixtral's 32; ours scales that to the model's depth, L/8);
- graceful degradation (optional, approximate): when two or more of a layer's picks are away, a
  mispredicted away pick (one the guess did not foresee, so nothing was pre-calculated for it) is replaced by
  the best-scoring resident expert not already picked (§III-C b).

Tiers: on a GPU box a decode step's away expert (one no guess staged) is computed on the CPU from host RAM
where it lies, as the paper's, and nothing moves; in prefill Algorithm 1 moves experts. On a CPU-only box the
CPU is where every expert computes and an away expert lies on disk (or in the host tier when one is
configured): the read cannot be avoided, so having paid for it the expert is kept in place of the sequence's
least active one (a documented deviation: it turns DAOP's CPU execution into a cache admission).
"""
from __future__ import annotations

from collections.abc import Iterable

import torch

from ..calibration import Calibration
from ..checkpoint import ExpertKey
from .base import MoEPolicy, PoolView, calibrated_placement, least_active, next_gate_topk


class DAOP(MoEPolicy):
    SWAP_IN_OUT = 1.05  # Algorithm 1's comparison threshold
    PAPER_PREDICT_FROM = 4 / 32  # the paper's first predicting block over Mixtral's depth

    def __init__(self, calibration: Calibration | None = None, degrade: bool = False,
                 predict_from: int | None = None) -> None:
        name = "daop+degrade" if degrade else "daop"
        super().__init__(name, "calibrated placement, prefill allocation, next-layer prediction (DAOP)",
                         prefetches=True, predicts=True, approximate=degrade, calibrated=True,
                         calibration=calibration, batches=not degrade)
        self.degrade = degrade
        self.predict_from = predict_from  # None: the paper's block 4 of 32, scaled to the model's depth

    def first_predicted(self, layers: int) -> int:
        """Index of the first MoE block whose hidden state makes a guess (for the block after it)."""
        if self.predict_from is not None:
            return self.predict_from
        return int(layers * self.PAPER_PREDICT_FROM)

    def initial(self, pool: PoolView) -> list[ExpertKey]:
        return calibrated_placement(pool, self.calibration)

    def admit(self, pool: PoolView, key: ExpertKey, prefill: bool) -> bool:
        return not prefill  # in prefill Algorithm 1 has placed what the sequence needs most

    def computes_on_host(self, pool: PoolView, key: ExpertKey, prefill: bool) -> bool:
        return not prefill

    def victim(self, pool: PoolView, layer: int, protect: Iterable[ExpertKey]) -> ExpertKey:
        return least_active(pool, layer, protect)

    def on_route(self, pool: PoolView, layer: int, counts: torch.Tensor, prefill: bool) -> None:
        """Algorithm 1: swap the sequence's hottest non-resident experts with its coldest resident ones."""
        if not prefill:
            return
        resident = {k.expert for k in pool.resident_in(layer)}
        away = [e for e in range(pool.num_experts) if e not in resident]
        swap_num = pool.num_experts // 2
        hot = sorted(away, key=lambda e: -float(counts[e]))[:swap_num]
        cold = sorted(resident, key=lambda e: float(counts[e]))[:swap_num]
        for h, c in zip(hot, cold):
            if float(counts[h]) > 0 and float(counts[h]) >= self.SWAP_IN_OUT * float(counts[c]):
                pool.swap(ExpertKey(layer, c), ExpertKey(layer, h))

    def predict(self, pool: PoolView, layer: int, hidden: torch.Tensor) -> list[ExpertKey] | None:
        if pool.moe_layers.index(layer) - 1 < self.first_predicted(len(pool.moe_layers)):
            return None  # no guess: not counted as a wrong one
        return next_gate_topk(pool, layer, hidden, pool.top_k)

    def adjust_route(self, pool: PoolView, layer: int, hidden: torch.Tensor, top_k_index: torch.Tensor,
                     top_k_weights: torch.Tensor, guess: set[int] | None) -> None:
        """Graceful degradation, only where the guess missed: of the away picks the guess did not foresee, the
        weakest is replaced by the best-scoring resident expert not already picked, keeping its weight."""
        if not self.degrade or guess is None:
            return
        picks = top_k_index[-1]
        away = [i for i in range(picks.numel()) if not pool.is_resident(ExpertKey(layer, int(picks[i])))]
        missed = [i for i in away if int(picks[i]) not in guess]
        if len(away) < 2 or not missed:
            return
        logits = pool.router_logits(layer, hidden[-1:])[0]
        chosen = set(picks.tolist())
        resident = [k.expert for k in pool.resident_in(layer) if k.expert not in chosen]
        if not resident:
            return
        weakest = min(missed, key=lambda i: float(logits[picks[i]]))
        best = max(resident, key=lambda e: float(logits[e]))
        top_k_index[-1, weakest] = best
        pool.counters.degraded += 1
