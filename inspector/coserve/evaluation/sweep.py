"""`inspector bench --sweep device_mb=a,b,c`: every policy against the size of the memory it gets.

Each size is a whole side-by-side bench (same stream, policies interleaved
when repeated); the sweep keeps each policy's median throughput and switches
per size, for a table and a chart.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ...errors import UnknownChoice
from ..online.workload import CASUAL_EXPERT_SHARE, MiB, Workload
from .report import BenchReport

SWEEPABLE = ("device_mb", "expert_pool_mb")


@dataclass
class SweepReport:
    parameter: str
    values: list[float]
    reports: list[BenchReport] = field(default_factory=list)

    def series(self, policy: str, figure: str) -> list[float]:
        """One policy's `figure` (throughput_rps, switches, floor) at each value of the sweep."""
        out = []
        for report in self.reports:
            run = next((r for r in report.runs if r.policy == policy), None)
            out.append(float(getattr(run, figure)) if run else math.nan)
        return out

    @property
    def policies(self) -> list[str]:
        return [r.policy for r in self.reports[0].runs] if self.reports else []


def parse_sweep(text: str) -> tuple[str, list[float]]:
    """`device_mb=300,400,600` -> ("device_mb", [300, 400, 600]); UnknownChoice saying what is wrong (a flag's
    words: the command line answers it as usage)."""
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep or name not in SWEEPABLE:
        raise UnknownChoice(f"--sweep {text!r}: give PARAMETER=V1,V2,... with PARAMETER one of {', '.join(SWEEPABLE)}")
    try:
        numbers = [float(v) for v in values.split(",") if v.strip()]
    except ValueError:
        raise UnknownChoice(f"--sweep {text!r}: the values must be numbers (MiB), e.g. {name}=300,400,600") from None
    if not numbers or min(numbers) <= 0:
        raise UnknownChoice(f"--sweep {text!r}: give at least one size above 0 MiB")
    return name, numbers


def resized(workload: Workload, parameter: str, mib: float) -> Workload:
    """The workload with its main device's memory (or only its expert pool) set to `mib`.

    device_mb keeps the workload's split: the casual 75% for experts unless the
    workload fixed its pool, in which case the pool keeps its share of the device.
    """
    if parameter == "expert_pool_mb":
        return dataclasses.replace(workload, expert_pool_bytes=int(mib * MiB), pool_fixed=True)
    share = (workload.expert_pool_bytes / workload.device_bytes
             if workload.device_bytes and workload.pool_fixed else CASUAL_EXPERT_SHARE)
    return dataclasses.replace(workload, device_bytes=int(mib * MiB), expert_pool_bytes=int(share * mib * MiB))


def run_sweep(workload: Workload, parameter: str, values: list[float],
              bench: Callable[[Workload], BenchReport]) -> SweepReport:
    """Each size benched in turn; an expert pool the device cannot hold beside its batches is refused before the
    first run (UnknownChoice), not found at its turn."""
    if parameter == "expert_pool_mb" and workload.device_bytes is not None:
        device = workload.device_bytes / MiB
        over = [v for v in values if v >= device]
        if over:
            raise UnknownChoice(f"--sweep expert_pool_mb: {', '.join(f'{v:g}' for v in over)} MiB leave no room for "
                                f"batches in the workload's device_mb ({device:g}); sweep pools below it, or "
                                "sweep device_mb")
    sweep = SweepReport(parameter, values)
    for v in values:
        sweep.reports.append(bench(resized(workload, parameter, v)))
    return sweep


def format_sweep(sweep: SweepReport) -> str:
    cols = "".join(f"{v:>12g}" for v in sweep.values)
    lines = [f"sweep of {sweep.parameter} (MiB): throughput req/s, then switches (floor)",
             f"{'policy':<26}{cols}", "-" * (26 + 12 * len(sweep.values))]
    for policy in sweep.policies:
        lines.append(f"{policy:<26.26}" + "".join(f"{x:>12.2f}" for x in sweep.series(policy, "throughput_rps")))
    lines.append(f"{'all-resident ceiling':<26}" + "".join(f"{r.ceiling_rps:>12.2f}" for r in sweep.reports))
    for policy in sweep.policies:
        sw, fl = sweep.series(policy, "switches"), sweep.series(policy, "floor")
        lines.append(f"{policy + ' switches':<26.26}" + "".join(f"{f'{s:.0f} ({f:.0f})':>12}" for s, f in zip(sw, fl)))
    return "\n".join(lines)
