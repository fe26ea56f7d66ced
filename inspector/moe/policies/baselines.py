"""The baselines the papers compare against, as policies of the one runtime.

- ondemand: load each selected expert when its layer needs it, drop it after (Accelerate-style; DuoServe's ACC)
- lru:      a per-layer LRU expert cache (Mixtral-offloading style)
- fiddler:  the most popular experts (calibration) stay resident and never move; any other expert is computed
            where it lies (Fiddler): on a GPU box on the CPU from host RAM (the host tier); on a CPU-only box
            "where it lies" is the host tier when one is configured, else the disk, read for its one use.
- moesys:   every expert of the next layer read while this layer computes, used, dropped (MoESys, DuoServe's
            second baseline): no waiting on a miss, at the price of reading the whole layer.
"""
from __future__ import annotations

import torch

from ..calibration import Calibration
from ..checkpoint import ExpertKey
from .base import Guesses, MoEPolicy, PoolView, calibrated_placement


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

    def computes_on_host(self, pool: PoolView, key: ExpertKey, prefill: bool) -> bool:
        return True


class MoESys(MoEPolicy):
    def __init__(self, calibration: Calibration | None = None) -> None:
        super().__init__("moesys", "all experts of the next layer read ahead, used, dropped (MoESys)",
                         caches=False, prefetches=True)

    def staging(self, top_k: int, num_experts: int) -> int:
        return num_experts

    def lookahead(self, pool: PoolView, layer: int, hidden: torch.Tensor, prefill: bool) -> Guesses:
        nxt = pool.next_layer(layer)
        return {} if nxt is None else {nxt: [ExpertKey(nxt, e) for e in range(pool.num_experts)]}
