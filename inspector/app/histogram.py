"""Cumulative latency histograms of a running line, for Prometheus (the percentiles on /status are a window).

A histogram counts every board or part since the line started, so rates and quantiles over any range can
be taken by the monitoring system (histogram_quantile over rate(...)), which a window of recent values
cannot give.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

# seconds: a part's request is milliseconds on a GPU to a second queued behind expert switches on a CPU box;
# a board waits for its slowest part
PART_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BOARD_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def nearest_rank(ordered: list[float], q: float) -> float | None:
    """The q-quantile of sorted values by nearest rank (with 100 values, q=0.99 is the largest); None when empty."""
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None


@dataclass
class Histogram:
    """Counts per bucket (upper bounds, inclusive), their sum and count; the caller holds the lock."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)  # the last: above every bound (+Inf)

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, seconds)] += 1
        self.total += seconds
        self.n += 1

    def to_json(self) -> dict[str, Any]:
        """Cumulative counts per upper bound, as Prometheus wants them (+Inf is the count)."""
        running, buckets = 0, []
        for bound, count in zip(self.bounds, self.counts):
            running += count
            buckets.append([bound, running])
        return {"buckets": buckets, "count": self.n, "sum": self.total}
