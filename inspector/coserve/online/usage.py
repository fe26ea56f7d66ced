"""Expert usage probabilities and dependencies from routes and component counts (paper §4.5).

With predefined routing rules the probabilities need no sampling: a
component type appearing n times per board uses its classifier n times, and
its detector n * pass_rate times.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from .request import Route


@dataclass(frozen=True)
class RouteUse:
    """How often a route is taken per board, and how often each step passes the part."""

    route: Route
    count: float
    pass_rate: float = 1.0


@dataclass
class ExpertUsage:
    """Usage probability of each expert and, for subsequent experts, their preliminaries."""

    probability: dict[str, float]
    preliminaries: dict[str, frozenset[str]] = field(default_factory=dict)

    def p(self, expert: str) -> float:
        return self.probability.get(expert, 0.0)

    def ranked(self, experts: Iterable[str]) -> list[str]:
        """Most used first (ties by name): the order of placement (§4.1) and of the usage CDF (§4.4)."""
        return sorted(experts, key=lambda e: (-self.p(e), e))

    def is_subsequent(self, expert: str) -> bool:
        return bool(self.preliminaries.get(expert))

    @classmethod
    def from_routes(cls, uses: Iterable[RouteUse]) -> ExpertUsage:
        weight: dict[str, float] = defaultdict(float)
        prelim: dict[str, set[str]] = defaultdict(set)
        for use in uses:
            reach = use.count
            for step, expert in enumerate(use.route.experts):
                weight[expert] += reach
                if step > 0:
                    prelim[expert].add(use.route.experts[step - 1])
                reach *= use.pass_rate
        total = sum(weight.values()) or 1.0
        return cls(
            probability={e: w / total for e, w in weight.items()},
            preliminaries={e: frozenset(p) for e, p in prelim.items()},
        )
