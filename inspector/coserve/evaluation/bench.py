"""`inspector bench`: one workload, several policies, one process, one after another.

Same request stream, same budget, same devices for every policy; the
all-resident ceiling runs the same stream with every expert preloaded.
"""
from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...experts.registry import architecture_from_spec
from ...experts.zoo import Zoo, build_random_zoo
from ...runtime.devices import available_devices
from ..offline.profiler import load_or_profile
from ..online.engine import Engine, EnginePlan
from ..online.executor_plan import build_plan, primary_device
from ..online.expert_manager import ManagerStats
from ..online.policies import Policy, get_policy
from ..online.profile import DeviceProfile
from ..online.request import RequestResult
from ..online.timeline import KINDS, ExecutorTime
from ..online.workload import Workload
from .simulation import PassOracle, Simulator, rate_oracle

Progress = Callable[[str], None]


@dataclass
class RunReport:
    policy: str
    throughput_rps: float
    switches: int
    completed: int
    failed: int
    mean_latency_s: float
    p99_latency_s: float
    sched_overhead_pct: float
    em_overhead_pct: float
    makespan_s: float = 0.0
    executors: int = 0
    hits: int = 0
    prefetches: int = 0
    prefetch_used: int = 0
    evictions: int = 0
    initial_loads: int = 0
    loads_by_tier: dict[str, int] = field(default_factory=dict)
    mean_load_ms_by_tier: dict[str, float] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    time_shares: dict[str, float] = field(default_factory=dict)  # of executors x makespan (timeline.KINDS)
    floor: int = 0  # switches no policy can avoid here: experts the run used that no pool held at the start


def switch_floor(results: dict[int, RequestResult], resident_at_start: set[str]) -> int:
    """Experts touched by the run minus those resident at its start: each must be loaded at least once."""
    touched = {expert for r in results.values() for expert, _ in r.steps}
    return len(touched - resident_at_start)


@dataclass
class BenchReport:
    workload: dict[str, Any]
    device: str
    ceiling_rps: float
    runs: list[RunReport]
    verdicts_identical: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload, "device": self.device, "ceiling_rps": self.ceiling_rps,
            "verdicts_identical": self.verdicts_identical, "runs": [asdict(r) for r in self.runs],
        }


def make_report(name: str, results: dict[int, RequestResult], t0: float, end: float, pools: ManagerStats,
                executors: int, completed: int, failed: int, sched_s: float | None,
                spent: ExecutorTime | None = None) -> RunReport:
    """One run's row, the same for a measured and a simulated run (overheads: measured runs only)."""
    done = [r for r in results.values() if r.error is None]
    makespan = max(end - t0, 1e-9)
    lat = sorted(r.latency for r in done)
    return RunReport(
        policy=name,
        throughput_rps=len(done) / makespan,
        switches=pools.switches,
        completed=completed,
        failed=failed,
        mean_latency_s=statistics.fmean(lat) if lat else math.nan,
        p99_latency_s=lat[min(len(lat) - 1, math.ceil(0.99 * len(lat)) - 1)] if lat else math.nan,
        sched_overhead_pct=100 * sched_s / makespan if sched_s is not None else math.nan,
        em_overhead_pct=100 * pools.decision_s / (makespan * executors) if sched_s is not None else math.nan,
        makespan_s=makespan,
        executors=executors,
        hits=pools.hits,
        prefetches=pools.prefetches,
        prefetch_used=pools.prefetch_used,
        evictions=pools.evictions,
        initial_loads=pools.initial_loads,
        loads_by_tier=dict(pools.loads_by_tier),
        mean_load_ms_by_tier={t: 1000 * pools.load_s_by_tier[t] / n for t, n in pools.loads_by_tier.items()},
        time_shares=spent.shares(makespan * executors) if spent is not None else {},
    )


def run_policy(
    workload: Workload, zoo: Zoo, policy: Policy, profiles: dict[str, DeviceProfile],
    all_resident: bool = False, drop_page_cache: bool = True, observe: Callable[[Engine], None] | None = None,
) -> tuple[RunReport, dict[int, RequestResult]]:
    """Feed the workload's stream at its arrival interval and measure until the last result.

    `observe` sees the stopped engine (its executors' served batches, its pools' loads).
    """
    plan = build_plan(workload, policy, profiles, all_resident, drop_page_cache)
    engine = Engine(zoo, workload.usage(), policy, plan, profiles)
    if all_resident:
        engine.preload(list(zoo.entries), every_pool=True)
    else:
        engine.place_by_usage()  # the same warm start for every policy
    at_start = {e for m in engine.managers.values() for e in m.resident()}
    engine.start()
    stream = workload.stream()
    t0 = time.perf_counter()
    for i, request in enumerate(stream):
        delay = t0 + i * workload.arrival_interval_s - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        request.arrival = time.perf_counter()
        engine.submit(request)
    engine.drain()
    engine.stop()
    if observe is not None:
        observe(engine)
    stats = engine.stats()
    end = max((r.finished for r in engine.results.values()), default=t0)
    name = policy.name + (" (all resident)" if all_resident else "")
    report = make_report(name, engine.results, t0, end, stats.experts, len(plan.executors), stats.completed,
                         stats.failed, stats.sched_overhead_s, stats.time)
    report.failures = dict(stats.failures)
    report.floor = switch_floor(engine.results, at_start)
    return report, engine.results


def simulate_policy(
    workload: Workload, zoo: Zoo, policy: Policy, profiles: dict[str, DeviceProfile], passes: PassOracle,
    all_resident: bool = False, plan: EnginePlan | None = None,
) -> tuple[RunReport, dict[int, RequestResult]]:
    """The same run on the virtual clock of `profiles` (this box's, or another device's).

    `plan` pins executors, threads and budgets (to mirror a real run); else it is built here.
    """
    plan = plan or build_plan(workload, policy, profiles, all_resident)
    sim = Simulator(zoo, workload.usage(), policy, plan, profiles, passes)
    if all_resident:
        sim.preload(list(zoo.entries), every_pool=True)
    run = sim.run(workload.stream(), workload.arrival_interval_s, place=not all_resident)
    failed = sum(1 for r in run.results.values() if r.error is not None)
    name = policy.name + (" (all resident)" if all_resident else "")
    report = make_report(name, run.results, 0.0, run.makespan_s, run.experts, run.executors,
                         len(run.results) - failed, failed, None, run.time)
    report.floor = switch_floor(run.results, run.resident_at_start)
    return report, run.results


def zoo_for(workload: Workload, models_dir: Path, progress: Progress | None = None) -> Zoo:
    """The workload's benchmark zoo, built on first use and cached under models/zoo."""
    zoo_dir = Path(models_dir) / "zoo" / f"{workload.name}-{workload.zoo_fingerprint()}"
    if progress:
        progress(f"zoo: {zoo_dir}")
    return build_random_zoo(zoo_dir, workload.zoo_items(), seed=workload.seed,
                            sample_inputs=workload.sample_inputs, progress=progress)


def prepare(workload: Workload, models_dir: Path, progress: Progress | None = None,
            drop_page_cache: bool = True) -> tuple[Zoo, dict[str, DeviceProfile]]:
    """The workload's zoo and a profile of every device that will run it (measuring what is missing)."""
    zoo = zoo_for(workload, models_dir, progress)
    profiles = {}
    for device in available_devices():
        profiles[device.key] = load_or_profile(zoo, device, Path(models_dir) / "profiles", progress=progress,
                                               drop_page_cache=drop_page_cache)
    return zoo, profiles


def check_budget(workload: Workload) -> None:
    """A pool smaller than the largest expert serves nothing: refuse before running."""
    largest = max(architecture_from_spec(s).weight_bytes()
                  for s in [workload.classifier] + [d.spec for d in workload.detectors])
    if workload.expert_pool_bytes < largest:
        raise ValueError(
            f"memory.expert_pool_mb = {workload.expert_pool_bytes / 2**20:.0f} is less than the largest expert "
            f"({largest / 2**20:.0f} MiB); raise it to at least {math.ceil(largest / 2**20)}"
        )


def run_bench(workload: Workload, policies: Sequence[str], models_dir: Path,
              progress: Progress | None = None, ceiling: bool = True,
              drop_page_cache: bool = True) -> BenchReport:
    """Every policy on the same stream; `drop_page_cache=False` lets "disk" loads hit the page cache."""
    check_budget(workload)
    zoo, profiles = prepare(workload, models_dir, progress, drop_page_cache)
    runs, ceiling_rps, same = _side_by_side(
        policies, lambda p, top: run_policy(workload, zoo, p, profiles, all_resident=top,
                                            drop_page_cache=drop_page_cache), progress, ceiling)
    return BenchReport(workload.describe(), primary_device().describe(), ceiling_rps, runs, same)


RunOne = Callable[[Policy, bool], tuple[RunReport, dict[int, RequestResult]]]


def _side_by_side(policies: Sequence[str], run_one: RunOne, progress: Progress | None,
                  ceiling: bool) -> tuple[list[RunReport], float, bool]:
    """Each policy in turn on the same stream, then the all-resident ceiling; are verdicts all equal?"""
    runs: list[RunReport] = []
    verdicts: dict[str, dict[int, str]] = {}
    for name in policies:
        if progress:
            progress(f"running {name}")
        report, results = run_one(get_policy(name), False)
        runs.append(report)
        verdicts[name] = {i: r.verdict for i, r in results.items()}
        if progress:
            progress(f"  {name}: {report.throughput_rps:.2f} req/s, {report.switches} switches")
    ceiling_rps = math.nan
    if ceiling:
        if progress:
            progress("running the all-resident ceiling")
        ceiling_rps = run_one(get_policy("coserve"), True)[0].throughput_rps
    first = next(iter(verdicts.values()), {})
    return runs, ceiling_rps, all(v == first for v in verdicts.values())


FEED_LIMITED_SHARE = 0.8


def feed_rate_rps(workload: dict[str, Any]) -> float:
    """Requests per second the workload's stream offers (0 when it arrives all at once)."""
    interval_ms = workload.get("arrival_interval_ms") or 0
    return 1000 / interval_ms if interval_ms else 0.0


def format_table(report: BenchReport, baseline: str = "samba") -> str:
    base = next((r for r in report.runs if r.policy == baseline), None)
    head = (f"{'policy':<26}{'req/s':>8}{'x base':>9}{'switches':>9}{'floor':>6}{'fewer':>9}{'done':>6}{'fail':>5}"
            f"{'mean s':>8}{'p99 s':>8}{'sched%':>8}{'em%':>7}{'disk ms':>9}{'host ms':>9}{'prefetch':>10}")
    lines = [f"workload {report.workload['name']} on {report.device} (base: {baseline}): "
             f"{report.workload['component_types']} component types, {report.workload['requests']} requests, "
             f"pool {report.workload['expert_pool_mb']} MiB of {report.workload['experts_total_mb']} MiB experts",
             head, "-" * len(head)]
    for r in report.runs:
        ratio = r.throughput_rps / base.throughput_rps if base and base.throughput_rps else math.nan
        fewer = 100 * (1 - r.switches / base.switches) if base and base.switches else math.nan
        disk = r.mean_load_ms_by_tier.get("disk", math.nan)
        host = r.mean_load_ms_by_tier.get("host", math.nan)
        lines.append(
            f"{r.policy:<26.26}{r.throughput_rps:>8.2f}{ratio:>8.2f}x{r.switches:>9}{r.floor:>6}{fewer:>8.1f}%{r.completed:>6}"
            f"{r.failed:>5}{r.mean_latency_s:>8.2f}{r.p99_latency_s:>8.2f}{r.sched_overhead_pct:>8.2f}"
            f"{r.em_overhead_pct:>7.3f}{disk:>9.1f}{host:>9.1f}{f'{r.prefetch_used}/{r.prefetches}':>10}"
        )
    lines.append("floor: experts the run used that no pool held at its start; no policy switches fewer times")
    lines.append(f"all-resident ceiling: {report.ceiling_rps:.2f} req/s")
    feed = feed_rate_rps(report.workload)
    if feed and report.ceiling_rps >= FEED_LIMITED_SHARE * feed:
        lines.append(f"warning: the feed offers {feed:.0f} req/s, within {100 * (1 - FEED_LIMITED_SHARE):.0f}% of the "
                     "ceiling: fast policies are limited by arrivals, not by the engine; lower arrival_interval_ms")
    lines.append("verdicts identical across policies: " + ("yes" if report.verdicts_identical else "NO"))
    return "\n".join(lines)


def format_time_shares(report: BenchReport) -> str:
    """Where each policy's executor time went, in % of executors x makespan."""
    head = f"{'policy':<26}" + "".join(f"{k + '%':>10}" for k in KINDS) + f"{'sched%':>10}"
    lines = ["where the executors' time goes (% of executors x makespan; sched: the scheduler's own time)",
             head, "-" * len(head)]
    for r in report.runs:
        if r.time_shares:
            lines.append(f"{r.policy:<26.26}" + "".join(f"{100 * r.time_shares[k]:>10.1f}" for k in KINDS)
                         + f"{r.sched_overhead_pct:>10.2f}")
    return "\n".join(lines)


def run_simulated_bench(workload: Workload, policies: Sequence[str], models_dir: Path, box: str | None = None,
                        progress: Progress | None = None, ceiling: bool = True) -> BenchReport:
    """The bench on a virtual clock: same scheduler, pools and policies, times from the profiles."""
    from .boxes import box_profiles  # boxes builds on this module's prepare

    device, zoo, profiles, workload = box_profiles(box, models_dir, workload, progress)
    passes = rate_oracle(workload, workload.seed)
    runs, ceiling_rps, same = _side_by_side(
        policies, lambda p, top: simulate_policy(workload, zoo, p, profiles, passes, all_resident=top),
        progress, ceiling)
    total = sum(e.weight_bytes for e in zoo.entries.values())
    return BenchReport(workload.describe(total), device, ceiling_rps, runs, same)
