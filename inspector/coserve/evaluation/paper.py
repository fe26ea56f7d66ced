"""The paper's four tasks on a simulated paper box, against the paper's reported bands (§5.2).

`inspector bench --simulate --box paper-numa --paper-tasks` runs A1, A2, B1 and
B2, each a whole side-by-side bench, and prints one summary: each policy's
throughput against Samba-CoE and its switch reduction, with the band the
paper reports for that box beside them, and the floor of unavoidable switches.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..online.workload import Workload, load_workload
from .report import BenchReport

TASKS = ("paper-a1", "paper-a2", "paper-b1", "paper-b2")
# §5.2: throughput over Samba-CoE, and (Figure 14's text) switches down 78.5% to 93.87%
SPEEDUP_BANDS = {"paper-numa": (4.5, 10.5), "paper-uma": (4.6, 12.0)}
SWITCH_BAND = (78.5, 93.9)


@dataclass
class TaskRow:
    task: str
    policy: str
    rps: float
    speedup: float
    switches: int
    floor: int
    fewer_pct: float
    samba_rps: float
    samba_switches: int
    ceiling_rps: float = math.nan  # the all-resident run: no policy exceeds it


def summarise(task: str, report: BenchReport, policies: tuple[str, ...]) -> list[TaskRow]:
    samba = next(r for r in report.runs if r.policy == "samba")
    rows = []
    for r in report.runs:
        if r.policy in policies:
            rows.append(TaskRow(task, r.policy, r.throughput_rps, r.throughput_rps / samba.throughput_rps,
                                r.switches, r.floor, 100 * (1 - r.switches / max(1, samba.switches)),
                                samba.throughput_rps, samba.switches, report.ceiling_rps))
    return rows


def run_tasks(bench: Callable[[Workload], BenchReport], tasks: tuple[str, ...] = TASKS,
              ) -> tuple[list[BenchReport], list[TaskRow]]:
    reports, rows = [], []
    for task in tasks:
        report = bench(load_workload(task))  # type: ignore[arg-type] - a shipped workload's name
        reports.append(report)
        rows += summarise(task, report, tuple(r.policy for r in report.runs if r.policy.startswith("coserve")))
    return reports, rows


def format_tasks(rows: list[TaskRow], box: str) -> str:
    lo, hi = SPEEDUP_BANDS.get(box, (math.nan, math.nan))
    head = (f"{'task':<10}{'policy':<26}{'req/s':>8}{'samba':>8}{'x samba':>9}{'band':>16}{'switches':>9}"
            f"{'samba':>7}{'fewer':>8}{'band':>18}{'floor':>7}{'ceiling x samba':>17}")
    lines = [f"the paper's tasks on {box} (simulated); bands: the paper's §5.2 figures for this box; ceiling: the "
             "all-resident run, which no policy exceeds", head, "-" * len(head)]
    for r in rows:
        in_speed = "in" if lo <= r.speedup <= hi else ("above" if r.speedup > hi else "below")
        in_sw = "in" if SWITCH_BAND[0] <= r.fewer_pct <= SWITCH_BAND[1] else (
            "above" if r.fewer_pct > SWITCH_BAND[1] else "below")
        lines.append(f"{r.task:<10}{r.policy:<26.26}{r.rps:>8.2f}{r.samba_rps:>8.2f}{r.speedup:>8.2f}x"
                     f"  {f'{in_speed} {lo:g}-{hi:g}':>14}{r.switches:>9}{r.samba_switches:>7}{r.fewer_pct:>7.1f}%"
                     f"  {f'{in_sw} {SWITCH_BAND[0]:g}-{SWITCH_BAND[1]:g}':>16}{r.floor:>7}"
                     f"{r.ceiling_rps / r.samba_rps:>16.2f}x")
    for policy in dict.fromkeys(r.policy for r in rows):
        mine = [r for r in rows if r.policy == policy]
        n = sum(lo <= r.speedup <= hi for r in mine)
        lines.append(f"{policy}: throughput in the paper's band on {n} of {len(mine)} tasks, switch reduction on "
                     f"{sum(SWITCH_BAND[0] <= r.fewer_pct <= SWITCH_BAND[1] for r in mine)} of {len(mine)}")
    return "\n".join(lines)
