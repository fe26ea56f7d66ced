"""How a classifier's calls score against labels, the way an inspection engineer reads them.

Label 0 is the good class. A **defect recall** counts a defect called anything but good (a short called a spur is
still stopped); the **false-call rate** is the share of good parts called a defect. Per class: precision, recall
and F1 of the exact class; macro F1 is their mean over the classes present. The **operating threshold** is the
log-odds of good a part needs to pass (experts/resnet.py good_margin). It is chosen on held-out crops: the highest
recall whose false calls stay within a budget, and of the thresholds that give it, the one midway between the
defect it must still stop and the good part it must still pass, so neither side sits on the edge. A threshold
scored on the crops it was chosen on flatters itself; `halves` shares held-out items out in two for cross-fitting
(each chosen on one half, scored on the other).
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ...experts.resnet import good_logodds


def logodds(logits: np.ndarray) -> np.ndarray:
    """log(P(good) / P(any defect)) per crop, from N x classes logits: the line's own arithmetic
    (experts/resnet.py good_logodds), so an evaluation calls each crop as the line does."""
    return good_logodds(torch.from_numpy(np.ascontiguousarray(logits))).numpy()


def calls(logits: np.ndarray, threshold: float | None) -> np.ndarray:
    """Class per crop: good when its log-odds of good reach the threshold (None: when good is the top class), else
    the likeliest defect class. The same rule as ResNetClassifier.decode."""
    if threshold is None:
        return logits.argmax(axis=1)
    return np.where(logodds(logits) >= threshold, 0, logits[:, 1:].argmax(axis=1) + 1)


def halves(kinds: Sequence[int], keys: Sequence[str]) -> list[int]:
    """Each item's half (0 or 1) for cross-fitting: every kind shared out evenly, in the order of a hash of each
    item's key, so the same items always fall the same way whatever order they come in."""
    out = [0] * len(kinds)
    for kind in sorted(set(kinds)):
        ranked = sorted((i for i, k in enumerate(kinds) if k == kind),
                        key=lambda i: hashlib.sha256(keys[i].encode()).hexdigest())
        for n, i in enumerate(ranked):
            out[i] = n % 2
    return out


def identity_halves(identities: Sequence[str], defective: Sequence[bool]) -> list[int]:
    """Each item's half (0 or 1) for cross-fitting by identity: the identities shared out in two, those holding a
    defect and those not each evenly (`halves`), an identity's items together. A part's crops or a board's images
    are near-copies of each other: one on each side would let a half's threshold see the other half's."""
    bad: dict[str, bool] = {}
    for name, d in zip(identities, defective):
        bad[name] = bad.get(name, False) or bool(d)
    names = sorted(bad)
    half_of = dict(zip(names, halves([int(bad[n]) for n in names], names)))
    return [half_of[n] for n in identities]


def choose_threshold(good: np.ndarray, defects: np.ndarray, false_call_budget: float) -> float:
    """A log-odds threshold flagging at most `false_call_budget` of the good crops (log-odds below it are flagged)
    and stopping as many defects as that allows, midway in the gap it falls in."""
    if len(good) == 0:
        return 0.0
    g = np.sort(good.astype(np.float64))
    allowed = int(np.floor(false_call_budget * len(g)))  # good crops that may fall below
    upper = float(g[allowed]) if allowed < len(g) else float(g[-1]) + 1.0
    below = defects[defects < upper]
    lower = float(below.max()) if len(below) else (float(g[allowed - 1]) if allowed > 0 else upper - 1.0)
    return (lower + upper) / 2 if lower < upper else upper



def guarded_threshold(good: np.ndarray, identities: list[str], false_call_budget: float, confidence: float = 0.95,
                      resamples: int = 400, seed: int = 0) -> float:
    """A log-odds threshold under which the good crops' false-call rate stays within the budget for `confidence` of
    the resamples of their identities (a cluster bootstrap: a part's crops, a board's windows, go together).

    The held-out crops of one identity are alike, so they are fewer independent samples than they look: a
    threshold at exactly the budget on them let 1.4% of new DeepPCB boards' good windows through at a 1% budget.
    Resampling whole identities shows how far the rate moves from one set of boards to another, and the threshold
    is taken where the budget holds for all but 1 - `confidence` of them (never above the plain budget threshold)."""
    g = np.asarray(good, dtype=np.float64)
    if len(g) == 0:
        return 0.0
    if len(identities) != len(g):
        raise ValueError(f"{len(identities)} identities for {len(g)} good crops")
    names, index = np.unique(np.asarray(identities), return_inverse=True)
    members = [np.flatnonzero(index == i) for i in range(len(names))]
    rng = np.random.default_rng(seed)
    cuts = []
    for _ in range(resamples):
        drawn = np.concatenate([members[i] for i in rng.integers(0, len(names), len(names))])
        v = np.sort(g[drawn])
        allowed = int(np.floor(false_call_budget * len(v)))
        cuts.append(v[allowed] if allowed < len(v) else v[-1] + 1.0)  # flagged: below it
    plain = np.sort(g)
    allowed = int(np.floor(false_call_budget * len(plain)))
    upper = float(plain[allowed]) if allowed < len(plain) else float(plain[-1]) + 1.0
    return min(upper, float(np.quantile(np.asarray(cuts), 1.0 - confidence)))


def separating_threshold(good: np.ndarray, defects: np.ndarray) -> float | None:
    """The log-odds threshold that miscalls the fewest held-out crops (good ones below it, defects at or above it),
    midway in the widest gap among those that tie: where good parts and defects do not overlap, the middle of the gap
    between them. None without both kinds of crop (nothing to separate)."""
    if len(good) == 0 or len(defects) == 0:
        return None
    values = np.unique(np.concatenate([good, defects]).astype(np.float64))
    cuts = np.concatenate([[values[0] - 1.0], (values[:-1] + values[1:]) / 2, [values[-1] + 1.0]])
    g, d = np.sort(good.astype(np.float64)), np.sort(defects.astype(np.float64))
    errors = np.searchsorted(g, cuts, side="left") + (len(d) - np.searchsorted(d, cuts, side="left"))
    best = np.flatnonzero(errors == errors.min())
    lows = np.concatenate([[values[0] - 2.0], values])[best]  # each cut lies between lows and highs
    highs = np.concatenate([values, [values[-1] + 2.0]])[best]
    inner = (best > 0) & (best < len(values))  # a cut past every crop has no gap to be the middle of
    pick = best[inner][np.argmax((highs - lows)[inner])] if inner.any() else best[0]
    return float(cuts[pick])

@dataclass
class ClassScore:
    name: str
    support: int
    precision: float | None
    recall: float | None
    f1: float | None


@dataclass
class Evaluation:
    classes: tuple[str, ...]
    threshold: float | None
    confusion: np.ndarray  # true x called
    per_class: list[ClassScore]

    @property
    def defects(self) -> int:
        return int(self.confusion[1:].sum())

    @property
    def good(self) -> int:
        return int(self.confusion[0].sum())

    @property
    def defect_recall(self) -> float | None:
        return None if not self.defects else float(self.confusion[1:, 1:].sum() / self.defects)

    @property
    def false_call_rate(self) -> float | None:
        return None if not self.good else float(self.confusion[0, 1:].sum() / self.good)

    @property
    def macro_f1(self) -> float | None:
        f = [c.f1 for c in self.per_class if c.support and c.f1 is not None]
        return float(np.mean(f)) if f else None

    @property
    def accuracy(self) -> float:
        return float(np.trace(self.confusion) / max(1, self.confusion.sum()))

    def to_json(self) -> dict[str, Any]:
        return {"classes": list(self.classes), "threshold": self.threshold, "crops": int(self.confusion.sum()),
                "good": self.good, "defects": self.defects, "defect_recall": self.defect_recall,
                "false_call_rate": self.false_call_rate, "macro_f1": self.macro_f1, "accuracy": self.accuracy,
                "per_class": {c.name: {"support": c.support, "precision": c.precision, "recall": c.recall,
                                       "f1": c.f1} for c in self.per_class},
                "confusion": self.confusion.tolist()}


def evaluate(classes: tuple[str, ...], truth: np.ndarray, logits: np.ndarray, threshold: float | None) -> Evaluation:
    called = calls(logits, threshold)
    n = len(classes)
    confusion = np.zeros((n, n), dtype=np.int64)
    np.add.at(confusion, (truth, called), 1)
    per_class = []
    for k, name in enumerate(classes):
        tp, support, said = int(confusion[k, k]), int(confusion[k].sum()), int(confusion[:, k].sum())
        precision = tp / said if said else None
        recall = tp / support if support else None
        f1 = (2 * precision * recall / (precision + recall) if precision and recall else
              (0.0 if precision is not None and recall is not None else None))
        per_class.append(ClassScore(name, support, precision, recall, f1))
    return Evaluation(tuple(classes), threshold, confusion, per_class)


def recall_at_false_calls(truth: np.ndarray, logits: np.ndarray, budgets: tuple[float, ...]) -> dict[float, float]:
    """Defect recall each false-call budget allows on these crops (the budget's threshold chosen on them)."""
    lo = logodds(logits)
    goods, defects = lo[truth == 0], lo[truth != 0]
    out = {}
    for b in budgets:
        t = choose_threshold(goods, defects, b)
        out[b] = float(np.mean(defects < t)) if len(defects) else float("nan")
    return out


def table(ev: Evaluation) -> str:
    """The per-class table, the confusion matrix and the line's two figures, as `zoo evaluate` prints them."""
    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.1f}%"

    width = max(12, *(len(c) for c in ev.classes))
    rows = [f"{'class':{width}} {'crops':>6} {'precision':>10} {'recall':>8} {'F1':>7}", "-" * (width + 35)]
    for c in ev.per_class:
        rows.append(f"{c.name:{width}} {c.support:>6} {pct(c.precision):>10} {pct(c.recall):>8} {pct(c.f1):>7}")
    rows += ["", "confusion (rows: true class, columns: called)",
             " " * width + "".join(f" {name[:8]:>8}" for name in ev.classes)]
    for name, row in zip(ev.classes, ev.confusion):
        rows.append(f"{name:{width}}" + "".join(f" {v:>8}" for v in row))
    t = "top class" if ev.threshold is None else f"log-odds of good >= {ev.threshold:.3f}"
    rows += ["", f"operating threshold: {t}",
             f"defect recall {pct(ev.defect_recall)} ({ev.confusion[1:, 1:].sum()} of {ev.defects} defects stopped), "
             f"false calls {pct(ev.false_call_rate)} ({ev.confusion[0, 1:].sum()} of {ev.good} good parts), "
             f"macro F1 {pct(ev.macro_f1)}"]
    return "\n".join(rows)
