"""The offline configuration (paper §4.1, §4.4, Figure 17): executors, memory split, placement.

Each search measures coserve's throughput on a sample of the workload
through an `Evaluate` function: the real engine on this box, or the
simulator on a profile of another device. What the workload fixes (the
`executors` and `memory.expert_pool_mb` keys) is kept as an override.
"""
from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from ...experts.zoo import Zoo
from ..evaluation.bench import run_policy, simulate_policy
from ..evaluation.simulation import rate_oracle
from ..online.executor_plan import box_cores, devices_of
from ..online.policies import get_policy
from ..online.profile import DeviceProfile
from ..online.workload import MiB, Workload

Evaluate = Callable[[Workload], float]

LIMITED_SHARE = 0.10  # a processor is "limited" when its max batches fit in 10% of its memory
INITIAL_WINDOW = 15.0  # % of the usage CDF (the paper's NUMA setting, §5.3)
ERROR_MARGIN = 0.05  # equation 3's margin (the paper used 5%)
FIT_POINTS = 3  # throughputs that must exist before the linear trend is trusted
SAMPLE_REQUESTS = 300


def engine_evaluator(zoo: Zoo, profiles: dict[str, DeviceProfile], sample: int = SAMPLE_REQUESTS,
                     repeats: int = 3, backend: str = "torch") -> Evaluate:
    """Throughput of coserve on the first `sample` requests, measured with the real engine.

    The median of `repeats` runs: one short run on a shared box can miss by more
    than the window's 5% margin and end the search early.
    """
    def evaluate(w: Workload) -> float:
        small = dataclasses.replace(w, requests=min(w.requests, sample))
        return statistics.median(
            run_policy(small, zoo, get_policy("coserve"), profiles, backend=backend)[0].throughput_rps
            for _ in range(repeats))
    return evaluate


def sim_evaluator(zoo: Zoo, profiles: dict[str, DeviceProfile], sample: int = SAMPLE_REQUESTS) -> Evaluate:
    """The same on the simulator (another device's profile, or quick planning here)."""
    def evaluate(w: Workload) -> float:
        small = dataclasses.replace(w, requests=min(w.requests, sample))
        report, _ = simulate_policy(small, zoo, get_policy("coserve"), profiles, rate_oracle(small, small.seed))
        return report.throughput_rps
    return evaluate


@dataclass
class WindowStep:
    lower_pct: float
    upper_pct: float
    experts: int  # experts whose memory is reserved at the upper bound
    pool_mb: float
    throughput_rps: float
    predicted_rps: float | None  # the linear trend of the earlier steps (equation 2)


@dataclass
class MemoryChoice:
    rule: str  # "override", "limited-compute", "decay-window", "unsearched"
    why: str
    expert_pool_bytes: int
    batch_bytes_per_executor: int | None
    experts: int | None = None
    window: tuple[int, int] | None = None
    steps: list[WindowStep] = field(default_factory=list)


@dataclass
class ExecutorTrial:
    cuda: int
    cpu: int
    throughput_rps: float


@dataclass
class Plan:
    executors: dict[str, int]
    executor_rule: str
    trials: list[ExecutorTrial]
    memory: MemoryChoice
    placement: list[list[str]]
    workload: Workload  # the workload with the plan applied (what the engine runs)


def ranked_experts(workload: Workload, zoo: Zoo) -> list[str]:
    return workload.usage().ranked(zoo.entries)


GPU_EXECUTORS = 6  # tried on a GPU: past the paper's best 3-4, to show the decline (Figure 17)


def search_executors(workload: Workload, evaluate: Evaluate, has_cuda: bool, cores: int) -> list[ExecutorTrial]:
    """Figure 17: best GPU executor count first, then CPU executors added beside it.

    Each count is tried up to past its best, so that the curve shows the
    decline the paper reports (more executors share one device's compute and,
    with per-executor pools, split its memory).
    """
    trials: list[ExecutorTrial] = []

    def trial(g: int, c: int) -> float:
        rps = evaluate(dataclasses.replace(workload, executors={"cuda": g, "cpu": c}))
        trials.append(ExecutorTrial(g, c, rps))
        return rps

    if has_cuda:
        best_g = max(range(1, GPU_EXECUTORS + 1), key=lambda g: trial(g, 0))
        best = max(t.throughput_rps for t in trials)
        for c in range(1, max(1, cores) + 1):  # CPU executors beside them, until one more loses
            rps = trial(best_g, c)
            if rps < best:
                break
            best = rps
    else:
        for c in range(1, max(1, cores) + 3):  # two past the cores
            trial(0, c)
    return trials


def decay_window(workload: Workload, zoo: Zoo, evaluate: Evaluate, main_executors: int, min_batch: int,
                 initial: float = INITIAL_WINDOW, margin: float = ERROR_MARGIN) -> MemoryChoice:
    """§4.4: slide a shrinking window over the usage CDF, measure at its upper bounds, stop when the
    throughput falls short of the linear trend by more than the margin, choose inside the window.

    The paper picks a random point in the final window; we take its middle, so plans repeat.
    """
    assert workload.device_bytes is not None
    ranked = ranked_experts(workload, zoo)
    usage = workload.usage()
    cdf, total = [], 0.0
    for name in ranked:
        total += usage.p(name)
        cdf.append(total)
    sizes = [zoo.entries[n].weight_bytes for n in ranked]
    decay = 1 - initial / 100  # equation 1
    lower, size = 0.0, initial
    steps: list[WindowStep] = []
    window: tuple[int, int] | None = None
    why = "the window reached the whole CDF without the throughput falling behind its trend"
    while lower < 100.0 - 1e-9:
        upper = min(100.0, lower + size)
        n = next((i + 1 for i, c in enumerate(cdf) if c * 100 >= upper - 1e-9), len(ranked))
        pool = sum(sizes[:n])
        batch = (workload.device_bytes - pool) // main_executors
        if batch < min_batch:
            why = f"at {upper:.1f}% the experts would leave less than one batch of memory per executor"
            window = (steps[-1].experts if steps else 1, n)
            break
        predicted = None
        if len(steps) >= FIT_POINTS:  # equation 2 over the steps so far, extrapolated one step
            xs = list(range(len(steps)))
            ys = [s.throughput_rps for s in steps]
            mx, my = statistics.fmean(xs), statistics.fmean(ys)
            k = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
            predicted = my + k * (len(steps) - mx)
        rps = evaluate(dataclasses.replace(workload, expert_pool_bytes=pool, batch_bytes=batch, pool_fixed=True))
        steps.append(WindowStep(lower, upper, n, pool / MiB, rps, predicted))
        if predicted and (predicted - rps) / predicted > margin:  # equation 3
            window = (steps[-2].experts, n)
            why = (f"at {upper:.1f}% ({n} experts) throughput {rps:.2f} fell {(predicted - rps) / predicted:.1%} "
                   f"below the trend {predicted:.2f} (margin {margin:.0%})")
            break
        lower, size = upper, size * decay
    if window is None:
        best = max(steps, key=lambda s: s.throughput_rps)
        chosen = best.experts
    else:
        chosen = max(1, (window[0] + window[1]) // 2)
    while chosen > 1 and (workload.device_bytes - sum(sizes[:chosen])) // main_executors < min_batch:
        chosen -= 1  # the window may reach past the memory: keep at least one batch per executor
    pool = sum(sizes[:chosen])
    return MemoryChoice("decay-window", why, pool, (workload.device_bytes - pool) // main_executors,
                        chosen, window, steps)


def choose_memory(workload: Workload, zoo: Zoo, profile: DeviceProfile, evaluate: Evaluate,
                  main_executors: int) -> MemoryChoice:
    if workload.pool_fixed:
        return MemoryChoice("override", "memory.expert_pool_mb is set in the workload", workload.expert_pool_bytes,
                            workload.batch_bytes)
    if workload.device_bytes is None:
        return MemoryChoice("unsearched", "no memory.device_mb to split", workload.expert_pool_bytes,
                            workload.batch_bytes)
    max_batch = max(p.act_bytes_per_sample * p.max_batch for p in profile.archs.values())
    one = max(p.act_bytes_per_sample for p in profile.archs.values())
    if max_batch * main_executors <= LIMITED_SHARE * workload.device_bytes:
        pool = workload.device_bytes - max_batch * main_executors
        return MemoryChoice(
            "limited-compute",
            f"the profiled max batch needs {max_batch / MiB:.1f} MiB per executor, within "
            f"{LIMITED_SHARE:.0%} of {workload.device_bytes / MiB:.0f} MiB: reserve it, the rest holds experts",
            pool, max_batch)
    return decay_window(workload, zoo, evaluate, main_executors, one)


def placement(workload: Workload, zoo: Zoo, pools: list[int]) -> list[list[str]]:
    """§4.1: descending usage probability, round-robin over pools, until they are full."""
    free = list(pools)
    placed: list[list[str]] = [[] for _ in pools]
    for i, name in enumerate(ranked_experts(workload, zoo)):
        k = i % len(pools)
        need = zoo.entries[name].weight_bytes
        if need <= free[k]:
            placed[k].append(name)
            free[k] -= need
    return placed


def make_plan(workload: Workload, zoo: Zoo, profiles: dict[str, DeviceProfile], evaluate: Evaluate) -> Plan:
    main = devices_of(profiles)[0]
    cores = box_cores(profiles)
    trials: list[ExecutorTrial] = []
    if workload.executors_fixed:
        executors, rule = workload.executor_counts(main.is_cuda, cores), "override (executors set in the workload)"
    else:
        trials = search_executors(workload, evaluate, main.is_cuda, cores)
        best = max(trials, key=lambda t: t.throughput_rps)
        executors, rule = {"cuda": best.cuda, "cpu": best.cpu}, "searched (Figure 17)"
    staged = dataclasses.replace(workload, executors=dict(executors))
    main_execs = max(1, executors["cuda"] if main.is_cuda else executors["cpu"])
    memory = choose_memory(staged, zoo, profiles[main.key], evaluate, main_execs)
    planned = dataclasses.replace(staged, expert_pool_bytes=memory.expert_pool_bytes,
                                  batch_bytes=memory.batch_bytes_per_executor, pool_fixed=True, executors_fixed=True)
    pools = [planned.expert_pool_bytes] + ([planned.cpu_pool_bytes] if main.is_cuda and executors["cpu"] else [])
    return Plan(executors, rule, trials, memory, placement(planned, zoo, pools), planned)


def format_plan(plan: Plan) -> str:
    lines = [f"executors: {plan.executors}  [{plan.executor_rule}]"]
    if plan.trials:
        best = max(plan.trials, key=lambda t: t.throughput_rps)
        top = best.throughput_rps or 1.0
        lines.append(f"  {'cuda':>5}{'cpu':>5}{'req/s':>9}  of the best")
        for t in plan.trials:
            bar = "#" * max(1, round(30 * t.throughput_rps / top))
            mark = "  <- best" if t is best else ""
            lines.append(f"  {t.cuda:>5}{t.cpu:>5}{t.throughput_rps:>9.2f}  {bar}{mark}")
    m = plan.memory
    batch = f"{m.batch_bytes_per_executor / MiB:.1f} MiB" if m.batch_bytes_per_executor else "profiled max batch"
    lines.append(f"memory: {m.expert_pool_bytes / MiB:.1f} MiB for experts, {batch} per executor for batches "
                 f"[{m.rule}: {m.why}]")
    if m.steps:
        lines.append(f"  {'window %':>16}{'experts':>9}{'pool MiB':>10}{'req/s':>9}{'trend':>9}")
        for s in m.steps:
            trend = f"{s.predicted_rps:.2f}" if s.predicted_rps is not None else "-"
            lines.append(f"  {s.lower_pct:>7.1f}-{s.upper_pct:<7.1f}{s.experts:>9}{s.pool_mb:>10.0f}"
                         f"{s.throughput_rps:>9.2f}{trend:>9}")
        if m.window:
            lines.append(f"  final window: {m.window[0]}-{m.window[1]} experts; chosen {m.experts} (its middle)")
    for i, pool in enumerate(plan.placement):
        shown = ", ".join(pool[:8]) + (f", ... ({len(pool)} in all)" if len(pool) > 8 else "")
        lines.append(f"placement pool {i}: {shown}")
    return "\n".join(lines)
