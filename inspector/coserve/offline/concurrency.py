"""A device's throughput with 1..N executors computing at once, relative to one alone: how executors on one device
share its compute (what the simulator uses), the same measurement for torch and for a runtime."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

Batch = Callable[[], object]


def concurrency_curve(most: int, batch_in: Callable[[], Batch], repeats: int = 6,
                      synchronize: Callable[[], None] = lambda: None) -> list[float]:
    """`batch_in()` runs in each worker thread (its thread settings, its stream) and returns the batch it repeats."""
    rates: list[float] = []
    for k in range(1, most + 1):
        start = threading.Barrier(k + 1)
        errors: list[BaseException] = []

        def work(start: threading.Barrier = start, errors: list[BaseException] = errors) -> None:
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
        rates.append(k * repeats / (time.perf_counter() - t0))
    return [round(r / rates[0], 3) for r in rates]
