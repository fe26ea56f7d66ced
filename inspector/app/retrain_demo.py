"""`inspector retrain-demo`: the review-and-retrain loop, scripted end to end on the demo line.

1. **Before.** Boards of board_a under glare on one component type (ingest/glare.py: a light its expert never
   saw) run through the real line into a SQLite database; that type's false-call rate is measured against
   the renderer's truth.
2. **Review.** An operator (scripted, with the truth an operator would see on the part) reviews N of the
   type's flagged parts: a false call, or a confirmed defect with its class.
3. **Dataset and retrain.** `dataset export` of the reviewed crops; `zoo train` fine-tunes that type's
   classifier and scores old against new on held-out crops; the new weights become a version in the zoo.
4. **Live swap.** A second stream of glared boards runs; once a third of it is stored, the new version is
   swapped in at a board boundary while boards keep coming. The results are split by the weights hash each
   part records: the false-call rate before and after, every board stored once, no board inspected by two
   versions, every other expert's hash unchanged.

Everything works on a copy of the zoo in the work directory: the shipped demo zoo is never changed.
"""
from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..experts.zoo import Zoo
from ..ingest.crops import cut_board
from ..ingest.glare import Glare
from ..ingest.sources import SyntheticSource
from ..ingest.synthetic import rates_for, render_board
from ..results.dataset import export_dataset
from ..results.reviews import ReviewRequest, record_review
from ..results.store import Filters, ResultStore, sqlite_url
from ..routing.rules import CLASSIFIER_CLASSES, RuleSet, load_rules
from ..runtime.safetensors_io import parse
from ..training.retrain import Retrained, Score, format_scores, retrain_classifier, score
from ..training.samples import PartSample
from .expert_swap import swap_live
from .line import LineConfig
from .run import DEMO_RULES, RULES_DIR, demo_zoo, line_profiles
from .service import LineService, ServiceConfig

Say = Callable[[str], None]
DEFECT_RATE = 0.02  # enough defective parts of one type in a few dozen boards to see recall too
CONDITION_DEFECTS = 40  # rendered defects of the glared type the old and new versions are scored on


@dataclass(frozen=True)
class DemoLoop:
    component: str = "R0603"
    glare: float = 0.5
    boards: int = 40
    reviews: int = 50
    epochs: int = 10
    policy: str = "coserve"
    data: Path | None = None
    seed: int = 4242


@dataclass
class Phase:
    """One weights version's results for the glared type and for every other type."""

    label: str
    sha: str
    boards: int = 0
    parts: int = 0
    good: int = 0
    false_calls: int = 0
    defects: int = 0
    caught: int = 0
    others_good: int = 0
    others_false: int = 0

    @property
    def false_call_rate(self) -> float | None:
        return self.false_calls / self.good if self.good else None

    @property
    def recall(self) -> float | None:
        return self.caught / self.defects if self.defects else None


@dataclass
class LoopReport:
    loop: DemoLoop
    expert: str
    phases: list[Phase] = field(default_factory=list)
    retrained: Retrained | None = None
    reviewed: Counter = field(default_factory=Counter)
    delivered: int = 0
    stored: int = 0
    mixed_boards: int = 0
    others_changed: list[str] = field(default_factory=list)
    swap_s: float = 0.0
    swap_at_board: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    condition: tuple[Score, Score] | None = None  # old, new on rendered defects of the type under the glare

    @property
    def improvement(self) -> float | None:
        if not self.swapped or not self.phases:
            return None
        before, after = self.phases[0].false_call_rate, self.phases[-1].false_call_rate
        if before is None or after is None:
            return None
        return float("inf") if after == 0 else before / after

    @property
    def swapped(self) -> bool:
        return self.retrained is None or bool((self.retrained.gate or {}).get("passed", True))

    @property
    def ok(self) -> bool:
        return self.delivered == self.stored and not self.mixed_boards and not self.others_changed

    def verdict_line(self) -> str:
        """How much lower the glared type's false-call rate is; with none left, the least it can be."""
        c, before, after = self.loop.component, self.phases[0], self.phases[-1]
        if not self.swapped:
            return f"false-call rate of {c}: unchanged, the new version was not served"
        imp = self.improvement
        if imp is None:
            return f"false-call rate of {c}: not measured (no good parts of it in a phase)"
        if after.false_calls == 0:
            bound = (before.false_call_rate or 0.0) * after.good
            return (f"false-call rate of {c}: none left after the swap (0 of {after.good} good parts); at least "
                    f"{bound:.0f}x lower (one false call would have been {100 / after.good:.2f}%)")
        return f"false-call rate of {c}: {imp:.1f}x lower after the swap"

    def table(self) -> str:
        def pct(v: float | None) -> str:
            return "-" if v is None else f"{100 * v:.2f}%"

        c = self.loop.component
        out = [f"glare {self.loop.glare:g} on {c} (expert {self.expert}), defect rate {DEFECT_RATE:g}, "
               f"policy {self.loop.policy}", "",
               f"{'phase':34} {'weights':>12} {'boards':>6} {c + ' good':>10} {'false calls':>12} {'rate':>8} "
               f"{'defects':>8} {'recall':>8} {'other types: false calls':>26}", "-" * 132]
        for p in self.phases:
            rate = p.others_false / p.others_good if p.others_good else None
            others = f"{p.others_false}/{p.others_good} {pct(rate)}"
            out.append(f"{p.label:34} {p.sha[:12]:>12} {p.boards:>6} {p.good:>10} {p.false_calls:>12} "
                       f"{pct(p.false_call_rate):>8} {p.defects:>8} {pct(p.recall):>8} {others:>26}")
        out += ["", self.verdict_line(), "",
                f"reviews: {dict(self.reviewed)}"]
        if self.retrained is not None:
            out += ["", f"retraining {self.expert} (old against new on crops neither trained on):",
                    format_scores(self.retrained)]
        if self.condition is not None:
            o, n = self.condition
            out += ["", f"recall under glare {self.loop.glare:g} on {n.defects} rendered defects of {c} (every "
                        f"classifier class in turn; crops neither version trained on): old "
                        f"{100 * (o.recall or 0):.1f}% ({o.found}/{o.defects}), new {100 * (n.recall or 0):.1f}% "
                        f"({n.found}/{n.defects})"]
        if not self.swapped:
            out += ["", f"not swapped: the recall gate refused the new version of {self.expert}; the line kept the "
                        "old one"]
            return "\n".join(out)
        out += ["", f"swap at board {self.swap_at_board} of {self.loop.boards} while boards flowed, "
                    f"{self.swap_s * 1000:.0f} ms from asking to serving; boards delivered {self.delivered}, stored "
                    f"{self.stored}; boards inspected by two versions of {self.expert}: {self.mixed_boards}; other "
                    f"experts whose weights changed: {', '.join(self.others_changed) or 'none'}",
                "times: " + ", ".join(f"{k} {v:.0f} s" for k, v in self.seconds.items())]
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        return {"component": self.loop.component, "expert": self.expert, "glare": self.loop.glare,
                "phases": [{**p.__dict__, "false_call_rate": p.false_call_rate, "recall": p.recall}
                           for p in self.phases],
                "improvement": None if self.improvement in (None, float("inf")) else self.improvement,
                "verdict": self.verdict_line(), "reviews": dict(self.reviewed), "delivered": self.delivered,
                "stored": self.stored, "mixed_boards": self.mixed_boards, "others_changed": self.others_changed,
                "swap_s": self.swap_s, "seconds": self.seconds, "swapped": self.swapped,
                "condition": None if self.condition is None else {"old": self.condition[0].to_json(),
                                                                  "new": self.condition[1].to_json()},
                "retrain": None if self.retrained is None else self.retrained.version}


def run_loop(loop: DemoLoop, models_dir: Path, say: Say) -> LoopReport:
    """The whole loop, in loop.data when given, else in a temporary folder removed afterwards."""
    if loop.data:
        return _run_loop(loop, models_dir, Path(loop.data), say)
    with tempfile.TemporaryDirectory(prefix="retrain-demo-") as scratch:
        return _run_loop(loop, models_dir, Path(scratch), say)


def _run_loop(loop: DemoLoop, models_dir: Path, work: Path, say: Say) -> LoopReport:
    t_all = time.perf_counter()
    work.mkdir(parents=True, exist_ok=True)
    rules = load_rules(RULES_DIR / DEMO_RULES[0])
    rule_sets = [load_rules(RULES_DIR / n) for n in DEMO_RULES]
    comp = next((c for c in rules.components if c.name == loop.component), None)
    if comp is None:
        raise ValueError(f"board {rules.recipe} has no component type {loop.component}")
    shipped = demo_zoo(models_dir, say)
    zoo_dir = work / "zoo"
    if zoo_dir.exists():
        shutil.rmtree(zoo_dir)
    shutil.copytree(shipped.root, zoo_dir)  # the loop versions a copy; the shipped zoo stays as built
    zoo = Zoo.load(zoo_dir)
    profiles = line_profiles(zoo, models_dir, say)
    report = LoopReport(loop, comp.classifier)
    glare = Glare(loop.component, loop.glare)

    def source(seed: int, boards: int) -> SyntheticSource:
        return SyntheticSource(rules, boards, seed=seed, rates=rates_for(DEFECT_RATE), glare=glare)

    config = ServiceConfig(LineConfig(policy=loop.policy), keep_crops="failed", min_free_mb=64)

    # 1. before
    t0 = time.perf_counter()
    store = ResultStore(sqlite_url(work / "before.sqlite"))
    before_src = source(loop.seed, loop.boards)
    service = LineService(rules, zoo, profiles, config, store, work / "before", before_src, say=say)
    service.start()
    service.run()
    truth = {f.serial: f.truth for f in source(loop.seed, loop.boards)}  # the same boards, rendered again
    report.seconds["before"] = time.perf_counter() - t0
    say(f"before: {service.line.stats.boards} boards inspected")

    # 2. review
    t0 = time.perf_counter()
    flagged = [(insp, part) for insp in store.inspections(Filters(component=loop.component))
               for part in insp.parts if part.component_type == loop.component and part.verdict == "fail"]
    pick = np.random.default_rng(loop.seed).permutation(len(flagged))[:loop.reviews]
    for i in sorted(pick.tolist()):
        insp, part = flagged[i]
        real = truth[insp.board_serial].get(part.ref, "ok")
        call = "false_call" if real == "ok" else "confirmed"
        record_review(store, ReviewRequest(insp.uuid, part.ref, call, None if real == "ok" else real, "demo"))
        report.reviewed[call] += 1
    report.seconds["review"] = time.perf_counter() - t0

    # 3. dataset and retrain
    t0 = time.perf_counter()
    dataset = work / "dataset"
    export_dataset(store, dataset, rule_sets, filters=Filters(component=loop.component))
    t_train = time.perf_counter()
    report.retrained = retrain_classifier(Zoo.load(zoo_dir), comp.classifier, dataset, rule_sets, loop.epochs,
                                          say=say)
    report.seconds["retrain"] = time.perf_counter() - t_train
    report.seconds["export"] = t_train - t0
    say(format_scores(report.retrained))
    arch = zoo.architecture(comp.classifier)
    held = condition_defects(rules, loop.component, glare, CONDITION_DEFECTS, loop.seed + 2)
    new_state = parse((zoo_dir / report.retrained.version["file"]).read_bytes())
    report.condition = (score(arch, parse(zoo.path_of(comp.classifier).read_bytes()), held),
                        score(arch, new_state, held))
    if not report.swapped:  # the gate refused it: the line keeps the old version, nothing to swap
        before, _ = _phases_by_sha(store, truth, loop.component, comp.classifier)
        old_sha = zoo.entries[comp.classifier].weights_sha256 or ""
        if old_sha in before:
            before[old_sha].label = "before (old weights)"
            report.phases.append(before[old_sha])
        report.seconds["total"] = time.perf_counter() - t_all
        store.close()
        return report

    # 4. live swap while boards flow
    t0 = time.perf_counter()
    after_store = ResultStore(sqlite_url(work / "after.sqlite"))
    after_src = source(loop.seed + 1, loop.boards)
    live = LineService(rules, Zoo.load(zoo_dir), profiles, config, after_store, work / "after", after_src, say=say)
    others_before = {n: e.weights_sha256 for n, e in live.line.zoo.entries.items() if n != comp.classifier}
    swap_done = threading.Event()

    def swap_when_due() -> None:
        due = max(1, loop.boards // 3)
        while live.line.stats.boards < due and not live.stopped.is_set():
            time.sleep(0.02)
        t_swap = time.perf_counter()
        report.swap_at_board = live.line.stats.boards
        swap_live(live.line, comp.classifier, report.retrained.version["weights_sha256"])
        report.swap_s = time.perf_counter() - t_swap
        swap_done.set()

    swapper = threading.Thread(target=swap_when_due, name="swap", daemon=True)
    live.start()
    swapper.start()
    live.run()
    swapper.join(120)
    after_truth = {f.serial: f.truth for f in source(loop.seed + 1, loop.boards)}
    report.seconds["after"] = time.perf_counter() - t0
    if not swap_done.is_set():
        raise RuntimeError("the swap did not happen while the boards flowed")
    report.delivered = after_src.counters.frames
    report.stored = after_store.count()[0]
    others_after = {n: e.weights_sha256 for n, e in Zoo.load(zoo_dir).entries.items() if n != comp.classifier}
    report.others_changed = sorted(n for n in others_before if others_before[n] != others_after.get(n))
    old_sha = zoo.entries[comp.classifier].weights_sha256 or ""
    before, _ = _phases_by_sha(store, truth, loop.component, comp.classifier)
    after, report.mixed_boards = _phases_by_sha(after_store, after_truth, loop.component, comp.classifier)
    for phases, sha, label in ((before, old_sha, "before (old weights)"),
                               (after, old_sha, "after, boards before the swap"),
                               (after, report.retrained.version["weights_sha256"], "after, boards after the swap")):
        if sha in phases:
            phases[sha].label = label
            report.phases.append(phases[sha])
    report.seconds["total"] = time.perf_counter() - t_all
    store.close()
    after_store.close()
    return report


def _phases_by_sha(store: ResultStore, truth: dict[str, dict[str, str]], ctype: str,
                   expert: str) -> tuple[dict[str, Phase], int]:
    """Each board scored against the truth, grouped by the hash of `expert` its parts of `ctype` were given with;
    and how many boards were given with more than one hash."""
    phases: dict[str, Phase] = {}
    mixed = 0
    for insp in store.inspections():
        shas = {p.weights_sha256 for p in insp.parts if p.component_type == ctype and p.expert == expert}
        mixed += len(shas) > 1
        sha = next(iter(shas), None) or ""
        phase = phases.setdefault(sha, Phase("", sha))
        phase.boards += 1
        real = truth.get(insp.board_serial, {})
        for part in insp.parts:
            defective = real.get(part.ref, "ok") != "ok"
            flagged = part.verdict != "pass"
            if part.component_type == ctype:
                phase.parts += 1
                phase.good += not defective
                phase.false_calls += flagged and not defective
                phase.defects += defective
                phase.caught += flagged and defective
            elif not defective:
                phase.others_good += 1
                phase.others_false += flagged
    return phases, mixed


def condition_defects(rules: RuleSet, component: str, glare: Glare, count: int, seed: int) -> list[PartSample]:
    """`count` defective crops of `component` under `glare`, rendered (the classifier's classes in turn, every part
    of the type defective) and cut as the line cuts them."""
    classes = [c for c in CLASSIFIER_CLASSES if c != "ok"]
    rng = np.random.default_rng(seed)
    out: list[PartSample] = []
    turn = 0
    i = 0
    while len(out) < count:
        forced = {}
        for comp, place in rules.placements():
            if comp.name == component:
                forced[place.ref] = classes[turn % len(classes)]
                turn += 1
            else:
                forced[place.ref] = "ok"
        board = render_board(rules, f"recall-{seed}-{i}", rng, forced=forced)
        image = glare.apply(board.image, rules, rng)
        for crop in cut_board(image, rules):
            if crop.component.name == component and len(out) < count:
                out.append(PartSample(crop.image, board.truth[crop.ref], (0.0, 0.0), crop.component.size, 0))
        i += 1
    return out
