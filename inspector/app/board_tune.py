"""`inspector board tune`: a taught board's false calls on boards known good passed by lower thresholds, within a
recall the engineer sets, and the thresholds teaching chose served again on request.

One golden photo sets each type's threshold on held-out crops of that same photo, and another camera's good board
sits lower (results/boards.md): an AOI's program is debugged on a few good boards from the line before it goes live.
Here the good boards go through the line (`board check`); each type's parts the expert flagged are passed nearest
its threshold first, the threshold set `margin` log-odds under the part (a part passed by a hair is flagged again on
the next board), while the type's held-out recall falls by at most `most_lost`. What is left flagged says why:
the presence check called it (no threshold passes it), its type has no held-out defect or its held-out scores are of
other weights (the cost unknown: approve it or teach with the photo instead), or passing it costs more than allowed.
A tune writes the zoo's `good_margin`s only when asked, each change in the audit trail, and the boards are then
checked again on the line: what is printed after is measured, not planned.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..experts.versions import operate
from ..experts.zoo import Zoo
from ..routing.rules import RuleSet, load_rules
from .board_costs import Flag, HeldOut, flags_of, percent, read_heldout, served_thresholds, stale_types

UNMEASURED = ("no held-out defect of its type (one part, or none held out): what a lower threshold lets through was "
              "never measured; approve the part (`board approve`) or teach with this photo (`--golden`)")
STALE = ("its type's held-out scores are of weights no longer served (retrained since teaching): teach the board "
         "again to know the cost")
NO_ODDS = "its expert gives no log-odds of good (not a taught classifier): no threshold of it to move"
PRESENCE = "the presence check called it (no body against the board): a lower threshold does not pass it"
MARGIN = 0.5  # log-odds left under a passed part by default: one passed by a hair is flagged again on the next board
COSTLY = "costs more recall than allowed"  # the short word for a flag --most-lost keeps


def short(why: str) -> str:
    """A left flag's reason in a few words (a table's cell; the whole sentence beside it)."""
    return {UNMEASURED: "its cost never measured", STALE: "retrained since teaching", NO_ODDS: "no log-odds",
            PRESENCE: "the presence check's call"}.get(why, COSTLY)


@dataclass
class TypeTune:
    """One type's flagged parts on the good boards and the threshold that passes those it may."""
    type: str
    expert: str  # the zoo entry serving it (`cls-<type>`)
    flags: list[Flag]  # its expert's flags, nearest its threshold first
    before: float  # the served threshold
    after: float  # the threshold the tune serves (== before where nothing passes)
    passed: list[str] = field(default_factory=list)
    recall_before: float = float("nan")  # the type's own held-out recall (nan: none of its defects held out)
    recall_after: float = float("nan")
    why_not: str | None = None  # why its other flags stay

    @property
    def changed(self) -> bool:
        return self.after < self.before

    def to_json(self) -> dict:
        nan = lambda v: None if v != v else round(v, 4)  # noqa: E731 - JSON has no nan
        return {"type": self.type, "expert": self.expert, "flagged": [f.ref for f in self.flags],
                "passed": self.passed, "threshold_before": self.before, "threshold_after": self.after,
                "recall_before": nan(self.recall_before), "recall_after": nan(self.recall_after),
                "why_not": self.why_not}


@dataclass
class Tune:
    types: list[TypeTune]
    left: list[tuple[Flag, str]]  # every flag the tune does not pass, and why
    flags: int  # on the good boards, served
    recall_before: float  # every type's held-out recall (the presence check's calls counted)
    recall_after: float
    most_lost: float
    margin: float

    def thresholds(self) -> dict[str, float]:
        """Entry -> the good_margin to serve, for the types whose threshold moves."""
        return {t.expert: t.after for t in self.types if t.changed}

    def to_json(self) -> dict:
        return {"most_lost": self.most_lost, "margin": self.margin, "flagged": self.flags,
                "flagged_after": len(self.left), "recall_before": round(self.recall_before, 4),
                "recall_after": round(self.recall_after, 4), "types": [t.to_json() for t in self.types],
                "left": [{"board": f.board, "ref": f.ref, "type": f.type, "why": why} for f, why in self.left]}


def plan_tune(flags: Sequence[Flag], served: dict[str, float], experts: dict[str, str], held: HeldOut,
              most_lost: float, margin: float, stale: Collection[str] = ()) -> Tune:
    """Which flags lower thresholds pass: per type, its flagged parts nearest the threshold first, each one's
    threshold `margin` under it, until the next would take the type's held-out recall down by more than
    `most_lost` (a share). A type is tuned on its own: its recall is counted on its own held-out crops.
    `served`: type -> the threshold served; `experts`: type -> its zoo entry; `stale`: types whose held-out scores
    are of other weights (board_costs.stale_types)."""
    if most_lost < 0 or margin < 0:
        raise ValueError("most_lost and margin are not negative")
    left: list[tuple[Flag, str]] = []
    by_type: dict[str, list[Flag]] = {}
    for f in flags:
        if f.presence:
            left.append((f, PRESENCE))
        elif f.logodds is None or f.type not in served:
            left.append((f, NO_ODDS))
        else:
            by_type.setdefault(f.type, []).append(f)
    tuned, after = [], dict(served)
    for name, own in sorted(by_type.items()):
        own.sort(key=lambda f: f.logodds, reverse=True)
        t = TypeTune(name, experts[name], own, served[name], served[name])
        t.recall_before = t.recall_after = held.recall(served, only=name)
        if name in stale:
            t.why_not = STALE
        elif t.recall_before != t.recall_before:
            t.why_not = UNMEASURED
        for f in own:
            if t.why_not is not None:
                left.append((f, t.why_not))
                continue
            if f.logodds >= t.after:  # passed already: the margin under a part nearer the threshold
                t.passed.append(f.ref)
                continue
            cut = min(t.after, f.logodds - margin)
            recall = held.recall({**after, name: cut}, only=name)
            if t.recall_before - recall > most_lost + 1e-9:
                t.why_not = (f"passing {f.ref} would take its type's held-out recall from "
                             f"{100 * t.recall_before:.1f}% to {100 * recall:.1f}%, more than the "
                             f"{100 * most_lost:g} points allowed (--most-lost)")
                left.append((f, t.why_not))
                continue
            t.after, t.recall_after, after[name] = cut, recall, cut
            t.passed.append(f.ref)
        tuned.append(t)
    return Tune(tuned, left, len(flags), held.recall(served), held.recall(after), most_lost, margin)


def tune_served(flags: Sequence[Flag], rules: RuleSet, zoo: Zoo, held: HeldOut, most_lost: float,
                margin: float) -> Tune:
    """plan_tune on what the line serves: the zoo's thresholds, each type's entry, its stale types."""
    return plan_tune(flags, served_thresholds(rules, zoo), {c.name: c.classifier for c in rules.components}, held,
                     most_lost, margin, stale_types(held, rules, zoo))


def tune_boards(rules_path: Path, zoo_root: Path, photos: list[Path], work: Path, models: Path, most_lost: float,
                margin: float, say: Callable[[str], None] = lambda _m: None) -> tuple[list, Tune | None]:
    """The good boards of `photos` through the line (board_check.check_photos) and the tune of their flags (None
    where no board registered: the checked boards say why), what the CLI and the dashboard both show before
    anything is served. ValueError where the zoo keeps no held-out scores."""
    from .board_check import check_photos

    held = read_heldout(zoo_root)
    if held is None:
        raise ValueError(f"{zoo_root} keeps no held-out scores (not taught by `board teach`, or taught before it kept "
                         "them): what a lower threshold costs cannot be told; teach the board again")
    checked, _overlays, _s = check_photos(rules_path, zoo_root, photos, work, models, say)
    if not any(c.inspected for c in checked):
        return checked, None
    rules = load_rules(rules_path)
    return checked, tune_served(flags_of(checked, rules), rules, Zoo.load(zoo_root), held, most_lost, margin)


def changes_of(tune: Tune) -> dict[str, tuple[float, float]]:
    """Entry -> (served, to serve), for the audit trail's before and after."""
    return {t.expert: (t.before, t.after) for t in tune.types if t.changed}


def restore_plan(rules: RuleSet, zoo: Zoo, held: HeldOut) -> tuple[dict[str, tuple[float, float]], list[str]]:
    """(entry -> (served, taught) for every type served at another threshold than teaching chose, the types left
    as they are because their expert was retrained since teaching: teaching's threshold was chosen for weights no
    longer served)."""
    if not held.taught:
        raise ValueError("this zoo's held-out record keeps no taught thresholds (taught before `board tune` "
                         "existed): teach the board again to have them")
    served, stale = served_thresholds(rules, zoo), set(stale_types(held, rules, zoo))
    moved = [c for c in rules.components if c.name in served and c.name in held.taught
             and abs(served[c.name] - held.taught[c.name]) > 1e-9]
    return ({c.classifier: (served[c.name], held.taught[c.name]) for c in moved if c.name not in stale},
            sorted(c.name for c in moved if c.name in stale))


def serve(zoo_root: Path, thresholds: dict[str, float]) -> Zoo:
    """The zoo with each named classifier serving at its new threshold (its weights unchanged), as `zoo operate`
    moves a point: under the zoo's lock, the version it serves stamped with it (a rollback to it later serves it
    there)."""
    zoo = Zoo.load(zoo_root)
    for name, margin in sorted(thresholds.items()):
        operate(zoo, name, {"good_margin": margin})
    return Zoo.load(zoo_root)


def serve_audited(zoo_root: Path, changes: dict[str, tuple[float, float]], log: Any, who: Any, why: str) -> Zoo:
    """Serve each entry's new threshold (entry -> (served, new)) and record it in the audit trail as
    `expert.threshold` (`log`: app/changes.ChangeLog; `who`: the Identity serving): refused before anything when the
    trail cannot be written now, as every change of the line is."""
    from ..access.audit import Change

    log.ready()
    zoo = serve(zoo_root, {e: new for e, (_b, new) in changes.items()})
    for expert, (before, new) in sorted(changes.items()):
        log.record(who, Change("expert.threshold", expert, {"good_margin": before}, {"good_margin": new}, why))
    return zoo


def format_tune(tune: Tune) -> str:
    lines = [f"passing the good boards' flags: each type's threshold {tune.margin:g} log-odds under its part, its "
             f"held-out recall lowered by at most {100 * tune.most_lost:g} points",
             f"{'type':<34}{'flagged':>8}{'passed':>7}{'threshold':>22}{'its held-out recall':>22}"]
    for t in tune.types:
        lines.append(f"{t.type[:33]:<34}{len(t.flags):>8}{len(t.passed):>7}{t.before:>10.2f} -> {t.after:<8.2f}"
                     f"{percent(t.recall_before):>10} -> {percent(t.recall_after):<8}")
    lines.append(f"all types' held-out recall {percent(tune.recall_before)} -> {percent(tune.recall_after)}; flagged "
                 f"on the good boards {tune.flags} -> {len(tune.left)}")
    for f, why in tune.left:
        lines.append(f"  left flagged: {f.board} {f.ref} ({f.type}): {why}")
    return "\n".join(line.rstrip() for line in lines)
