"""The gate of an expert retrained from its own data and reviews, and what a refusal rests on.

The gate refuses a version whose recall on any held-out set fell below the served weights' (at each one's operating
point). On a few dozen held-out defects a fall of two or three can be the luck of which defects the reviews' split
put there as much as a real loss (docs/pages/ml/labelled-images.md: a taught detector's retraining that flagged 21
of 22 narrow voids on fresh panels, where the served weights flagged 16, was refused for finding 23 of 27 reviewed
held-out defects against 26). So each set also records the defects the two versions disagree on, scored on the
same items: those the old weights found and the new missed, and the other way round. Were the two equally good on
defects like these, each disagreement would go either way as a coin falls; how often a loss at least as large as
the one seen would come so (an exact one-sided sign test) is said beside the refusal, so an engineer can tell a real
loss from too few defects to judge (review more parts) before serving a version with `--force`. The rule itself
does not bend: a small sample refuses as before.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..retrain import Score, pct

REAL_LOSS = 0.05  # a loss this unlikely by chance alone is called real
EVERY_SET = "recall on no held-out set below the served weights'"  # the rule, as said, where the gate reads them all


@dataclass(frozen=True)
class Disagreement:
    """The held-out defects two versions call differently, on the same items."""
    lost: int  # found by the served weights, missed by the new
    gained: int  # missed by the served weights, found by the new

    @classmethod
    def of(cls, old: Sequence[bool], new: Sequence[bool], defective: Sequence[bool]) -> Disagreement:
        """From each item's calls by the old and the new weights (flagged or not) and what it is."""
        rows = [(bool(o), bool(n)) for o, n, d in zip(old, new, defective) if d]
        return cls(sum(o and not n for o, n in rows), sum(n and not o for o, n in rows))

    @property
    def chance(self) -> float:
        """How often, were the two equally good, the new would lose at least this many more than it gains."""
        n = self.lost + self.gained
        return sum(math.comb(n, k) for k in range(self.lost, n + 1)) / 2 ** n if n else 1.0

    def says(self) -> str:
        """The refusal's evidence, as said beside it."""
        verdict = ("a real loss" if self.chance < REAL_LOSS else
                   "too few to tell a real loss from the luck of the split: review more parts before deciding")
        return (f"the new weights miss {self.lost} the served ones find and find {self.gained} they miss; were the "
                f"two as good, a loss this large would come by chance {100 * self.chance:.0f}% of the time: "
                f"{verdict}")

    def to_json(self) -> dict[str, Any]:
        return {"lost": self.lost, "gained": self.gained, "chance": round(self.chance, 4)}


def recall_kept(scores: dict[str, tuple[Score, Score]], unit: str,
                disagreements: dict[str, Disagreement] | None = None,
                rule: str = EVERY_SET) -> dict[str, Any]:
    """The gate: recall (of defects found, at the served operating point) on no held-out set below the served
    weights'. It records on how many defects of each set a loss could show (those the served weights find: where
    they are few, a loss cannot show, retrain.gate_caution says so beside a pass) and, given each set's
    `disagreements`, what a refusal rests on (said with its reason)."""
    disagreements = disagreements or {}
    reasons = []
    for name, (o, n) in scores.items():
        if o.recall is None or n.recall is None or n.recall >= o.recall:
            continue
        evidence = disagreements.get(name)
        reasons.append(f"recall on the {name} {unit} fell from {100 * o.recall:.1f}% to {100 * n.recall:.1f}%"
                       + (f" ({evidence.says()})" if evidence is not None else ""))
    return {"passed": not reasons, "reasons": reasons,
            "rule": rule,
            "losses_seen_on": {name: o.found for name, (o, _n) in scores.items() if o.found},
            "disagreements": {name: d.to_json() for name, d in disagreements.items()}}


def at_served_says(point: str, scores: dict[str, Score], unit: str) -> str:
    """The served weights' figures at the point they are served at (`point`, said as "margin -7.844"), beside a
    table that scores them by the rule that scores the new: what the line does with them now, though in-sample
    where that point was chosen on these very items."""
    sets = "; ".join(f"{name} {s.found}/{s.defects} defects found ({pct(s.recall)}), {s.false_calls}/{s.good} false "
                     f"calls" for name, s in scores.items() if s.crops)
    return (f"the served weights at their served {point} (what the line does with them now; chosen on held-out "
            f"{unit} among these, so in-sample there): {sets}")
