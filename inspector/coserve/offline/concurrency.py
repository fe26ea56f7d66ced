"""A device's throughput with 1..N executors computing at once, relative to one alone: how executors on one device
share its compute (what the simulator uses), the same measurement for torch and for a runtime.

Each point lasts at least MIN_SECONDS and is the best of TRIALS runs: interference (the kernel writing back what a
zoo build just wrote, a neighbour on a virtual machine) only ever slows a run. Six batches of a few milliseconds, the
measurement until 2026-11-29, once put two executors on the 2-core box at 1.02x one (a second measurement: 1.97x);
the simulator then timed coserve 36% slow.
"""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

Batch = Callable[[], object]

MIN_SECONDS = 0.2  # one executor's run of a point at least this long
TRIALS = 3


def concurrency_curve(most: int, batch_in: Callable[[], Batch], repeats: int = 6,
                      synchronize: Callable[[], None] = lambda: None, min_seconds: float = MIN_SECONDS,
                      trials: int = TRIALS) -> list[float]:
    """`batch_in()` runs in each worker thread (its thread settings, its stream) and returns the batch it repeats;
    each worker runs `repeats` batches, more if one executor would be done sooner than `min_seconds`."""
    one = _rate(1, batch_in, repeats, synchronize)
    repeats = max(repeats, math.ceil(min_seconds * one))  # `one` batches a second: at least min_seconds
    rates = [max(_rate(k, batch_in, repeats, synchronize) for _ in range(trials)) for k in range(1, most + 1)]
    return [round(r / rates[0], 3) for r in rates]


def _rate(k: int, batch_in: Callable[[], Batch], repeats: int, synchronize: Callable[[], None]) -> float:
    """Batches a second with `k` workers each running `repeats` batches from one start."""
    start = threading.Barrier(k + 1)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            batch = batch_in()
            start.wait()
            for _ in range(repeats):
                batch()
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)
            start.abort()

    workers = [threading.Thread(target=work, name=f"concurrency-{k}-{i}") for i in range(k)]
    for w in workers:
        w.start()
    try:
        start.wait()
    except threading.BrokenBarrierError:
        pass  # a worker failed before the start: its error is raised below
    t0 = time.perf_counter()
    for w in workers:
        w.join()
    synchronize()
    if errors:
        raise errors[0]
    return k * repeats / (time.perf_counter() - t0)
