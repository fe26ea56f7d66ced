"""`inspector bench`: one workload, several policies, one process, one after another.

Same request stream, same budget, same devices for every policy; the
all-resident ceiling runs the same stream with every expert preloaded. With
repeats, the policies are interleaved run by run (samba, coserve, ceiling,
samba, coserve, ceiling, ...) so that a slow minute of a noisy box falls on
every policy alike, and each figure is the median of its runs.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from ...experts.backends import get_backend
from ...experts.base import Architecture
from ...experts.registry import architecture_from_spec
from ...experts.zoo import Zoo
from ..online.engine import Engine, EnginePlan
from ..online.executor_plan import build_plan, devices_of
from ..online.policies import Policy, get_policy
from ..online.pools import pool_layout
from ..online.profile import DeviceProfile
from ..online.request import RequestResult
from ..online.workload import Workload
from .boxes import box_profiles
from .preparation import Progress, prepare
from .report import ArchCosts, BenchReport, RunReport, make_report, median_report, switch_floor
from .simulation import PassOracle, Simulator, rate_oracle, warm_start


def run_policy(
    workload: Workload, zoo: Zoo, policy: Policy, profiles: dict[str, DeviceProfile],
    all_resident: bool = False, drop_page_cache: bool = True, observe: Callable[[Engine], None] | None = None,
    backend: str = "torch", start: Sequence[str] | None = None,
) -> tuple[RunReport, dict[int, RequestResult]]:
    """Feed the workload's stream at its arrival interval and measure until the last result.

    `observe` sees the stopped engine (its executors' served batches, its pools' loads). With `all_resident` and
    `start`: room for every expert, but only `start` resident at the beginning (the run at the switch floor).
    """
    plan = build_plan(workload, policy, profiles, all_resident, drop_page_cache)
    if start is not None:
        plan = replace(plan, drop_page_cache=drop_page_cache)  # its first loads come from the disk
    # a fresh backend per run: nothing one policy's run kept (a runtime's sessions) serves the next
    engine = Engine(zoo, workload.usage(), policy, plan, profiles,
                    get_backend(backend, threads=max((s.threads for s in plan.executors), default=1)))
    if all_resident:
        engine.preload(list(zoo.entries) if start is None else list(start), every_pool=start is None)
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
    report = make_report(run_name(policy, all_resident, start), engine.results, t0, end, stats.experts,
                         len(plan.executors), stats.completed, stats.failed, stats.sched_overhead_s, stats.time)
    report.failures = dict(stats.failures)
    report.floor = switch_floor(engine.results, at_start)
    return report, engine.results


def simulate_policy(
    workload: Workload, zoo: Zoo, policy: Policy, profiles: dict[str, DeviceProfile], passes: PassOracle,
    all_resident: bool = False, plan: EnginePlan | None = None, start: Sequence[str] | None = None,
) -> tuple[RunReport, dict[int, RequestResult]]:
    """The same run on the virtual clock of `profiles` (this box's, or another device's).

    `plan` pins executors, threads and budgets (to mirror a real run); else it is built here. `start`: as in
    `run_policy`.
    """
    plan = plan or build_plan(workload, policy, profiles, all_resident)
    sim = Simulator(zoo, workload.usage(), policy, plan, profiles, passes)
    if all_resident:
        sim.preload(list(zoo.entries) if start is None else list(start), every_pool=start is None)
    run = sim.run(workload.stream(), workload.arrival_interval_s, place=not all_resident)
    failed = sum(1 for r in run.results.values() if r.error is not None)
    report = make_report(run_name(policy, all_resident, start), run.results, 0.0, run.makespan_s, run.experts,
                         run.executors, len(run.results) - failed, failed, None, run.time)
    report.floor = switch_floor(run.results, run.resident_at_start)
    return report, run.results


def product_warm_start(workload: Workload, zoo: Zoo, profiles: dict[str, DeviceProfile]) -> list[str]:
    """The experts the product's policy (coserve) holds when a run starts: where its run at the switch floor starts."""
    policy = get_policy("coserve")
    return warm_start(zoo, workload.usage(), policy, build_plan(workload, policy, profiles), profiles)


def run_name(policy: Policy, all_resident: bool, start: Sequence[str] | None) -> str:
    if not all_resident:
        return policy.name
    return policy.name + (" (all resident)" if start is None else " (at the floor)")


def resident_bytes(arch: Architecture, profiles: dict[str, DeviceProfile] | None) -> int:
    """What one resident expert of `arch` holds in a pool: as its backend's profile measured it, else its weights."""
    weights = arch.weight_bytes()
    return max((prof.pool_bytes_of(arch.key, weights) for prof in (profiles or {}).values()), default=weights)


def check_budget(workload: Workload, policies: Sequence[str] = (),
                 profiles: dict[str, DeviceProfile] | None = None) -> None:
    """A pool smaller than the largest expert serves nothing: refuse before running.

    With policies and profiles, each policy's own pools are checked too: one
    that gives every executor its own pool splits the device's memory.
    """
    archs = [architecture_from_spec(s) for s in [workload.classifier] + [d.spec for d in workload.detectors]]
    largest = max(resident_bytes(a, profiles) for a in archs)
    if workload.expert_pool_bytes < largest:
        raise ValueError(
            f"memory.expert_pool_mb = {workload.expert_pool_bytes / 2**20:.0f} is less than the largest expert "
            f"({largest / 2**20:.0f} MiB resident); raise it to at least {math.ceil(largest / 2**20)}"
        )
    keys = {a.key for a in archs}
    for name in policies if profiles else ():
        policy = get_policy(name)
        plan = build_plan(workload, policy, profiles)  # type: ignore[arg-type]
        short_batches(name, plan, profiles, keys)  # type: ignore[arg-type]
        pools = pool_layout([s.device for s in plan.executors], plan.pool_bytes, policy.shared_pool)
        main = next(p for p in pools if p.device == plan.executors[0].device)
        if main.nbytes < largest:
            n = sum(1 for p in pools if p.device == main.device)
            raise ValueError(
                f"{name} gives each of its {n} executors its own pool: {main.nbytes / 2**20:.0f} MiB each, less "
                f"than the largest expert ({largest / 2**20:.0f} MiB); raise memory.expert_pool_mb to at least "
                f"{math.ceil(n * largest / 2**20)} or give fewer executors")


def short_batches(name: str, plan: EnginePlan, profiles: dict[str, DeviceProfile], keys: set[str]) -> None:
    """Refuse a plan whose executors' batch memory cannot hold one sample of an architecture the workload runs:
    each batch would be cut to one request anyway and overrun the memory given (a pool grown up to the device's
    size, a sweep of expert_pool_mb), so its figures would measure nothing the box could run."""
    for spec in plan.executors:
        needs = [(p.act_bytes_per_sample, p.key) for p in profiles[spec.device.key].archs.values() if p.key in keys]
        need, arch = max(needs, default=(0, ""))
        if spec.batch_bytes < need:
            raise ValueError(
                f"{name}: each executor on {spec.device.key} has {spec.batch_bytes / 2**20:.2f} MiB for batches (what "
                f"the expert pool leaves of memory.device_mb), less than one sample of {arch} "
                f"({need / 2**20:.2f} MiB); lower memory.expert_pool_mb or raise memory.device_mb")


def with_costs(report: BenchReport, zoo: Zoo, profiles: dict[str, DeviceProfile],
               backend: str | None) -> BenchReport:
    """The report with the backend that ran (None: the one the main device's profile names) and its profiled
    costs per architecture on the main device."""
    main = profiles[devices_of(profiles)[0].key]
    report.backend = backend if backend is not None else str(main.fingerprint.get("backend", "torch"))
    report.costs = arch_costs(main, {zoo.architecture(n).key for n in zoo.entries})
    return report


def run_bench(workload: Workload, policies: Sequence[str], models_dir: Path,
              progress: Progress | None = None, ceiling: bool = True,
              drop_page_cache: bool = True, repeat: int = 1, backend: str = "torch",
              feed: float | None = None) -> BenchReport:
    """Every policy on the same stream; `drop_page_cache=False` lets "disk" loads hit the page cache; `feed`: offer
    that multiple of the uncapped ceiling instead of the workload's own arrivals (`side_by_side`)."""
    check_budget(workload)
    zoo, profiles = prepare(workload, models_dir, progress, drop_page_cache, backend)
    check_budget(workload, policies, profiles)
    report = side_by_side(
        policies, lambda p, top, interval, start: run_policy(
            replace(workload, arrival_interval_s=interval), zoo, p, profiles, all_resident=top,
            drop_page_cache=drop_page_cache, backend=backend, start=start),
        workload.describe(), devices_of(profiles)[0].describe(), progress, ceiling, repeat,
        workload.arrival_interval_s, feed, lambda: product_warm_start(workload, zoo, profiles))
    return with_costs(report, zoo, profiles, backend)


def arch_costs(profile: DeviceProfile, keys: set[str]) -> list[ArchCosts]:
    """The profiled switch, batch and memory costs of the architectures `keys`, at each thread count measured (a
    device's profile also holds other zoos' architectures)."""
    out = []
    for p in (p for p in profile.archs.values() if p.key in keys):
        top = p.batch_latency_s.get(p.max_batch, p.exec_s(p.max_batch))
        out.append(ArchCosts(p.key, p.threads, 1000 * p.switch_s("disk"), 1000 * p.load_s.get("host", math.nan),
                             1000 * p.batch_latency_s.get(1, p.exec_s(1)), p.max_batch, 1000 * top,
                             p.pool_bytes() / 2**20, p.weight_bytes / 2**20))
    return out


RunOne = Callable[[Policy, bool, float, Sequence[str] | None], tuple[RunReport, dict[int, RequestResult]]]
# (policy, all resident, seconds between arrivals, the experts resident at the start when not all) -> the run


def check_feed(feed: float) -> None:
    if feed <= 0:
        raise ValueError(f"--feed must be a positive multiple of the ceiling, got {feed:g}")


def fed_interval_s(feed: float, ceiling_rps: float) -> float:
    """Seconds between arrivals that offer `feed` times the uncapped ceiling (`--feed`)."""
    return 1.0 / (feed * ceiling_rps)


def side_by_side(policies: Sequence[str], run_one: RunOne, workload: dict, device: str,
                 progress: Progress | None = None, ceiling: bool = True, repeat: int = 1,
                 interval_s: float = 0.0, feed: float | None = None,
                 warm: Callable[[], Sequence[str]] | None = None) -> BenchReport:
    """Each policy in turn on the same stream, then the all-resident ceiling, `repeat` rounds; medians.

    With `feed`, the arrivals cannot cap the engine: the ceiling is measured first with every request queued at
    once (the engine's own limit, not the feed's), and each policy is offered `feed` times that rate, so its ratio
    and its share of the ceiling measure the engine. With `feed`, the ceiling and `warm` (gives the experts the
    policies start with; asked only then), each round also runs coserve at the switch floor: the policies'
    arrivals, room for every expert, those experts resident at the start, so it loads each other expert once and
    evicts nothing. What separates a policy from it is the policy's; what separates it from the ceiling is the
    memory's. Verdicts are compared across every run of every policy.
    """
    samples: dict[str, list[RunReport]] = {name: [] for name in policies}
    tops: list[RunReport] = []
    floors: list[RunReport] = []
    verdicts: dict[str, dict[int, str]] = {}
    if feed is not None:
        check_feed(feed)
        if progress:
            progress("running the all-resident ceiling, every request queued at once (--feed)")
        tops.append(run_one(get_policy("coserve"), True, 0.0, None)[0])
        interval_s = fed_interval_s(feed, tops[0].throughput_rps)
        workload = {**workload, "arrival_interval_ms": round(1000 * interval_s, 4),
                    "feed": f"{feed:g}x the uncapped ceiling ({feed * tops[0].throughput_rps:.0f} req/s)"}
        if progress:
            progress(f"  ceiling {tops[0].throughput_rps:.2f} req/s: offering {feed:g}x, one request every "
                     f"{1000 * interval_s:.2f} ms")
    start = warm() if feed is not None and ceiling and warm is not None else None
    for round_ in range(repeat):
        tag = f" (round {round_ + 1} of {repeat})" if repeat > 1 else ""
        for name in policies:
            if progress:
                progress(f"running {name}{tag}")
            report, results = run_one(get_policy(name), False, interval_s, None)
            samples[name].append(report)
            verdicts[f"{name}#{round_}"] = {i: r.verdict for i, r in results.items()}
            if progress:
                progress(f"  {name}: {report.throughput_rps:.2f} req/s, {report.switches} switches")
        if start is not None:
            if progress:
                progress(f"running coserve at the switch floor{tag}")
            report, results = run_one(get_policy("coserve"), True, interval_s, start)
            floors.append(report)
            verdicts[f"floor#{round_}"] = {i: r.verdict for i, r in results.items()}
        if ceiling and not (feed is not None and round_ == 0):  # with --feed, round 1's ceiling ran first
            if progress:
                progress(f"running the all-resident ceiling{tag}")
            tops.append(run_one(get_policy("coserve"), True, 0.0 if feed is not None else interval_s, None)[0])
            if progress:
                progress(f"  ceiling: {tops[-1].throughput_rps:.2f} req/s")
    first = next(iter(verdicts.values()), {})
    top = median_report(tops) if tops else None
    report = BenchReport(workload, device, top.throughput_rps if top else math.nan,
                         [median_report(samples[name]) for name in policies],
                         all(v == first for v in verdicts.values()), top, repeat,
                         floor_run=median_report(floors) if floors else None)
    report.verdicts = first
    return report


def run_simulated_bench(workload: Workload, policies: Sequence[str], models_dir: Path, box: str | None = None,
                        progress: Progress | None = None, ceiling: bool = True,
                        feed: float | None = None, backend: str = "torch") -> BenchReport:
    """The bench on a virtual clock: same scheduler, pools and policies, times from the profiles (this box's on
    `backend`, or a box file's)."""
    device, zoo, profiles, workload = box_profiles(box, models_dir, workload, progress, backend)
    check_budget(workload, policies, profiles)
    passes = rate_oracle(workload, workload.seed)
    total = sum(e.weight_bytes for e in zoo.entries.values())
    report = side_by_side(
        policies, lambda p, top, interval, start: simulate_policy(
            replace(workload, arrival_interval_s=interval), zoo, p, profiles, passes, all_resident=top, start=start),
        workload.describe(total), device, progress, ceiling, 1, workload.arrival_interval_s, feed,
        lambda: product_warm_start(workload, zoo, profiles))
    # a box's costs are of what its runs ran on, not of the command's default backend
    return with_costs(report, zoo, profiles, backend if box is None else None)
