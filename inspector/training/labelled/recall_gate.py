"""The gate of an expert retrained from its own data and reviews, and what a refusal rests on.

The gate refuses a version whose recall on any held-out set fell below the served weights' (at each one's operating
point). On a few dozen held-out defects a fall of two or three can be the luck of which defects the reviews' split
put there as much as a real loss (docs/pages/ml/labelled-images.md: a taught detector's retraining that flagged 21
of 22 narrow voids on fresh panels, where the served weights flagged 16, was refused for finding 23 of 27 reviewed
held-out defects against 26). So each set also records the defects the two versions disagree on, scored on the
same items: those the old weights found and the new missed, and the other way round. Were the two equally good on
defects like these, each disagreement would go either way as a coin falls; how often a loss at least as large as
the one seen would come so (an exact one-sided sign test) is said beside the refusal, so an engineer can tell a real
loss from too few defects to judge (review more parts) before serving a version with `--force`.

By default the rule does not bend: a small sample refuses as before. A plant may instead tolerate a fall of a few
points (`zoo train --tolerate PTS`, a non-inferiority margin): a fall seen on a set then passes where the most it
could be, at CONFIDENCE one-sided, is within the tolerance. The bound is Tango's score bound for the difference of
two paired proportions (Tango 1998; both versions are scored on the same defects, so the pairs that disagree carry
the difference, and the agreeing ones its precision): unlike the sign test above it also counts how many defects
were read, so a handful of defects bounds a fall loosely and refuses, and many bound it tightly.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from ..retrain import Score, pct

REAL_LOSS = 0.05  # a loss this unlikely by chance alone is called real
EVERY_SET = "recall on no held-out set below the served weights'"  # the rule, as said, where the gate reads them all
CONFIDENCE = 0.95  # one-sided, of the bound on a tolerated fall
COMMAND_LINE = "the command line"  # whose a tolerance is, where the plant's config did not set it


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


def fall_bound(lost: int, gained: int, defects: int, confidence: float = CONFIDENCE) -> float:
    """The most recall could have fallen (old less new, a share of `defects`) at one-sided `confidence`, from the
    defects the new weights lost and gained: Tango's score bound, the largest difference its score test does not
    reject (found by bisection; the test's statistic falls as the difference tried grows)."""
    if defects <= 0 or lost + gained > defects:
        raise ValueError(f"a fall's bound needs the set's defects ({defects}) to hold the {lost} lost and "
                         f"{gained} gained")
    n, b, c = defects, lost, gained
    z = NormalDist().inv_cdf(confidence)

    def statistic(d: float) -> float:
        """Tango's score statistic for a true fall of `d` (its variance from the constrained likelihood's fit)."""
        a_, b_, c_ = 2 * n, -b - c + (2 * n - b + c) * d, -c * d * (1 - d)
        gained_share = (-b_ + math.sqrt(max(0.0, b_ * b_ - 4 * a_ * c_))) / (2 * a_)
        variance = n * (2 * gained_share + d * (1 - d))
        return (b - c - n * d) / math.sqrt(variance) if variance > 0 else -math.inf

    lo, hi = (b - c) / n, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if statistic(mid) > -z else (lo, mid)
    return hi


def recall_kept(scores: dict[str, tuple[Score, Score]], unit: str,
                disagreements: dict[str, Disagreement] | None = None,
                rule: str = EVERY_SET, tolerance: float = 0.0, tolerance_from: str | None = None) -> dict[str, Any]:
    """The gate: recall (of defects found, at the served operating point) on no held-out set below the served
    weights', or with a `tolerance` (a share, 0.02 for two points) below them by no more than it at CONFIDENCE
    (fall_bound; a set with no disagreements given cannot bound its fall and refuses). It records on how many
    defects of each set a loss could show (those the served weights find: where they are few, a loss cannot show,
    retrain.gate_caution says so beside a pass) and, given each set's `disagreements`, what a refusal rests on (said
    with its reason) and every fall it tolerated; `tolerance_from` says whose rule the tolerance is ("the command
    line", or the config file and line where the plant wrote it for every retraining)."""
    if not 0.0 <= tolerance < 1.0:
        raise ValueError(f"a tolerated fall of recall is a share from 0 to 1, got {tolerance}")
    disagreements = disagreements or {}
    reasons, tolerated, bounds = [], [], {}
    for name, (o, n) in scores.items():
        if o.recall is None or n.recall is None or n.recall >= o.recall:
            continue
        evidence = disagreements.get(name)
        fell = f"recall on the {name} {unit} fell from {100 * o.recall:.1f}% to {100 * n.recall:.1f}%"
        if tolerance and evidence is not None:
            bounds[name] = bound = fall_bound(evidence.lost, evidence.gained, n.defects)
            at_most = (f"{fell}, by at most {100 * bound:.1f} points ({100 * CONFIDENCE:.0f}% one-sided bound, "
                       f"{evidence.lost} lost and {evidence.gained} gained of {n.defects} defects)")
            if bound <= tolerance:
                tolerated.append(f"{at_most}: within the {100 * tolerance:g} tolerated")
            else:
                reasons.append(f"{at_most}: over the {100 * tolerance:g} tolerated ({evidence.says()})")
        else:
            reasons.append(fell + (f" ({evidence.says()})" if evidence is not None else "")
                           + (" (no paired calls to bound the fall by)" if tolerance else ""))
    if tolerance:
        rule += (f", or below them by at most {100 * tolerance:g} points ({100 * CONFIDENCE:.0f}% one-sided bound "
                 "on the fall" + (f"; the plant's rule, {tolerance_from}" if tolerance_from not in (None, COMMAND_LINE)
                                  else "") + ")")
    gate: dict[str, Any] = {"passed": not reasons, "reasons": reasons, "rule": rule,
                            "losses_seen_on": {name: o.found for name, (o, _n) in scores.items() if o.found},
                            "disagreements": {name: d.to_json() for name, d in disagreements.items()}}
    if tolerance:
        gate.update(tolerance=tolerance, confidence=CONFIDENCE, tolerated=tolerated,
                    fall_bounds={name: round(b, 4) for name, b in bounds.items()},
                    tolerance_from=tolerance_from or COMMAND_LINE)
    return gate


def at_served_says(point: str, scores: dict[str, Score], unit: str, moved: bool = False) -> str:
    """The served weights' figures at the point they are served at (`point`, said as "margin -7.844"), beside a
    table that scores them by the rule that scores the new: what the line does with them now, though in-sample
    where teaching chose that point on these very items (`moved`: the plant moved it off teaching's since)."""
    sets = "; ".join(f"{name} {s.found}/{s.defects} defects found ({pct(s.recall)}), {s.false_calls}/{s.good} false "
                     f"calls" for name, s in scores.items() if s.crops)
    chosen = (f"teaching chose its point on held-out {unit} among these and the plant moved it since" if moved else
              f"chosen on held-out {unit} among these, so in-sample there")
    return f"the served weights at their served {point} (what the line does with them now; {chosen}): {sets}"


def lines_said(scores: dict[str, tuple[Score, Score]]) -> str:
    """Each held-out set's recall and false calls, old -> new, in a line (the other way's figures, point_move.py)."""
    return "; ".join(f"{name}: recall {pct(o.recall)} -> {pct(n.recall)}, false calls {pct(o.false_call_rate)} -> "
                     f"{pct(n.false_call_rate)}" for name, (o, n) in scores.items() if o.crops)
