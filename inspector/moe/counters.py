"""What an expert pool of the MoE runtime counts: hits, misses, prefetches and how good its guesses were
(GuessRates, which a generation's stats share).

Its own module because both the runtime (which counts) and the policies (which read the counts to decide) use it,
and the policies sit below the runtime.
"""
from __future__ import annotations

from dataclasses import dataclass


class GuessRates:
    """How good a policy's guesses of the routing were, from the counts of a pool or of one generation."""

    predicted: int
    predicted_right: int
    guessed: int

    @property
    def prediction_accuracy(self) -> float | None:
        """|S∩A| / |A| (Eliseev and Mazur; FIRM-MoE eq. 7)."""
        return self.predicted_right / self.predicted if self.predicted else None

    @property
    def utilisation(self) -> float | None:
        """|S∩A| / |S| (FIRM-MoE eq. 8): how much of what was guessed was used."""
        return self.predicted_right / self.guessed if self.guessed else None


@dataclass
class PoolCounters(GuessRates):
    hits: int = 0  # selected expert in memory (resident, or staged by a guess) when its layer ran
    misses: int = 0
    prefetches: int = 0  # reads a guess started ahead of need
    prefetch_waits: int = 0  # a layer waited for a read already under way
    prefetch_used: int = 0  # a staged (prefetched) expert was used by the layer it was read for
    prefetch_unused: int = 0  # a staged expert its layer passed without using (the read was wasted)
    pipelined: int = 0  # prefill reads started in compute order (DuoServe): counted as misses, overlapped
    swaps: int = 0  # sequence-specific allocation moves (DAOP Algorithm 1)
    predicted: int = 0  # |A|: real picks of layers a guess was made for
    predicted_right: int = 0  # |S ∩ A|
    guessed: int = 0  # |S|: experts guessed
    degraded: int = 0  # picks replaced by a resident expert (graceful degradation)
    host_computed: int = 0  # away experts computed on the CPU where they lie instead of moved (GPU boxes)
    step_experts: int = 0  # distinct experts the decode steps' layers ran (rows of a batch share some)
