"""fMoE (shared/papers/fmoe-slides.txt): fine-grained expert offloading guided by per-iteration expert maps.

- the expert-map store (expert_maps.py) is built from the calibration trace (every decode iteration's router
  probabilities, with its prompt's embedding) and updated online after every decode step, bounded, de-duplicated;
- semantic matching: when a sequence begins, the map whose prompt embedding is closest guides layers [1, d]
  (read before prefill, and each decode step's first d layers);
- trajectory matching: after layer l routes, the map whose layers [1, l] are closest (cosine over the router
  probabilities so far) guides the prefetch of layers l + 1 .. l + d (a nearer layer guessed again with the
  longer trajectory);
- how many to prefetch adapts to the match: top-k when the similarity is at least `similar`, otherwise the
  map's most probable experts until they hold `mass` of its probability (never fewer than top-k);
- prefetch order across those layers by p / (l - l_now): a likely expert of a far layer may go before an
  unlikely one of the next layer, and the staging area's bound cuts the least urgent;
- eviction of the lowest p x freq (p: the guiding map's probability, freq: the expert's selections in this
  sequence, plus one so an unused expert still ranks by p).
Defaults, measured on the demo model (CPU, ratio 0.25, one run each): d = 1 (16.9 tokens/s; d = 2: 13.5 when it
guessed only layer l + 2, its guesses further ahead being right less often; not measured again since it guesses
every layer up to l + d); similar 0.9 (0.8 and 0, i.e. always top-k: within noise, fewer
unused reads); mass 0.9 and capacity 1024 (half the default calibration's 2048 maps) were not swept.
"""
from __future__ import annotations

from collections.abc import Iterable

import torch

from ..calibration import Calibration
from ..checkpoint import ExpertKey
from ..expert_maps import ExpertMapStore, Match
from .base import Guesses, MoEPolicy, PoolView, calibrated_placement


class FMoE(MoEPolicy):
    def __init__(self, calibration: Calibration | None = None, distance: int = 1, capacity: int = 1024,
                 similar: float = 0.9, mass: float = 0.9) -> None:
        super().__init__("fmoe", "expert maps matched by prompt and trajectory guide prefetch and eviction (fMoE)",
                         prefetches=True, predicts=True, calibrated=True, wants_probs=True, calibration=calibration,
                         batches=False)
        if distance < 1:
            raise ValueError(f"fmoe prefetch distance must be at least 1 layer, got {distance}")
        self.distance, self.capacity, self.similar, self.mass = distance, capacity, similar, mass
        self.store: ExpertMapStore | None = None
        self.sem_map: torch.Tensor | None = None  # [L, E]: the semantically matched map of this sequence
        self.sem_score = 0.0
        self.guide: dict[int, torch.Tensor] = {}  # layer -> the probabilities that last guided it (for eviction)
        self.ahead: dict[int, int] = {}  # layer -> how many layers ahead of the running one it was last guessed

    def staging(self, top_k: int, num_experts: int) -> int:
        return min(num_experts, 2 * top_k)  # a weak match reads more than top-k

    def initial(self, pool: PoolView) -> list[ExpertKey]:
        return calibrated_placement(pool, self.calibration)

    def _store(self, pool: PoolView, dim: int) -> ExpertMapStore:
        if self.store is None:
            self.store = ExpertMapStore(len(pool.moe_layers), pool.num_experts, dim, self.capacity, self.distance)
            trace = self.calibration.trace if self.calibration is not None else None
            if trace is not None and trace.steps and trace.embeddings.shape[1] == dim:
                for n in range(trace.steps):
                    self.store.add(trace.probs[n], trace.embeddings[trace.step_seq[n]])
        return self.store

    def on_sequence(self, pool: PoolView, embedding: torch.Tensor | None) -> Guesses:
        self.guide.clear()
        self.sem_map, self.sem_score = None, 0.0
        if embedding is None:
            return {}
        store = self._store(pool, int(embedding.numel()))
        match = store.match_semantic(embedding)
        if match is None:
            return {}
        self.sem_map, self.sem_score = store.maps[match.index].clone(), match.score
        layers = pool.moe_layers
        return {layers[i]: self._choose(pool, layers[i], self.sem_map[i], match.score)
                for i in range(min(self.distance, len(layers)))}

    def on_step(self, pool: PoolView) -> None:
        """Online update: this iteration's map joins the store (replacing its most redundant one when full)."""
        if pool.embedding is None or len(pool.trajectory) != len(pool.moe_layers):
            return
        store = self._store(pool, int(pool.embedding.numel()))
        store.add(torch.stack([pool.trajectory[layer] for layer in pool.moe_layers]), pool.embedding)

    def lookahead(self, pool: PoolView, layer: int, hidden: torch.Tensor, prefill: bool) -> Guesses:
        if prefill or self.store is None:
            return {}
        layers = pool.moe_layers
        i = layers.index(layer)
        prefix = torch.stack([pool.trajectory[x] for x in layers[:i + 1]])
        match: Match | None = self.store.match_trajectory(prefix)
        out = {}
        for t in range(i + 1, i + min(self.distance, len(layers)) + 1):
            if t < len(layers):
                if match is None:
                    continue
                probs, score = self.store.maps[match.index, t], match.score
            else:  # the next step's first layers: no trajectory yet, the prompt's map guides them
                if self.sem_map is None:
                    continue
                probs, score = self.sem_map[t - len(layers)], self.sem_score
            target = layers[t % len(layers)]
            self.ahead[target] = t - i
            out[target] = self._choose(pool, target, probs, score)
        return out

    def prefetch_order(self, pool: PoolView, keys: list[ExpertKey]) -> list[ExpertKey]:
        """fMoE's priority p / (l - l_now) across the layers guessed, the most urgent first (stable for ties)."""
        def urgency(key: ExpertKey) -> float:
            return float(self.guide[key.layer][key.expert]) / self.ahead.get(key.layer, 1)

        return sorted(keys, key=urgency, reverse=True)

    def _choose(self, pool: PoolView, layer: int, probs: torch.Tensor, score: float) -> list[ExpertKey]:
        """Top-k when the match is close; else the most probable experts until `mass`, at least top-k."""
        self.guide[layer] = probs
        order = torch.argsort(probs, descending=True, stable=True).tolist()
        n = pool.top_k
        if score < self.similar:
            covered = torch.cumsum(probs[order], 0)
            n = max(n, int((covered < self.mass).sum()) + 1)
        n = min(n, self.staging(pool.top_k, pool.num_experts))
        return [ExpertKey(layer, e) for e in order[:n]]

    def victim(self, pool: PoolView, layer: int, protect: Iterable[ExpertKey]) -> ExpertKey:
        keep = set(protect)
        candidates = [k for k in pool.resident_in(layer) if k not in keep]  # least recent first
        if not candidates:
            raise LookupError(f"every resident expert of layer {layer} is in use")
        probs = self.guide.get(layer)
        freq = pool.activity[layer]

        def priority(key: ExpertKey) -> float:  # eviction priority 1 / (p · freq): evict the smallest p · freq
            p = float(probs[key.expert]) if probs is not None else 1.0
            return p * (float(freq[key.expert]) + 1.0)

        return min(candidates, key=priority)
