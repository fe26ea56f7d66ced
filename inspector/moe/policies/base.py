"""What every MoE policy is: the questions the runtime asks, and what a policy may see of the pool.

The mechanics (reads, staging, pipelines, pool accounting) exist once in
runtime.py; a policy only answers, so every method, baseline or ours, runs
through the same code and a benchmark compares decisions, not plumbing.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

import torch

from ..calibration import Calibration
from ..checkpoint import ExpertKey
from ..counters import PoolCounters


class PoolView(Protocol):
    slots: dict[int, int]  # layer -> resident experts the pool keeps for it
    num_experts: int
    top_k: int
    moe_layers: tuple[int, ...]
    activity: dict[int, torch.Tensor]  # tokens routed to each expert of a layer in this sequence
    trajectory: dict[int, torch.Tensor]  # this decode step: layer -> router probabilities (when wants_probs)
    path: dict[int, list[int]]  # this decode step: layer -> its picks so far
    embedding: torch.Tensor | None  # this sequence's prompt embedding
    counters: PoolCounters
    decode_rows: int  # sequences in this decode step (one token each); 1 outside a batch

    def resident_in(self, layer: int) -> list[ExpertKey]: ...  # least recently used first
    def is_resident(self, key: ExpertKey) -> bool: ...
    def next_layer(self, layer: int) -> int | None: ...
    def router_logits(self, layer: int, hidden: torch.Tensor) -> torch.Tensor: ...
    def swap(self, cold: ExpertKey, hot: ExpertKey) -> None: ...


Guesses = dict[int, list[ExpertKey]]  # target layer -> experts expected there (the guess S), most likely first


@dataclass
class MoEPolicy:
    name: str = "policy"
    summary: str = ""
    caches: bool = True  # keep an expert resident after a miss
    prefetches: bool = False  # reads ahead of need (background read threads)
    predicts: bool = False  # its reads ahead are guesses of the routing (accuracy and utilisation are reported)
    approximate: bool = False  # changes outputs; never on unless asked for
    calibrated: bool = False  # needs a calibration run (built before the policy)
    wants_probs: bool = False  # the runtime computes each decode layer's router probabilities for it
    pipelines_prefill: bool = False  # prefill reads each used expert once in compute order, next in flight
    fine_grained: bool = False  # a miss reads gate/up, then down in the background while they compute
    prefetch_parts: int = 3  # projections a guess reads ahead (FIRM's n); the rest when the expert is used
    batches: bool = True  # several sequences may share a decode step (its guesses cover every row); False where
    # the policy keeps per-sequence state (expert maps, trajectories, a predictor over one path, degradation)
    calibration: Calibration | None = field(default=None, repr=False)

    def staging(self, top_k: int, num_experts: int) -> int:
        """How many reads ahead may be held at once (each a buffer in the pool's budget)."""
        return top_k

    def read_buffers(self, top_k: int, num_experts: int) -> int:
        """Expert-sized read buffers the pool is planned with beside its resident experts: one for a miss, and
        those reads ahead land in (the staging; two for a prefill pipeline)."""
        ahead = self.staging(top_k, num_experts) if self.prefetches else 0
        return 1 + max(ahead, 2 if self.pipelines_prefill else 0)

    def expert_cache(self, top_k: int) -> int | None:
        """A bound on expert buffers in use at once, computing and read ahead together (None: no bound beyond
        the staging). A guess with no free buffer waits until a computed expert frees one."""
        return None

    def initial(self, pool: PoolView) -> list[ExpertKey]:
        """Experts to place before the first token; most wanted first."""
        return []

    def admit(self, pool: PoolView, key: ExpertKey, prefill: bool) -> bool:
        """Keep a missed expert resident after its read (else it is used once and dropped)."""
        return self.caches

    def computes_on_host(self, pool: PoolView, key: ExpertKey, prefill: bool) -> bool:
        """On a box with a GPU: compute this away expert on the CPU from host RAM instead of moving it to the
        device (Fiddler, DAOP). Never asked on a CPU-only box, where the CPU is where every expert computes."""
        return False

    def victim(self, pool: PoolView, layer: int, protect: Iterable[ExpertKey]) -> ExpertKey:
        """Which resident expert of `layer` leaves to make room; default: the least recently used."""
        keep = set(protect)
        for key in pool.resident_in(layer):
            if key not in keep:
                return key
        raise LookupError(f"every resident expert of layer {layer} is in use")

    def on_sequence(self, pool: PoolView, embedding: torch.Tensor | None) -> Guesses:
        """A sequence begins (its prompt's embedding known); guesses for layers to read before prefill."""
        return {}

    def on_route(self, pool: PoolView, layer: int, counts: torch.Tensor, prefill: bool) -> None:
        """A layer's routing is known (tokens per expert), before its experts run."""

    def on_decode(self, pool: PoolView, layer: int, hidden: torch.Tensor, picks: list[int],
                  guess: set[int] | None) -> None:
        """A decode step's layer routed: its picks, and the guess made for it (None: no guess)."""

    def on_step(self, pool: PoolView) -> None:
        """A decode step's last layer routed: pool.trajectory and pool.path hold the whole step."""

    def adjust_route(self, pool: PoolView, layer: int, hidden: torch.Tensor, top_k_index: torch.Tensor,
                     top_k_weights: torch.Tensor, guess: set[int] | None) -> None:
        """Change the routing in place (approximate policies only); decode steps only."""

    def lookahead(self, pool: PoolView, layer: int, hidden: torch.Tensor, prefill: bool) -> Guesses:
        """After `layer` routed: guesses for later layers. Default: in decode, `predict` the next layer."""
        if prefill or not self.predicts:
            return {}
        nxt = pool.next_layer(layer)
        if nxt is None:
            return {}
        guess = self.predict(pool, nxt, hidden)
        return {} if guess is None else {nxt: guess}

    def predict(self, pool: PoolView, layer: int, hidden: torch.Tensor) -> list[ExpertKey] | None:
        """The experts `layer` is expected to select for the newest token, most likely first; None: no guess."""
        return None

    def to_prefetch(self, pool: PoolView, layer: int, predicted: list[ExpertKey]) -> list[ExpertKey]:
        """Which guessed experts are worth a read ahead of need (those resident are skipped anyway)."""
        return predicted

    def prefetch_order(self, pool: PoolView, keys: list[ExpertKey]) -> list[ExpertKey]:
        """The order the reads ahead of one lookahead start in, across the layers guessed (default: as guessed);
        the staging area's bound cuts the tail."""
        return keys


def calibrated_placement(pool: PoolView, calibration: Calibration | None) -> list[ExpertKey]:
    """Each layer's most frequently activated experts (decode phase of the calibration set) first."""
    keys = []
    for layer in pool.moe_layers:
        order = calibration.ranking(layer) if calibration is not None else list(range(pool.num_experts))
        keys += [ExpertKey(layer, e) for e in order[:pool.slots[layer]]]
    return keys


def least_active(pool: PoolView, layer: int, protect: Iterable[ExpertKey]) -> ExpertKey:
    """The resident expert this sequence has used least (the least recently used among equals): DAOP's victim,
    and FIRM's cache that retains the most frequently activated experts."""
    keep = set(protect)
    candidates = [k for k in pool.resident_in(layer) if k not in keep]  # least recent first
    if not candidates:
        raise LookupError(f"every resident expert of layer {layer} is in use")
    counts = pool.activity[layer]
    return min(candidates, key=lambda k: float(counts[k.expert]))  # min is stable: ties go to the LRU one


def next_gate_topk(pool: PoolView, layer: int, hidden: torch.Tensor, k: int) -> list[ExpertKey]:
    """`layer`'s gate applied to an earlier layer's hidden state: its top k (DAOP; FIRM-MoE eq. 4-5). In a
    decode step of several sequences, every row's top k, the most probable first (a row's best probability)."""
    rows = max(1, getattr(pool, "decode_rows", 1))
    logits = pool.router_logits(layer, hidden[-rows:])
    top = torch.topk(logits, min(k, logits.shape[-1]), dim=-1)
    if rows == 1:
        return [ExpertKey(layer, int(e)) for e in top.indices[0]]
    best: dict[int, float] = {}
    probs = torch.softmax(logits.float(), dim=-1)
    for r in range(rows):
        for e in top.indices[r].tolist():
            best[e] = max(best.get(e, 0.0), float(probs[r, e]))
    return [ExpertKey(layer, e) for e in sorted(best, key=lambda e: -best[e])]
