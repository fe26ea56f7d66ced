"""PNG charts of a bench: the ablation ladder (or any policy list) and a memory sweep (matplotlib, no display)."""
from __future__ import annotations

from pathlib import Path

from .report import BenchReport
from .sweep import SweepReport


def _pyplot():  # noqa: ANN202 - matplotlib's module
    import matplotlib

    matplotlib.use("Agg")  # files only: a line box has no display
    import matplotlib.pyplot as plt

    return plt


def plot_bench(report: BenchReport, path: Path, baseline: str = "samba") -> Path:
    """Bars of each policy's throughput (x the baseline) beside its switches and the floor."""
    plt = _pyplot()
    runs = report.runs
    names = [r.policy for r in runs]
    base = next((r.throughput_rps for r in runs if r.policy == baseline), None)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 0.45 * len(runs) + 2.2), sharey=True)
    y = list(range(len(runs)))[::-1]
    left.barh(y, [r.throughput_rps for r in runs], color="#3b7dd8")
    for yi, r in zip(y, runs):
        label = f"{r.throughput_rps:.1f}" + (f"  ({r.throughput_rps / base:.2f}x)" if base else "")
        left.text(r.throughput_rps, yi, " " + label, va="center", fontsize=8)
    if report.ceiling_rps == report.ceiling_rps:
        left.axvline(report.ceiling_rps, color="#999", linestyle="--", label="all-resident ceiling")
        left.legend(loc="lower right", fontsize=8)
    left.set_yticks(y, names, fontsize=8)
    left.set_xlabel("requests / s" + (f" (median of {report.repeat})" if report.repeat > 1 else ""))
    left.set_xlim(0, max([r.throughput_rps for r in runs] + [report.ceiling_rps or 0]) * 1.3)
    right.barh(y, [r.switches for r in runs], color="#d8743b", label="switches")
    right.scatter([r.floor for r in runs], y, color="black", marker="|", s=200, label="floor", zorder=3)
    right.set_xlabel("expert switches")
    right.legend(loc="lower right", fontsize=8)
    fig.suptitle(f"{report.workload['name']} on {report.device}", fontsize=10)
    fig.tight_layout()
    return _save(fig, plt, path)


def plot_sweep(sweep: SweepReport, path: Path) -> Path:
    """Throughput and switches of every policy against the swept memory size."""
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 8), sharex=True)
    for policy in sweep.policies:
        top.plot(sweep.values, sweep.series(policy, "throughput_rps"), marker="o", label=policy)
        bottom.plot(sweep.values, sweep.series(policy, "switches"), marker="o", label=policy)
    top.plot(sweep.values, [r.ceiling_rps for r in sweep.reports], color="#999", linestyle="--",
             label="all-resident ceiling")
    top.set_ylabel("requests / s")
    bottom.set_ylabel("expert switches")
    bottom.set_xlabel(f"{sweep.parameter} (MiB)")
    top.legend(fontsize=8)
    top.grid(alpha=0.3)
    bottom.grid(alpha=0.3)
    name = sweep.reports[0].workload["name"] if sweep.reports else ""
    fig.suptitle(f"{name}: memory sweep on {sweep.reports[0].device if sweep.reports else ''}", fontsize=10)
    fig.tight_layout()
    return _save(fig, plt, path)


def _save(fig, plt, path: Path) -> Path:  # noqa: ANN001 - matplotlib objects
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
