"""fMoE's expert-map store: one map per decode iteration, matched by prompt semantics or routing trajectory.

A map is every MoE layer's router probability vector for one iteration
(fmoe-slides: map_i = {P_1 .. P_L}), kept with its prompt's semantic embedding.
The store is bounded: when full, a new map replaces the stored one it is most
redundant with, RDY = d/L · sem-cosine + (L-d)/L · map-cosine (the slides'
de-duplication), so the store keeps the most distinct maps it has seen.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F


@dataclass(frozen=True)
class Match:
    index: int  # the stored map
    score: float  # its cosine similarity to the query


class ExpertMapStore:
    def __init__(self, layers: int, experts: int, dim: int, capacity: int, distance: int) -> None:
        if capacity < 1:
            raise ValueError(f"expert-map store capacity must be at least 1, got {capacity}")
        self.layers, self.experts, self.dim = layers, experts, dim
        self.capacity, self.distance = capacity, distance
        self.maps = torch.zeros(0, layers, experts)
        self.sems = torch.zeros(0, dim)
        self.replaced = 0  # maps dropped as redundant since the store filled

    def __len__(self) -> int:
        return int(self.maps.shape[0])

    def add(self, probs: torch.Tensor, sem: torch.Tensor) -> int:
        """Store one iteration's map [L, E] with its prompt embedding [H]; returns its index."""
        probs, sem = probs.float().reshape(1, self.layers, self.experts), sem.float().reshape(1, self.dim)
        if len(self) < self.capacity:
            self.maps = torch.cat([self.maps, probs])
            self.sems = torch.cat([self.sems, sem])
            return len(self) - 1
        w = self.distance / self.layers
        rdy = w * _cos(sem, self.sems) + (1 - w) * _cos(probs.flatten(1), self.maps.flatten(1))
        i = int(rdy.argmax())
        self.maps[i], self.sems[i] = probs[0], sem[0]
        self.replaced += 1
        return i

    def match_semantic(self, sem: torch.Tensor) -> Match | None:
        """The stored iteration whose prompt embedding is closest (for layers [1, d] before any routing)."""
        if not len(self):
            return None
        scores = _cos(sem.float().reshape(1, -1), self.sems)
        i = int(scores.argmax())
        return Match(i, float(scores[i]))

    def match_trajectory(self, prefix: torch.Tensor) -> Match | None:
        """The stored iteration whose first layers' probabilities [l, E] are closest to this step's so far."""
        if not len(self):
            return None
        n = prefix.shape[0]
        scores = _cos(prefix.float().reshape(1, -1), self.maps[:, :n].flatten(1))
        i = int(scores.argmax())
        return Match(i, float(scores[i]))


def _cos(query: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of one query row [1, D] with each row of [C, D]."""
    return F.cosine_similarity(query, rows, dim=-1, eps=1e-8)
