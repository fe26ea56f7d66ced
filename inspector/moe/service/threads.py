"""How many torch threads the engine thread computes fastest with: tried on its first decode steps, then kept.

A decode step of a small expert model is hundreds of small products, and each
torch op fans out to an OpenMP team and joins it again. Whether a second core
pays for that join depends on the model, the box and what else runs: on this
project's 2-core box the demo model decoded about as fast with one thread as
with two for a lone sequence, two were faster for a batch of four, and when a
second thread of the process held an OpenMP team of its own, two threads fell
to 60% of one (libgomp stops spin-waiting once its teams outnumber the cores).
A large model's products favour more threads. So the engine measures, on the
thread that serves and on real steps: its first decode steps take the candidate
counts in turn, each step's time per row is recorded, and once every candidate
has its trials the one with the lowest median is kept for the rest of the
engine's life (`/health` and `inspector llm bench --concurrency` show it).

A count given by the operator (`inspector llm serve --threads N`) is used as is.
The count changes no token a request sees (tested).
"""
from __future__ import annotations

import os
import statistics
import time

import torch

TRIALS = 6  # decode steps timed per candidate before choosing (interleaved, so a noisy second falls on all)


def candidates(cores: int | None = None) -> list[int]:
    """1, 2, 4, ... up to the cores this process may run on, and that count itself."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    out, n = [], 1
    while n < cores:
        out.append(n)
        n *= 2
    return [*out, cores]


class ComputeThreads:
    """The engine thread's torch thread count: fixed, or chosen from `options` by timing decode steps."""

    def __init__(self, options: list[int], trials: int = TRIALS) -> None:
        if not options or any(n < 1 for n in options):
            raise ValueError(f"thread counts must be at least 1, got {options}")
        self.options = sorted(set(options))
        self.trials = trials
        self.samples: dict[int, list[float]] = {n: [] for n in self.options}  # seconds per row
        self.chosen: int | None = self.options[0] if len(self.options) == 1 else None
        self._turn = 0
        self._started: float | None = None
        self._current = self.chosen

    @property
    def per_row_ms(self) -> dict[int, float]:
        """Each tried count's median decode-step time per row, in ms (what the choice was made on)."""
        return {n: 1e3 * statistics.median(s) for n, s in self.samples.items() if s}

    def begin_step(self) -> None:
        """Before a decode step: set the count this step runs with (the next candidate while still trying)."""
        want = self.chosen if self.chosen is not None else self.options[self._turn % len(self.options)]
        if want != self._current or torch.get_num_threads() != want:
            torch.set_num_threads(want)
            self._current = want
        self._started = time.perf_counter()

    def end_step(self, rows: int) -> None:
        """After the step: its time per row counts for the count it ran with; the last trial makes the choice."""
        if self._started is None or self.chosen is not None:
            return
        self.samples[self._current].append((time.perf_counter() - self._started) / max(1, rows))
        self._started = None
        self._turn += 1
        if all(len(s) >= self.trials for s in self.samples.values()):
            times = self.per_row_ms
            self.chosen = min(times, key=times.__getitem__)
