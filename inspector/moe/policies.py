"""MoE expert policies: small objects the runtime asks what to keep, what to fetch, what to evict.

The mechanics (reads, prefetch thread, pool accounting, the forward pass) exist
once in runtime.py; a policy only answers questions, so every method, baseline
or ours, runs through the same code and a benchmark compares decisions, not
plumbing.

- ondemand: load each selected expert when its layer needs it, drop it after (Accelerate-style offload)
- lru:      a per-layer LRU cache (Mixtral-offloading style)
- fiddler:  the most popular experts (calibration) stay resident and never move; any other expert is
            computed where it lies (Fiddler). On a CPU-only box "where it lies" is the disk, so the
            expert is read for its one use and dropped.
- daop:     DAOP (DATE'25): calibrated initial placement, sequence-specific allocation in prefill
            (Algorithm 1, swap threshold 1.05), next-layer prediction with the next layer's gate on
            the current hidden states, which drives background prefetch; optional graceful degradation.

What a policy may read and ask of the runtime is `PoolView`. fMoE, FIRM-MoE and DuoServe-MoE
plug in through the same hooks: `predict` (their predictors), `victim` (their eviction scores),
`on_route` (their per-iteration maps) and `admit`.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import torch

from .calibration import Calibration
from .checkpoint import ExpertKey

if TYPE_CHECKING:
    from .runtime import PoolCounters


class PoolView(Protocol):
    slots_per_layer: int
    num_experts: int
    top_k: int
    moe_layers: tuple[int, ...]
    activity: dict[int, torch.Tensor]  # tokens routed to each expert of a layer in this sequence
    counters: PoolCounters

    def resident_in(self, layer: int) -> list[ExpertKey]: ...  # least recently used first
    def is_resident(self, key: ExpertKey) -> bool: ...
    def router_logits(self, layer: int, hidden: torch.Tensor) -> torch.Tensor: ...
    def swap(self, cold: ExpertKey, hot: ExpertKey) -> None: ...


@dataclass
class MoEPolicy:
    name: str = "policy"
    summary: str = ""
    caches: bool = True  # keep an expert resident after a miss
    prefetches: bool = False  # wants the background read thread
    predicts: bool = False  # predicts the next layer's experts (accuracy is reported)
    approximate: bool = False  # changes outputs; never on unless asked for
    calibrated: bool = False  # places experts by a calibration run (build it before the policy)
    calibration: Calibration | None = field(default=None, repr=False)

    def initial(self, pool: PoolView) -> list[ExpertKey]:
        """Experts to place before the first token; most wanted first."""
        return []

    def admit(self, pool: PoolView, key: ExpertKey, prefill: bool) -> bool:
        """Keep a missed expert resident after its read (else it is used once and dropped)."""
        return self.caches

    def victim(self, pool: PoolView, layer: int, protect: Iterable[ExpertKey]) -> ExpertKey:
        """Which resident expert of `layer` leaves to make room; default: the least recently used."""
        keep = set(protect)
        for key in pool.resident_in(layer):
            if key not in keep:
                return key
        raise LookupError(f"every resident expert of layer {layer} is in use")

    def on_route(self, pool: PoolView, layer: int, counts: torch.Tensor, prefill: bool) -> None:
        """A layer's routing is known (tokens per expert), before its experts run."""

    def adjust_route(self, pool: PoolView, layer: int, hidden: torch.Tensor, top_k_index: torch.Tensor,
                     top_k_weights: torch.Tensor) -> None:
        """Change the routing in place (approximate policies only); decode steps only."""

    def predict(self, pool: PoolView, layer: int, hidden: torch.Tensor) -> list[ExpertKey]:
        """The experts `layer` is expected to select for the newest token, most likely first."""
        return []

    def to_prefetch(self, pool: PoolView, layer: int, hidden: torch.Tensor,
                    predicted: list[ExpertKey]) -> list[ExpertKey]:
        """Which predicted experts are worth a read ahead of need (those resident are skipped anyway)."""
        return predicted


def calibrated_placement(pool: PoolView, calibration: Calibration | None) -> list[ExpertKey]:
    """Each layer's most frequently activated experts (decode phase of the calibration set) first."""
    keys = []
    for layer in pool.moe_layers:
        order = calibration.ranking(layer) if calibration is not None else list(range(pool.num_experts))
        keys += [ExpertKey(layer, e) for e in order[:pool.slots_per_layer]]
    return keys


class OnDemand(MoEPolicy):
    def __init__(self, calibration: Calibration | None = None) -> None:
        super().__init__("ondemand", "load each selected expert when needed, no cache (Accelerate-style)",
                         caches=False)


class LRU(MoEPolicy):
    def __init__(self, calibration: Calibration | None = None) -> None:
        super().__init__("lru", "per-layer LRU expert cache (Mixtral-offloading style)")


class Fiddler(MoEPolicy):
    def __init__(self, calibration: Calibration | None = None) -> None:
        super().__init__("fiddler", "popular experts stay; others computed where they lie (Fiddler)",
                         caches=False, calibrated=True, calibration=calibration)

    def initial(self, pool: PoolView) -> list[ExpertKey]:
        return calibrated_placement(pool, self.calibration)


class DAOP(MoEPolicy):
    """DAOP on this runtime. On a CPU-only box a non-resident expert must be read from disk to be
    computed at all, so the read that DAOP's CPU execution avoids cannot be avoided; having paid
    for it, the expert is kept (in place of the sequence's least active one) instead of dropped."""

    SWAP_IN_OUT = 1.05  # Algorithm 1's comparison threshold

    def __init__(self, calibration: Calibration | None = None, degrade: bool = False,
                 predict_from: int = 0, prefetch_min_prob: float = 0.0) -> None:
        name = "daop+degrade" if degrade else "daop"
        super().__init__(name, "calibrated placement, prefill allocation, next-layer prediction (DAOP)",
                         prefetches=True, predicts=True, approximate=degrade, calibrated=True,
                         calibration=calibration)
        self.degrade = degrade
        self.predict_from = predict_from  # DAOP predicts from block 4 of Mixtral's 32; ours from this block
        # a read ahead of need costs a disk read when the prediction is wrong; below this gate probability
        # (the most likely pick excepted) it is not worth it. 0: read every predicted pick, as the paper.
        self.prefetch_min_prob = prefetch_min_prob

    def initial(self, pool: PoolView) -> list[ExpertKey]:
        return calibrated_placement(pool, self.calibration)

    def admit(self, pool: PoolView, key: ExpertKey, prefill: bool) -> bool:
        return not prefill  # in prefill Algorithm 1 has placed what the sequence needs most

    def victim(self, pool: PoolView, layer: int, protect: Iterable[ExpertKey]) -> ExpertKey:
        keep = set(protect)
        candidates = [k for k in pool.resident_in(layer) if k not in keep]  # least recent first
        if not candidates:
            raise LookupError(f"every resident expert of layer {layer} is in use")
        counts = pool.activity[layer]
        return min(candidates, key=lambda k: float(counts[k.expert]))  # min is stable: ties go to the LRU one

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

    def predict(self, pool: PoolView, layer: int, hidden: torch.Tensor) -> list[ExpertKey]:
        if pool.moe_layers.index(layer) - 1 < self.predict_from:
            return []
        logits = pool.router_logits(layer, hidden[-1:])[0]
        return [ExpertKey(layer, int(e)) for e in torch.topk(logits, pool.top_k).indices]

    def to_prefetch(self, pool: PoolView, layer: int, hidden: torch.Tensor,
                    predicted: list[ExpertKey]) -> list[ExpertKey]:
        if not predicted or self.prefetch_min_prob <= 0:
            return predicted
        probs = torch.softmax(pool.router_logits(layer, hidden[-1:])[0].float(), dim=-1)
        return predicted[:1] + [k for k in predicted[1:] if float(probs[k.expert]) >= self.prefetch_min_prob]

    def adjust_route(self, pool: PoolView, layer: int, hidden: torch.Tensor, top_k_index: torch.Tensor,
                     top_k_weights: torch.Tensor) -> None:
        """Graceful degradation: when two or more picks are not resident, the weakest of them is replaced by
        the best-scoring resident expert not already picked, which keeps the replaced pick's weight."""
        if not self.degrade:
            return
        picks = top_k_index[-1]
        away = [i for i in range(picks.numel()) if not pool.is_resident(ExpertKey(layer, int(picks[i])))]
        if len(away) < 2:
            return
        logits = pool.router_logits(layer, hidden[-1:])[0]
        chosen = set(picks.tolist())
        resident = [k.expert for k in pool.resident_in(layer) if k.expert not in chosen]
        if not resident:
            return
        weakest = min(away, key=lambda i: float(logits[picks[i]]))
        best = max(resident, key=lambda e: float(logits[e]))
        top_k_index[-1, weakest] = best
        pool.counters.degraded += 1


POLICIES = {"ondemand": OnDemand, "lru": LRU, "fiddler": Fiddler, "daop": DAOP}


def get_policy(name: str, calibration: Calibration | None = None) -> MoEPolicy:
    """A policy by name; `daop+degrade` is DAOP with graceful degradation (approximate)."""
    if name == "daop+degrade":
        return DAOP(calibration, degrade=True)
    try:
        return POLICIES[name](calibration)
    except KeyError:
        raise ValueError(f"unknown MoE policy {name!r}: use one of {', '.join([*POLICIES, 'daop+degrade'])}") \
            from None
