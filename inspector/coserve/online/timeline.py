"""Where an executor's time goes: computing, waiting for a load, blocked with work queued, idle.

Every executor (threaded or simulated) adds its seconds here as it goes; the
benchmark divides by executors x makespan to print each policy's shares. The
scheduler's own time is measured by the scheduler (`Scheduler.overhead_s`).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, fields

KINDS = ("compute", "load", "blocked", "idle", "other")


@dataclass
class ExecutorTime:
    compute: float = 0.0  # running batches (preprocessing included)
    load: float = 0.0  # its expert on its way: a switch it started or one another executor started
    blocked: float = 0.0  # work queued, but only pinned experts stand in the way of the load
    idle: float = 0.0  # nothing queued
    other: float = 0.0  # cutting batches, handing results back
    batches: int = 0  # batches computed, and the requests in them (their mean size: how well grouping works)
    requests: int = 0
    profiled: float = 0.0  # what the profile predicts for those batches, executor sharing included: compute beyond
    # it is compute slowed by something else on the box (loads' CPU and memory traffic, other processes)

    def add(self, other: ExecutorTime) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    @property
    def total(self) -> float:
        return sum(getattr(self, k) for k in KINDS)

    def shares(self, span_s: float) -> dict[str, float]:
        """Each kind as a share of `span_s` (executors x makespan).

        Idle is the rest: the executors also idle before the first request
        and after the last result, outside the measured span.
        """
        span = max(span_s, 1e-12)
        out = {k: getattr(self, k) / span for k in KINDS if k != "idle"}
        out["idle"] = max(0.0, 1.0 - sum(out.values()))
        if self.profiled > 0:
            out["slowed"] = max(0.0, self.compute - self.profiled) / span  # part of compute, not beside it
        return out


class Concurrency:
    """What shares one device's compute right now: executors computing and, on a CPU, loads in progress."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._computing = 0
        self._loading = 0

    def enter(self) -> tuple[int, int]:
        """An executor starts computing: (executors computing, executors + loads), this one included."""
        with self._lock:
            self._computing += 1
            return self._computing, self._computing + self._loading

    def leave(self) -> tuple[int, int]:
        """It stops: the same counts just before it left."""
        with self._lock:
            out = self._computing, self._computing + self._loading
            self._computing -= 1
            return out

    def load_started(self) -> None:
        with self._lock:
            self._loading += 1

    def load_ended(self) -> None:
        with self._lock:
            self._loading -= 1
