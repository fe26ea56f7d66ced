"""What passing a known-good board's flagged parts would cost in recall, before anyone lowers a threshold.

One golden photo's threshold is set on held-out crops of that same photo, and another camera's good board sits
lower: on SnapperGPS 5-10 of its 60 good parts fell under it (results/boards.md). An engineer shown those flags by
`board check --good` must choose, part by part: approve another make (`board approve`), teach it as good, or
accept a lower threshold for its type. This says what the last choice costs: teaching keeps each held-out crop's
log-odds of good beside the zoo (`heldout-scores.json`), and for the flagged parts, nearest to passing first, each
type's threshold is lowered just under its part and the held-out recall recounted (the presence check's calls
still count: a lower threshold does not pass a part the presence check called, and such a part is listed apart).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..experts.zoo import Zoo
from ..routing.rules import RuleSet

HELDOUT = "heldout-scores.json"  # beside the zoo's manifest


@dataclass
class HeldOut:
    """Every held-out crop teaching validated on: its type, class (good or a defect's kind), log-odds of good under
    the taught expert, and whether the presence check called it."""
    types: np.ndarray
    kinds: np.ndarray
    logodds: np.ndarray
    called: np.ndarray
    weights: dict[str, str | None]  # type -> the sha256 of the weights that scored its crops
    taught: dict[str, float] = field(default_factory=dict)  # type -> the threshold teaching chose (tune --restore)

    def hits(self, thresholds: dict[str, float]) -> np.ndarray:
        """Each crop called at its type's threshold, or by the presence check."""
        at = np.array([thresholds.get(t, -np.inf) for t in self.types], np.float64)
        return (self.logodds < at) | self.called

    def recall(self, thresholds: dict[str, float], only: str | None = None) -> float:
        """Share of held-out defects (of one type, or all) called at each type's threshold, the presence's too."""
        bad = self.kinds != "good"
        if only is not None:
            bad &= self.types == only
        return float(self.hits(thresholds)[bad].mean()) if bad.any() else float("nan")

    def by_kind(self, thresholds: dict[str, float]) -> list[tuple[str, int, int]]:
        """(kind, held-out defects, called) for every defect kind held out: the recall split by what was wrong."""
        hit = self.hits(thresholds)
        return [(str(k), int((self.kinds == k).sum()), int(hit[self.kinds == k].sum()))
                for k in sorted(set(self.kinds[self.kinds != "good"]))]


def percent(v: float) -> str:
    """A share as the validation tables print it ("-" where there was nothing to count)."""
    return "-" if v != v else f"{100 * v:.1f}%"


def write_heldout(zoo_root: Path, held: HeldOut) -> None:
    rows = [[str(t), str(k), round(float(s), 4), bool(c)]
            for t, k, s, c in zip(held.types, held.kinds, held.logodds, held.called)]
    (zoo_root / HELDOUT).write_text(json.dumps({"columns": ["type", "class", "logodds", "presence_called"],
                                                "crops": rows, "weights": held.weights,
                                                "thresholds": held.taught}), encoding="utf-8")


def read_heldout(zoo_root: Path) -> HeldOut | None:
    """None for a zoo not taught by `board teach` (or taught before it kept its held-out scores)."""
    path = zoo_root / HELDOUT
    if not path.is_file():
        return None
    doc = json.loads(path.read_text(encoding="utf-8"))
    if not doc["crops"]:
        return None
    types, kinds, logodds, called = zip(*doc["crops"])
    return HeldOut(np.array(types), np.array(kinds), np.array(logodds, np.float64), np.array(called, bool),
                   doc.get("weights", {}), {str(t): float(v) for t, v in doc.get("thresholds", {}).items()})


def stale_types(held: HeldOut, rules: RuleSet, zoo: Zoo) -> list[str]:
    """The types whose served weights are not those that scored their held-out crops (retrained and swapped in
    since teaching): their scores say nothing of what the line now calls."""
    out = []
    for comp in rules.components:
        entry = zoo.entries.get(comp.classifier)
        if comp.name in held.weights and (entry is None or entry.weights_sha256 != held.weights[comp.name]):
            out.append(comp.name)
    return out


@dataclass
class Flag:
    """A flagged part of a board known good: where it sits against its type's threshold, or the presence check's."""
    board: str
    ref: str
    type: str
    logodds: float | None
    presence: bool  # the presence check called it: no threshold of the expert passes it


@dataclass
class PassStep:
    flag: Flag
    before: float  # the type's threshold before this step
    after: float
    flagged: int  # flags left on the good boards after this step
    recall: float  # every type's held-out recall after it
    type_before: float  # the type's own held-out recall before and after (nan: no held-out defects of its own)
    type_after: float


def served_thresholds(rules: RuleSet, zoo: Zoo) -> dict[str, float]:
    """Each type's threshold as the line serves it: its classifier's good_margin."""
    out = {}
    for comp in rules.components:
        entry = zoo.entries.get(comp.classifier)
        if entry is not None and entry.spec.get("good_margin") is not None:
            out[comp.name] = float(entry.spec["good_margin"])
    return out


def passing_costs(flags: list[Flag], thresholds: dict[str, float], held: HeldOut) -> list[PassStep]:
    """Pass the expert's flags one at a time, the part nearest its threshold first: each step lowers its type's
    threshold just under it (if not already) and recounts the flags left and the held-out recall."""
    current = dict(thresholds)
    expert_flags = sorted((f for f in flags if not f.presence and f.logodds is not None),
                          key=lambda f: f.logodds - current.get(f.type, 0.0), reverse=True)
    steps = []
    for f in expert_flags:
        before = current.get(f.type, 0.0)
        if f.logodds >= before:
            continue  # passed already by a step for another part of its type
        type_before = held.recall(current, only=f.type)
        current[f.type] = min(before, f.logodds - 1e-3)
        left = sum(1 for g in flags if g.presence or g.logodds is None or g.logodds < current.get(g.type, 0.0))
        steps.append(PassStep(f, before, current[f.type], left, held.recall(current), type_before,
                              held.recall(current, only=f.type)))
    return steps


def flags_of(checked: list, rules: RuleSet) -> list[Flag]:
    """The flagged parts of checked boards (`board_check.BoardChecked`), each with its type and log-odds."""
    type_of = {p.ref: c.name for c, p in rules.placements()}
    return [Flag(c.board.name, ref, type_of.get(ref, "?"), c.logodds.get(ref), ref in c.by_presence)
            for c in checked for ref, _kind in c.flagged]


def format_costs(flags: list[Flag], thresholds: dict[str, float], held: HeldOut | None,
                 stale: Sequence[str] = ()) -> str:
    if not flags:
        return "the good boards have no flagged part: nothing to pass"
    if held is None:
        return ("this zoo keeps no held-out scores (taught before `board teach` kept them, or not by it): what "
                "passing a flagged part costs cannot be told; teach the board again to have it")
    if stale:
        return (f"the held-out scores are of weights no longer served for {', '.join(stale)} (retrained since "
                "teaching): what passing a flagged part costs cannot be told from them; teach the board again")
    steps = passing_costs(flags, thresholds, held)
    lines = ["passing the good boards' flagged parts, nearest its threshold first (each type's threshold lowered just "
             "under its part; recall: the held-out made defects still called, the presence check's calls counted):",
             f"{'step':<5}{'part':<16}{'type':<30}{'log-odds':>9}{'threshold':>19}{'flagged':>8}{'recall':>8}"
             f"{'its type':>18}",
             f"{'0':<5}{'(served)':<16}{'':<30}{'':>9}{'':>19}{len(flags):>8}{percent(held.recall(thresholds)):>8}"]
    for k, s in enumerate(steps, 1):
        f = s.flag
        lines.append(f"{k:<5}{f.ref:<16}{f.type[:29]:<30}{f.logodds:>9.2f}{s.before:>9.2f} -> {s.after:<6.2f}"
                     f"{s.flagged:>8}{percent(s.recall):>8}{percent(s.type_before):>8} -> {percent(s.type_after):<6}")
    presence = [f for f in flags if f.presence]
    if presence:
        lines.append("called by the presence check (a lower threshold does not pass them; its least share is the "
                     "rule set's body_contrast): " + ", ".join(f"{f.ref} ({f.type})" for f in presence))
    if any(s.type_before != s.type_before for s in steps):
        lines.append("its type '-': no held-out part of that type, so what its threshold lets through was never "
                     "measured; approve the part (`board approve`) rather than lower it blind")
    return "\n".join(line.rstrip() for line in lines)
