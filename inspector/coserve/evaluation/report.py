"""Bench reports: one run's row, a bench's table, where the time goes, medians over repeats.

The same rows for measured and simulated runs, so that every table reads alike.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ..online.expert_manager import ManagerStats
from ..online.request import RequestResult
from ..online.timeline import KINDS, ExecutorTime


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
    mean_batch: float = math.nan  # requests per batch computed
    floor: int = 0  # switches no policy can avoid here: experts the run used that no pool held at the start
    rps_samples: list[float] = field(default_factory=list)  # each run's throughput, when repeated


def median_report(runs: list[RunReport]) -> RunReport:
    """One row from repeated runs of one policy: the median of every figure, the throughputs kept."""
    if len(runs) == 1:
        runs[0].rps_samples = [runs[0].throughput_rps]
        return runs[0]
    out = RunReport(**asdict(runs[0]))
    for f in fields(RunReport):
        values = [getattr(r, f.name) for r in runs]
        if isinstance(values[0], bool) or not isinstance(values[0], (int, float)):
            continue
        med = statistics.median(values)
        setattr(out, f.name, round(med) if isinstance(values[0], int) else med)
    for name in ("time_shares", "mean_load_ms_by_tier"):
        keys = set().union(*(getattr(r, name) for r in runs))
        setattr(out, name, {k: statistics.median(getattr(r, name).get(k, 0.0) for r in runs) for k in keys})
    out.rps_samples = [r.throughput_rps for r in runs]
    return out


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
    ceiling: RunReport | None = None  # the all-resident run itself
    repeat: int = 1  # runs per policy; each figure is their median
    floor_run: RunReport | None = None  # coserve at the switch floor: room for all, the policies' start and arrivals
    backend: str = "torch"  # what ran the experts (experts/backends)
    costs: list[ArchCosts] = field(default_factory=list)  # the backend's profiled costs on the main device
    # request id -> verdict of the first run (to compare backends; not written to JSON)
    verdicts: dict[int, str] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload, "device": self.device, "ceiling_rps": self.ceiling_rps,
            "verdicts_identical": self.verdicts_identical, "runs": [asdict(r) for r in self.runs],
            "ceiling": asdict(self.ceiling) if self.ceiling else None, "repeat": self.repeat,
            "floor_run": asdict(self.floor_run) if self.floor_run else None,
            "backend": self.backend, "costs": [asdict(c) for c in self.costs],
        }


@dataclass(frozen=True)
class ArchCosts:
    """One architecture's profiled costs on a backend: what a switch, a batch and a resident expert cost."""

    key: str
    threads: int
    switch_ms: float  # from disk: a weight load (torch) or a session's creation from its model file (a runtime)
    host_ms: float  # from the host tier (nan: none measured)
    batch1_ms: float
    max_batch: int
    batch_max_ms: float
    resident_mib: float  # what a resident expert holds in its pool
    weights_mib: float


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
        mean_batch=spent.requests / spent.batches if spent is not None and spent.batches else math.nan,
    )


FEED_LIMITED_SHARE = 0.8


def feed_rate_rps(workload: dict[str, Any]) -> float:
    """Requests per second the workload's stream offers (0 when it arrives all at once)."""
    interval_ms = workload.get("arrival_interval_ms") or 0
    return 1000 / interval_ms if interval_ms else 0.0


def format_table(report: BenchReport, baseline: str = "samba") -> str:
    base = next((r for r in report.runs if r.policy == baseline), None)
    spread = report.repeat > 1
    head = (f"{'policy':<26}{'req/s':>8}" + (f"{'spread':>8}" if spread else "")
            + f"{'x base':>9}{'switches':>9}{'floor':>6}{'fewer':>9}{'done':>6}{'fail':>5}"
            f"{'mean s':>8}{'p99 s':>8}{'sched%':>8}{'em%':>7}{'disk ms':>9}{'host ms':>9}{'prefetch':>10}")
    medians = f", medians of {report.repeat} interleaved runs" if spread else ""
    backend = f", backend {report.backend}" if report.backend != "torch" else ""
    lines = [f"workload {report.workload['name']} on {report.device}{backend} (base: {baseline}{medians}): "
             f"{report.workload['component_types']} component types, {report.workload['requests']} requests, "
             f"pool {report.workload['expert_pool_mb']} MiB of {report.workload['experts_total_mb']} MiB experts",
             head, "-" * len(head)]
    for r in report.runs:
        ratio = r.throughput_rps / base.throughput_rps if base and base.throughput_rps else math.nan
        fewer = 100 * (1 - r.switches / base.switches) if base and base.switches else math.nan
        disk = r.mean_load_ms_by_tier.get("disk", math.nan)
        host = r.mean_load_ms_by_tier.get("host", math.nan)
        rps = r.rps_samples or [r.throughput_rps]
        lines.append(
            f"{r.policy:<26.26}{r.throughput_rps:>8.2f}"
            + (f"{'±' + format(spread_pct(rps), '.1f') + '%':>8}" if spread else "")
            + f"{ratio:>8.2f}x{r.switches:>9}{r.floor:>6}{fewer:>8.1f}%{r.completed:>6}"
            f"{r.failed:>5}{r.mean_latency_s:>8.2f}{r.p99_latency_s:>8.2f}{r.sched_overhead_pct:>8.2f}"
            f"{r.em_overhead_pct:>7.3f}{disk:>9.1f}{host:>9.1f}{f'{r.prefetch_used}/{r.prefetches}':>10}"
        )
    lines.append("floor: experts the run used that no pool held at its start; no policy switches fewer times")
    for r in report.runs:  # a failed request says why, so a row with failures can be read
        if r.failures:
            lines.append(f"{r.policy} failed: " + "; ".join(
                f"{kind} (x{n})" for kind, n in sorted(r.failures.items(), key=lambda kv: -kv[1])[:3]))
    if spread:
        lines.append("spread: half the range of the runs' throughputs, in % of the median")
    product = next((r for r in report.runs if r.policy == "coserve"), None)
    if report.ceiling_rps == report.ceiling_rps:  # not run (--no-ceiling): no line rather than "nan req/s"
        ceiling = f"all-resident ceiling: {report.ceiling_rps:.2f} req/s"
        if product:
            ceiling += (f" (coserve reaches {100 * product.throughput_rps / report.ceiling_rps:.0f}% of it"
                        f"{format_rounds(product, report.ceiling)})")
        lines.append(ceiling)
    if report.floor_run is not None:
        at = report.floor_run.throughput_rps
        share = (f" (coserve reaches {100 * product.throughput_rps / at:.0f}% of it"
                 f"{format_rounds(product, report.floor_run)})" if product and at else "")
        lines.append(f"at the switch floor: {at:.2f} req/s{share}, {100 * at / report.ceiling_rps:.0f}% of the "
                     f"ceiling; coserve with room for every expert, the policies' start and arrivals: it loads "
                     f"each expert the start lacks once ({report.floor_run.switches} switches) and evicts nothing")
    if report.workload.get("feed"):
        lines.append(f"offered: {report.workload['feed']}; the ceiling measured with every request queued at once")
    feed = feed_rate_rps(report.workload)
    if feed and report.ceiling_rps >= FEED_LIMITED_SHARE * feed:
        lines.append(f"warning: the feed offers {feed:.0f} req/s, within {100 * (1 - FEED_LIMITED_SHARE):.0f}% of the "
                     "ceiling: fast policies are limited by arrivals, not by the engine; lower arrival_interval_ms "
                     "or bench with --feed 2")
    lines.append("verdicts identical across policies: " + ("yes" if report.verdicts_identical else "NO"))
    return "\n".join(lines)


def round_ratios(run: RunReport, reference: RunReport | None) -> list[float]:
    """`run`'s throughput over `reference`'s, round by round, where both ran every round of a repeated bench: the
    two shared the box's state in each round (a ceiling that moves by a tenth between rounds moves both), so these
    ratios are steadier than the ratio of the two medians. Empty for a single run."""
    if reference is None or len(run.rps_samples) < 2 or len(run.rps_samples) != len(reference.rps_samples):
        return []
    return [a / b for a, b in zip(run.rps_samples, reference.rps_samples) if b > 0]


def format_rounds(run: RunReport, reference: RunReport | None) -> str:
    ratios = round_ratios(run, reference)
    if not ratios:
        return ""
    return (f"; round by round {', '.join(f'{100 * r:.0f}%' for r in ratios)}, median "
            f"{100 * statistics.median(ratios):.0f}%")


def spread_pct(values: list[float]) -> float:
    """Half the range of `values` in % of their median (0 for one value)."""
    med = statistics.median(values)
    return 100 * (max(values) - min(values)) / 2 / med if med else 0.0


def format_time_shares(report: BenchReport) -> str:
    """Where each policy's executor time went, in % of executors x makespan."""
    head = (f"{'policy':<26}" + "".join(f"{k + '%':>10}" for k in KINDS)
            + f"{'slowed%':>10}{'sched%':>10}{'batch':>8}")
    lines = ["where the executors' time goes (% of executors x makespan; slowed: the part of compute beyond what the "
             "profile predicts, executor sharing included; sched: the scheduler's own time, % of makespan; "
             "batch: mean requests per batch)", head, "-" * len(head)]
    for r in report.runs + [x for x in (report.floor_run, report.ceiling) if x]:
        if r.time_shares:
            slowed = r.time_shares.get("slowed", math.nan)
            lines.append(f"{r.policy:<26.26}" + "".join(f"{100 * r.time_shares[k]:>10.1f}" for k in KINDS)
                         + f"{100 * slowed:>10.1f}{r.sched_overhead_pct:>10.2f}{r.mean_batch:>8.2f}")
    return "\n".join(lines)


def format_costs(report: BenchReport) -> str:
    """The backend's profiled costs per architecture: a switch against a batch, and the memory a resident holds."""
    head = (f"{'architecture':<28}{'threads':>8}{'switch ms':>10}{'host ms':>9}{'batch 1 ms':>11}{'max batch':>10}"
            f"{'at max ms':>10}{'switch/crop':>12}{'pool MiB':>9}{'weights MiB':>12}")
    lines = [f"profiled costs on {report.device}, backend {report.backend} (switch/crop: a switch in crops' worth "
             "of inference at the max batch)", head, "-" * len(head)]
    for c in report.costs:
        per_crop = c.batch_max_ms / c.max_batch if c.max_batch else math.nan
        lines.append(f"{c.key:<28.28}{c.threads:>8}{c.switch_ms:>10.2f}{c.host_ms:>9.2f}{c.batch1_ms:>11.2f}"
                     f"{c.max_batch:>10}{c.batch_max_ms:>10.2f}{c.switch_ms / per_crop:>12.1f}"
                     f"{c.resident_mib:>9.1f}{c.weights_mib:>12.1f}")
    return "\n".join(lines)


def format_backends(reports: list[BenchReport], baseline: str = "samba", ours: str = "coserve") -> str:
    """Backends side by side: each one's ceiling, baseline and ours, and the ratios the issue of each asks for."""
    head = (f"{'backend':<18}{'ceiling':>9}{baseline:>9}{ours:>9}{ours + '/' + baseline:>15}"
            f"{ours + '/ceiling':>16}{'switches':>10}{'x ceiling of first':>20}")
    lines = ["backends side by side (req/s; one process, the same stream and memory)", head, "-" * len(head)]
    first = reports[0].ceiling_rps if reports else math.nan
    for rep in reports:
        base = next((r for r in rep.runs if r.policy == baseline), None)
        mine = next((r for r in rep.runs if r.policy == ours), None)
        b = base.throughput_rps if base else math.nan
        m = mine.throughput_rps if mine else math.nan
        lines.append(f"{rep.backend:<18}{rep.ceiling_rps:>9.2f}{b:>9.2f}{m:>9.2f}{m / b if b else math.nan:>14.2f}x"
                     f"{100 * m / rep.ceiling_rps if rep.ceiling_rps else math.nan:>15.0f}%"
                     f"{mine.switches if mine else 0:>10}{rep.ceiling_rps / first if first else math.nan:>19.2f}x")
    same = all(r.verdicts_identical for r in reports)
    lines.append("verdicts identical across policies within each backend: " + ("yes" if same else "NO"))
    ref = reports[0].verdicts if reports else {}
    for rep in reports[1:]:
        both = [i for i in ref if i in rep.verdicts]
        agree = sum(ref[i] == rep.verdicts[i] for i in both)
        lines.append(f"verdicts of {rep.backend} equal to {reports[0].backend}'s: {agree}/{len(both)} requests "
                     f"({100 * agree / len(both) if both else math.nan:.2f}%)")
    return "\n".join(lines)
