"""Live chart series from successive snapshots: rates from counter differences, over a rolling window.

The kiosk and the line report totals (boards, parts, switches); an operator
wants rates now. Each snapshot is one sample; a rate is the difference over
the last few seconds (parts/s) or the last minute (switches/min), so one
slow board does not make the chart jump. No Qt here.
"""
from __future__ import annotations

import time
from collections import deque
from typing import Any

HISTORY_S = 300.0  # what the charts show
RATE_S = 3.0  # parts/s over this window
SWITCH_WINDOW_S = 60.0  # switches per minute over this window


class LiveSeries:
    def __init__(self, history_s: float = HISTORY_S) -> None:
        self.history_s = history_s
        self.t0 = time.monotonic()
        self.t: deque[float] = deque()
        self.parts: deque[int] = deque()
        self.switches: deque[int] = deque()
        self.parts_per_s: deque[float] = deque()
        self.switches_per_min: deque[float] = deque()
        self.latency_p50: deque[float] = deque()
        self.latency_p95: deque[float] = deque()
        self.queues: dict[str, deque[float]] = {}

    def add(self, snap: dict[str, Any], now: float | None = None) -> None:
        """One sample; snapshots without a line (idle, unreachable) are skipped."""
        if "engine" not in snap:
            return
        now = time.monotonic() - self.t0 if now is None else now
        parts, switches = int(snap["parts"]), int(snap["engine"]["switches"])
        if self.parts and parts < self.parts[-1]:  # a new line (restart): its counters start again
            self.__init__(self.history_s)
            now = 0.0
        self.t.append(now)
        self.parts.append(parts)
        self.switches.append(switches)
        self.parts_per_s.append(self._rate(self.parts, now, RATE_S))
        self.switches_per_min.append(60.0 * self._rate(self.switches, now, SWITCH_WINDOW_S))
        lat = snap.get("latency_ms") or {}
        self.latency_p50.append(_nan(lat.get("part_p50")))
        self.latency_p95.append(_nan(lat.get("part_p95")))
        names = [ex["name"] for ex in snap["engine"]["executors"]]
        for ex in snap["engine"]["executors"]:
            q = self.queues.setdefault(ex["name"], deque([float("nan")] * (len(self.t) - 1)))
            q.append(float(ex["queue_depth"]))
        for name in list(self.queues):
            if name not in names:
                self.queues[name].append(float("nan"))
        while self.t and now - self.t[0] > self.history_s:
            for d in (self.t, self.parts, self.switches, self.parts_per_s, self.switches_per_min,
                      self.latency_p50, self.latency_p95, *self.queues.values()):
                d.popleft()

    def _rate(self, counts: deque[int], now: float, window: float) -> float:
        """Per second over the last `window` seconds (or since the first sample, when younger)."""
        i = len(self.t) - 1
        while i > 0 and now - self.t[i - 1] <= window:
            i -= 1
        dt = now - self.t[i]
        return (counts[-1] - counts[i]) / dt if dt > 0 else 0.0


def _nan(v: float | None) -> float:
    return float("nan") if v is None else float(v)
