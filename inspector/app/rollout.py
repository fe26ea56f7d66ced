"""Rolling one expert's released version out to the plant's lines, one line at a time, watched, rolled back.

For each line in turn: the line's rates over its last boards before the switch are taken from the results
database; its kiosk installs the release (checking its hash) and swaps it in at a board boundary; then the
line's next `boards` boards are watched. The line keeps the version when none of its rates is significantly
worse than before (a one-sided two-proportion test at `alpha`) and its kiosk stayed healthy; otherwise that
line is rolled back and the rollout stops, the lines after it untouched. Every step is recorded in the database
(results/rollouts.py).

The rates are over the component types whose route passes through the expert: the flag rate (parts called
defective: what a false-call regression shows first, before anyone reviews), and, where operators reviewed,
the false-call and escape rates. A version meant to flag more (better recall) is judged worse by the flag rate
alone; roll it out with a larger `alpha` or after reviews.
"""
from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import func, select

from ..endpoint import EndpointError
from ..results.reviews import review_rates
from ..results.rollouts import Step, now, record
from ..results.schema import ComponentResult, Inspection
from ..results.scope import Scope
from ..results.store import ResultStore
from ..routing.rules import parse_rules
from .kiosk_client import KioskClient

UNHEALTHY = ("critical", "stalled")
UNHEALTHY_POLLS = 3  # consecutive polls a kiosk may be unhealthy or silent before its line is rolled back


@dataclass(frozen=True)
class Target:
    line: str
    station: str
    kiosk: str

    @property
    def scope(self) -> Scope:
        return Scope(self.line, self.station)


@dataclass(frozen=True)
class RolloutConfig:
    expert: str
    sha: str  # the release's full weights hash
    boards: int = 200  # boards watched on each line after its switch, compared with as many before it
    timeout_s: float = 3600.0  # a line that stores fewer boards than that in this time is rolled back
    alpha: float = 0.01  # how unlikely a rise must be by chance to count as worse
    poll_s: float = 2.0
    by: str = ""


@dataclass(frozen=True)
class Judged:
    """The expert's component types on one line over some boards."""

    boards: int
    parts: int
    flagged: int
    false_calls: int
    escapes: int


@dataclass
class LineResult:
    target: Target
    outcome: str  # kept, rolled_back, failed, not_reached
    from_sha: str | None = None
    before: Judged | None = None
    after: Judged | None = None
    reason: str = ""


def targets_of(kiosks: list[str], lines: list[str] | None) -> list[Target]:
    """Which line and station each named kiosk serves (its /status), in the order of `lines` (every station of a
    line, in the order of `kiosks`; default: every kiosk, in the order given)."""
    if not kiosks:
        raise ValueError("name the plant's kiosks: --kiosks http://line1-box:9108,http://line2-box:9108")
    found: dict[tuple[str, str], Target] = {}
    for url in kiosks:
        try:
            line = KioskClient(url).status().get("line") or {}
        except EndpointError as exc:
            raise ValueError(f"kiosk {url} does not answer ({exc.message}); start it, or leave it out of --kiosks") \
                from None
        target = Target(str(line.get("line")), str(line.get("station")), url.rstrip("/"))
        key = (target.line, target.station)
        if key in found:
            raise ValueError(f"kiosks {found[key].kiosk} and {url} both say they are line {target.line}, station "
                             f"{target.station}; give each box its own --line and --station")
        found[key] = target
    if lines is None:
        return list(found.values())
    missing = [name for name in lines if not any(t.line == name for t in found.values())]
    if missing:
        raise ValueError(f"no kiosk of --kiosks is line {', '.join(missing)}; the kiosks are lines "
                         f"{', '.join(sorted({t.line for t in found.values()}))}")
    return [t for name in lines for t in found.values() if t.line == name]


def one_sided_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """How likely a second proportion k2/n2 this much above k1/n1 is by chance (pooled two-proportion z-test)."""
    if n1 == 0 or n2 == 0:
        return 1.0
    pooled = (k1 + k2) / (n1 + n2)
    if pooled in (0.0, 1.0):
        return 1.0
    z = (k2 / n2 - k1 / n1) / math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    return 0.5 * math.erfc(z / math.sqrt(2))


def worse(before: Judged, after: Judged, alpha: float) -> str | None:
    """Why `after` is worse than `before`, or None."""
    for name, k1, k2 in (("flag rate", before.flagged, after.flagged),
                         ("false-call rate", before.false_calls, after.false_calls),
                         ("escape rate", before.escapes, after.escapes)):
        p = one_sided_p(k1, before.parts, k2, after.parts)
        if p < alpha:
            return (f"{name} rose from {k1 / max(before.parts, 1):.2%} ({k1}/{before.parts}) to "
                    f"{k2 / max(after.parts, 1):.2%} ({k2}/{after.parts}); p = {p:.2g} < {alpha:g}")
    return None


def types_of(rules_text: str | None, expert: str) -> set[str]:
    """The component types whose route passes through `expert`, from the line's running rule set."""
    if not rules_text:
        return set()
    rules = parse_rules(rules_text, "the kiosk's rule set")
    return {comp.name for comp in rules.components if expert in comp.route.experts}


class Rollout:
    def __init__(self, store: ResultStore, config: RolloutConfig, targets: list[Target], token: str | None,
                 say: Callable[[str], None] = lambda _m: None) -> None:
        if config.boards < 1:
            raise ValueError(f"watch at least 1 board a line, not {config.boards}")
        self.store, self.config, self.targets, self.token, self.say = store, config, targets, token, say
        self.id = str(uuid.uuid4())

    def run(self) -> list[LineResult]:
        """Each line in turn; stops at the first line that is not kept."""
        results: list[LineResult] = []
        for i, target in enumerate(self.targets):
            result = self._line(target)
            results.append(result)
            if result.outcome != "kept":
                for rest in self.targets[i + 1:]:
                    results.append(LineResult(rest, "not_reached", reason=f"the rollout stopped at {target.line}"))
                    self._record(results[-1])
                break
        return results

    def _line(self, target: Target) -> LineResult:
        c = self.config
        kiosk = KioskClient(target.kiosk, self.token)
        result = LineResult(target, "failed")
        try:
            result.from_sha = kiosk.serving(c.expert)
            types = types_of(kiosk.rules_text(), c.expert)
        except EndpointError as exc:
            return self._done(result, f"the kiosk cannot be read: {exc.message}")
        if result.from_sha is None:
            return self._done(result, f"the line does not serve {c.expert}")
        if result.from_sha == c.sha:
            result.outcome = "kept"
            return self._done(result, "it already serves this version")
        if not types:
            return self._done(result, f"no component type of the line's rule set is routed through {c.expert}")
        switch_id = self.store.last_id(target.scope)
        result.before = self._judge(target.scope, types, boards=c.boards, upto=switch_id)
        self.say(f"{target.line}/{target.station}: {c.expert} {result.from_sha[:12]} -> {c.sha[:12]}; before: "
                 f"{_rates(result.before)}")
        try:
            kiosk.install(c.expert, c.sha)
        except EndpointError as exc:
            return self._done(result, f"the kiosk did not install it: {exc.message}")
        self._record(LineResult(target, "switched", result.from_sha, result.before, reason="installed and swapped in"))
        reason = self._watch(kiosk, target, switch_id, types, result)
        if reason is None:
            result.outcome = "kept"
            return self._done(result, f"no rate worse at p < {c.alpha:g} over {result.after.boards} boards")
        try:
            kiosk.rollback(c.expert)
        except EndpointError as exc:
            return self._done(result, f"{reason}; the rollback failed ({exc.message}): roll the line back by hand "
                                      f"(inspector zoo rollback --expert {c.expert} --kiosk {target.kiosk} "
                                      "--token-file F)")
        result.outcome = "rolled_back"
        return self._done(result, reason)

    def _watch(self, kiosk: KioskClient, target: Target, switch_id: int, types: set[str],
               result: LineResult) -> str | None:
        """Wait for the line's next boards; why to roll back (None: keep)."""
        c = self.config
        deadline = time.monotonic() + c.timeout_s
        unhealthy = 0
        first_new: int | None = None
        while True:
            try:
                health = kiosk.health()
                state = health.get("status")
                unhealthy = unhealthy + 1 if state in UNHEALTHY else 0
                why = f"the kiosk is {state}: {'; '.join(health.get('reasons') or [])}"
            except EndpointError as exc:
                unhealthy, why = unhealthy + 1, f"the kiosk does not answer: {exc.message}"
            if unhealthy >= UNHEALTHY_POLLS:
                return why
            first_new = first_new or self._first_new(target.scope, switch_id)
            start = first_new if first_new is not None else switch_id + 1
            done = self.store.count_boards(target.scope, after=start - 1)
            if done >= c.boards:
                result.after = self._judge(target.scope, types, boards=None, after=start - 1)
                return worse(result.before, result.after, c.alpha)
            if time.monotonic() > deadline:
                return f"only {done} of {c.boards} boards in {c.timeout_s:g} s"
            time.sleep(c.poll_s)

    def _first_new(self, scope: Scope, switch_id: int) -> int | None:
        """The first board stored after the switch that carries the new weights (boards in the writer's queue
        at the switch were inspected before it)."""
        with self.store.engine.connect() as conn:
            q = scope.where(select(func.min(Inspection.id)).join(ComponentResult, ComponentResult.inspection_id ==
                                                                 Inspection.id))
            return conn.scalar(q.where(Inspection.id > switch_id, ComponentResult.weights_sha256 == self.config.sha))

    def _judge(self, scope: Scope, types: set[str], boards: int | None, after: int | None = None,
               upto: int | None = None) -> Judged:
        rates = review_rates(self.store, scope, boards, after=after, upto=upto)
        picked = [r for name, r in rates.items() if name in types]
        n = self.store.count_boards(scope, after, upto)
        return Judged(min(n, boards) if boards else n, sum(r.parts for r in picked), sum(r.flagged for r in picked),
                      sum(r.false_calls for r in picked), sum(r.escapes for r in picked))

    def _done(self, result: LineResult, reason: str) -> LineResult:
        result.reason = reason
        self._record(result)
        self.say(f"{result.target.line}/{result.target.station}: {result.outcome.replace('_', ' ')}: {reason}")
        return result

    def _record(self, result: LineResult) -> None:
        c = self.config
        detail: dict[str, Any] = {"reason": result.reason, "kiosk": result.target.kiosk, "boards": c.boards,
                                  "alpha": c.alpha, "before": asdict(result.before) if result.before else None,
                                  "after": asdict(result.after) if result.after else None}
        record(self.store, Step(self.id, now(), c.by, c.expert, result.target.line, result.target.station,
                                result.from_sha, c.sha, result.outcome, detail))


def _rates(j: Judged) -> str:
    return (f"{j.parts} parts of {j.boards} boards, flagged {j.flagged}, false calls {j.false_calls}, escapes "
            f"{j.escapes}")
