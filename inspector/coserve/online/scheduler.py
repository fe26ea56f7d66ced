"""Dependency-aware request scheduling (paper §4.2): predict, assign, arrange.

The scheduler decides; executors run; expert managers own memory. Its own
time is measured so the benchmark can report scheduling overhead.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .policies import Policy, QueueOption

if TYPE_CHECKING:
    from .executor import Executor
    from .request import Request


class Scheduler:
    def __init__(self, executors: Sequence[Executor], policy: Policy, lock: threading.RLock) -> None:
        self.executors = list(executors)
        self.policy = policy
        self.assigner = policy.make_assigner()
        self._lock = lock
        self.overhead_s = 0.0

    def added_latency(self, executor: Executor, request: Request) -> float:
        """K*n + B plus the switch, as the paper predicts it for one more request.

        The switch is free when the expert is resident or already queued there;
        B is paid only when no group of that expert waits in the queue.
        """
        prof = executor.profile_for(request.expert)
        grouped = executor.queue.group_for(request.expert) is not None
        exec_s = prof.k_s if grouped else prof.k_s + prof.b_s
        if executor.manager.has(request.expert) or executor.queue.has_expert(request.expert):
            return exec_s
        return exec_s + prof.switch_s(executor.manager.store.tier_of(request.expert).value) + prof.cold_s

    def submit(self, request: Request) -> Executor:
        """Assign and arrange one request; the time counted is the decision's (inside the engine lock)."""
        with self._lock:
            t0 = time.perf_counter()
            estimates = self.assigner.needs_estimates
            options = [
                QueueOption(i, ex.queue.pending_s, self.added_latency(ex, request) if estimates else 0.0)
                for i, ex in enumerate(self.executors)
            ]
            chosen = self.executors[self.assigner.choose(options)]
            request.predicted_s = options[chosen.index].added_s
            chosen.queue.pending_s += request.predicted_s
            self.policy.arranger.place(chosen.queue, request, chosen.manager.has(request.expert))
            chosen.wake.notify()
            self.overhead_s += time.perf_counter() - t0
        return chosen
