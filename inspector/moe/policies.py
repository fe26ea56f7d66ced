"""MoE expert policies: small objects the engine asks what to keep, where to compute, what to fetch next.

The mechanics (reading, pool accounting, the forward pass) exist once in the
engine; a policy only answers questions, so every method, baseline or ours,
runs through the same code and a benchmark compares decisions, not plumbing.

- ondemand: load each selected expert when its layer needs it, drop it after (Accelerate-style offload)
- lru:      a per-layer LRU cache of `slots` experts (Mixtral-offloading style)
The predictor-based methods (DAOP, fMoE, FIRM-MoE, DuoServe-MoE) add `initial`, `on_route` and
`after_layer` decisions on the same interface.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import torch

from .checkpoint import ExpertKey


class PoolView(Protocol):
    """What a policy may read of the engine's state."""

    slots_per_layer: int
    num_experts: int
    moe_layers: tuple[int, ...]

    def resident_in(self, layer: int) -> list[ExpertKey]: ...  # least recently used first
    def is_resident(self, key: ExpertKey) -> bool: ...


@dataclass
class MoEPolicy:
    name: str = "policy"
    summary: str = ""
    caches: bool = True  # keep an expert resident after its layer used it

    def initial(self, pool: PoolView) -> list[ExpertKey]:
        """Experts to place before the first token (calibrated placement); most wanted first."""
        return []

    def victim(self, pool: PoolView, layer: int, protect: Iterable[ExpertKey]) -> ExpertKey:
        """Which resident expert of `layer` to evict to make room; default: the least recently used."""
        keep = set(protect)
        for key in pool.resident_in(layer):
            if key not in keep:
                return key
        raise LookupError(f"every resident expert of layer {layer} is in use")

    def on_route(self, pool: PoolView, layer: int, top_k_index: torch.Tensor, prefill: bool) -> None:
        """A layer's routing is known, before its experts run (DAOP: sequence-specific allocation in prefill)."""

    def after_layer(self, pool: PoolView, layer: int, hidden: torch.Tensor, prefill: bool) -> list[ExpertKey]:
        """Experts to prefetch for the layers ahead, most wanted first (DAOP: the next layer's gate)."""
        return []


class OnDemand(MoEPolicy):
    def __init__(self) -> None:
        super().__init__("ondemand", "load each selected expert when needed, no cache (Accelerate-style)", False)


class LRU(MoEPolicy):
    def __init__(self) -> None:
        super().__init__("lru", "per-layer LRU expert cache (Mixtral-offloading style)")


POLICIES = {"ondemand": OnDemand, "lru": LRU}


def get_policy(name: str) -> MoEPolicy:
    try:
        return POLICIES[name]()
    except KeyError:
        raise ValueError(f"unknown MoE policy {name!r}: use one of {', '.join(POLICIES)}") from None
