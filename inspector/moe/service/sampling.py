"""Choosing the next token: greedy (temperature 0, the exact mode) or sampled with temperature, top-k, top-p.

A sampled request draws from its own generator, seeded by the request's `seed`
when it gives one, so the same request with the same seed draws the same way
whatever else the server is doing.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


class BadSampling(ValueError):
    """A sampling parameter outside its range."""


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0  # 0: greedy
    top_p: float = 1.0
    top_k: int = 0  # 0: no top-k cut
    seed: int | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.temperature <= 2.0:
            raise BadSampling(f"temperature must be between 0 and 2, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise BadSampling(f"top_p must be above 0 and at most 1, got {self.top_p}")
        if self.top_k < 0:
            raise BadSampling(f"top_k must be 0 (off) or positive, got {self.top_k}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def generator(self) -> torch.Generator | None:
        if self.greedy:
            return None
        g = torch.Generator()
        g.manual_seed(self.seed if self.seed is not None else int(torch.randint(0, 2**62, (1,))))
        return g


def next_token(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator | None) -> int:
    """One token from one position's logits [V]."""
    if sampling.greedy:
        return int(logits.argmax())
    scores = logits.float().cpu() / sampling.temperature
    if sampling.top_k and sampling.top_k < scores.numel():
        kth = torch.topk(scores, sampling.top_k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if sampling.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs  # mass of the tokens ranked above each
        sorted_probs[before >= sampling.top_p] = 0.0  # the smallest head whose mass reaches top_p stays
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
    return int(torch.multinomial(probs, 1, generator=generator))
