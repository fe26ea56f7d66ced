"""How many torch threads the engine thread computes fastest with: tried on its first decode steps, kept, retried.

A decode step of a small expert model is hundreds of small products, and each
torch op fans out to an OpenMP team and joins it again. Whether a second core
pays for that join depends on the model, the box and what else runs: on this
project's 2-core box the demo model decoded about as fast with one thread as
with two for a lone sequence, two were faster for a batch of four, and when a
second thread of the process held an OpenMP team of its own, two threads fell
to 60% of one (libgomp stops spin-waiting once its teams outnumber the cores).
A large model's products favour more threads. So the engine measures, on the
thread that serves and on real steps, for each batch size apart (a step of four
rows is not a step of one): the first steps of each row count take the
candidate counts in turn, a few steps each, and once every candidate has its
trials the one whose steps took least (median) is kept for that row count
(`/health` and `inspector llm bench --concurrency` show it). What else runs on
the box changes over a server's life (a line started beside it takes a core),
so a choice older than `remeasure_s` (ten minutes unless the operator says) is
tried again on that row count's next steps, the old choice shown meanwhile;
sooner when the chosen count's steps have become half as slow again as when it
was chosen (median of the last 2 x TRIALS + 1 steps against the chosen median).
A candidate runs several steps in a row and the first of them, right
after the count changed, is not timed: taken one step each in turn, every timed
step was the first after a change, unlike the steps the count then serves, and
four rows at ratio 0.25 chose two threads in 9 of 16 runs; in runs of three
after an untimed step, in 29 of 32 (two were up to 30% faster, fixed).
A step's time is its compute: the seconds it waited for expert reads are taken
out, since no thread count shortens them, and at a low cache ratio their noise
was larger than the difference between counts (four rows at ratio 0.25 chose
one thread, and ran at 49 tokens/s against 60 with two).

A count given by the operator (`inspector llm serve --threads N`) is used as is.
The count changes no token a request sees (tested).
"""
from __future__ import annotations

import os
import statistics
import time
from collections import Counter, deque
from collections.abc import Callable

import torch

TRIALS = 6  # decode steps timed per candidate and row count before choosing
REMEASURE_S = 600.0  # a row count's choice is tried again once it is this old (seconds); None or 0: never
SLOWER = 1.5  # ... or sooner, once its last 2 x TRIALS + 1 steps' median is this many times the chosen median
BLOCK = 3  # a candidate's trials come in runs of this many timed steps, after one untimed step at the new count


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
    """The engine thread's torch thread count per decode-step row count: the operator's (`given`), or chosen
    from `options` by timing that many rows' steps (one option: that one, untried)."""

    def __init__(self, options: list[int], given: int | None = None, trials: int = TRIALS,
                 remeasure_s: float | None = REMEASURE_S, clock: Callable[[], float] = time.monotonic) -> None:
        counts = list(options) if given is None else [given]
        if not counts or min(counts) < 1:
            raise ValueError(f"thread counts must be at least 1, got {counts}")
        if remeasure_s is not None and remeasure_s < 0:
            raise ValueError(f"a thread count is measured again after seconds >= 0 (0: never), got {remeasure_s}")
        self.options = sorted(set(counts))
        self.trials = trials
        self.given = given
        self.samples: dict[int, dict[int, list[float]]] = {}  # rows -> thread count -> step seconds
        self.chosen: dict[int, int] = {}  # rows -> thread count (while tried again: the previous choice)
        self.remeasure_s = remeasure_s or None
        self.remeasured = 0  # choices tried again since the engine started
        self._clock = clock
        self._chosen_at: dict[int, float] = {}  # rows -> when its choice was made (clock seconds)
        self._trying: set[int] = set()  # row counts whose choice is being tried again
        self._chosen_s: dict[int, float] = {}  # rows -> the chosen count's median step when it was chosen
        self._recent: dict[int, deque[float]] = {}  # rows -> its latest steps at the chosen count
        self.steps: Counter[int] = Counter()  # decode steps per row count
        self._current: int | None = None
        self._started: float | None = None
        self._switched = False  # the running step is the first at a new count: warm-up, not timed

    def count_for(self, rows: int) -> int | None:
        """The count kept for steps of `rows` rows; None while it is still being tried."""
        if len(self.options) == 1:
            return self.options[0]
        return None if rows in self._trying else self.chosen.get(rows)

    @property
    def trying(self) -> list[int]:
        """Row counts whose earlier choice is being measured again."""
        return sorted(self._trying)

    @property
    def usual(self) -> int | None:
        """The count kept for the row count stepped most often (what the engine mostly ran with)."""
        if len(self.options) == 1:
            return self.options[0]
        for rows, _ in self.steps.most_common():
            if rows in self.chosen:
                return self.chosen[rows]
        return None

    @property
    def step_ms(self) -> dict[int, dict[int, float]]:
        """Per row count, each tried thread count's median step compute time in ms (read waits excluded) in the
        latest trials: what the choice was made on (part of them while it is tried again)."""
        return {rows: {n: 1e3 * statistics.median(s) for n, s in by.items() if s}
                for rows, by in sorted(self.samples.items())}

    def begin_step(self, rows: int) -> None:
        """Before a decode step: set the count it runs with (while trying: the candidate in its run of steps, or
        the one tried least so far)."""
        self._maybe_remeasure(rows)
        want = self.count_for(rows)
        if want is None:
            tried = self.samples.setdefault(rows, {n: [] for n in self.options})
            # a candidate part-way through its run of timed steps goes on; otherwise the one tried least
            running = [n for n in self.options if len(tried[n]) % BLOCK and len(tried[n]) < self.trials]
            want = running[0] if running else min(self.options, key=lambda n: len(tried[n]))
        self._switched = want != self._current
        if self._switched:
            torch.set_num_threads(want)
            self._current = want
        self._started = time.perf_counter()

    def end_step(self, rows: int, waited: float = 0.0) -> None:
        """After the step: its compute time (the step's, less `waited`: seconds spent waiting for expert reads,
        which no thread count shortens and whose noise would swamp the difference) counts for the count it ran
        with, unless the step was the first at that count; a row count's last trial makes its choice."""
        self.steps[rows] += 1
        started, self._started = self._started, None
        if started is None or len(self.options) == 1:
            return
        if self._switched:  # the first step after a change is not like the steps the count would serve
            return
        took = max(0.0, time.perf_counter() - started - waited)
        if self.count_for(rows) is not None:
            self._watch(rows, took)
            return
        tried = self.samples[rows]
        tried[self._current].append(took)
        if all(len(s) >= self.trials for s in tried.values()):
            times = {n: statistics.median(s) for n, s in tried.items()}
            best = min(times, key=times.__getitem__)
            self.chosen[rows], self._chosen_s[rows], self._chosen_at[rows] = best, times[best], self._clock()
            self._trying.discard(rows)

    def _watch(self, rows: int, took: float) -> None:
        """A step at the chosen count: when its row count's recent steps have become SLOWER times as slow as when
        the count was chosen (a process beside took a core), the choice is tried again from the next step rather
        than when it is `remeasure_s` old."""
        if self.remeasure_s is None:
            return
        recent = self._recent.setdefault(rows, deque(maxlen=2 * self.trials + 1))
        recent.append(took)
        if len(recent) == recent.maxlen and statistics.median(recent) > SLOWER * max(self._chosen_s[rows], 1e-3):
            self._retry(rows)

    def _maybe_remeasure(self, rows: int) -> None:
        """A choice older than `remeasure_s`: its row count's steps take the candidates in turn again."""
        if self.remeasure_s is None or len(self.options) == 1 or rows in self._trying or rows not in self.chosen:
            return
        if self._clock() - self._chosen_at[rows] >= self.remeasure_s:
            self._retry(rows)

    def _retry(self, rows: int) -> None:
        """The row count's next steps take the candidates in turn again, on fresh samples."""
        self._trying.add(rows)
        self.samples[rows] = {n: [] for n in self.options}
        self._recent.pop(rows, None)
        self.remeasured += 1
