"""Is the simulator right here? Each policy for real, then simulated with the same verdicts.

The simulated runs replay the real run's verdicts so both schedule exactly
the same follow-ups. Two simulations per policy: one timed by this box's
profile (what a plan made offline would predict), one timed by the costs
the paired real run actually served (batch latencies and loads refit into
the profile), which checks the simulator's dynamics (scheduling, switching,
overlap) apart from how far today's compute speed drifted from the profile.
The bar is agreement within 15% on throughput and switches per policy.
What all the policies' runs served, pooled (`Served`), is also what a box of
this machine is made from (`inspector bench --check-sim --save-box FILE`).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ...experts.zoo import Zoo
from ..online.engine import Engine
from ..online.executor_plan import build_plan
from ..online.policies import get_policy
from ..online.profile import DeviceProfile, ServedBatch, served_profile
from ..online.workload import Workload
from .bench import check_feed, fed_interval_s, run_policy, simulate_policy
from .simulation import replay_oracle

TOLERANCE = 0.15


@dataclass
class Agreement:
    policy: str
    measured_rps: float
    simulated_rps: float  # timed by the served costs
    measured_switches: int
    simulated_switches: int
    profile_rps: float = float("nan")  # timed by the offline profile
    profile_switches: int = 0

    @property
    def rps_error(self) -> float:
        return self.simulated_rps / self.measured_rps - 1

    @property
    def switch_error(self) -> float:
        return self.simulated_switches / max(1, self.measured_switches) - 1

    @property
    def within(self) -> bool:
        return abs(self.rps_error) <= TOLERANCE and abs(self.switch_error) <= TOLERANCE


@dataclass
class Served:
    """The batches and switches real runs served, by device: what the profiles are refit from (`served_profile`).

    Runs pool without mixing: a batch keeps its executor's thread count, and load intervals of runs made one after
    the other never overlap, so each run's disk queueing is read as it was."""

    batches: dict[tuple[str, int], list[ServedBatch]] = field(default_factory=dict)
    loads: dict[str, list[tuple[str, str, float, float]]] = field(default_factory=dict)
    runs: int = 0

    def add(self, engine: Engine, zoo: Zoo) -> None:
        for ex in engine.executors:
            self.batches.setdefault((ex.device.key, ex.threads), []).extend(ex.served)
        for m in engine.managers.values():
            self.loads.setdefault(m.device.key, []).extend(
                (zoo.architecture(e).key, tier, start, sec) for e, tier, start, sec in m.loads)
        self.runs += 1

    def profiles(self, profiles: dict[str, DeviceProfile]) -> dict[str, DeviceProfile]:
        """`profiles` with K, B and loads refit from what was served; devices nothing ran on keep theirs."""
        out = dict(profiles)
        for (device, threads), batches in sorted(self.batches.items()):
            out[device] = served_profile(out[device], batches, self.loads.get(device, []), threads)
        return out


def with_feed(workload: Workload, zoo: Zoo, profiles: dict[str, DeviceProfile], feed: float, backend: str = "torch",
              progress: Callable[[str], None] | None = None) -> tuple[Workload, str]:
    """The workload offered `feed` times the engine's uncapped all-resident ceiling, measured now (every request
    queued at once), as `bench --feed` offers it: checked where the engine, not the arrivals, sets the pace.
    Returns it and a line saying what was offered."""
    check_feed(feed)
    if progress:
        progress("running the all-resident ceiling, every request queued at once (--feed)")
    top, _ = run_policy(replace(workload, arrival_interval_s=0.0), zoo, get_policy("coserve"), profiles,
                        all_resident=True, backend=backend)
    interval_s = fed_interval_s(feed, top.throughput_rps)
    return (replace(workload, arrival_interval_s=interval_s),
            f"offered: {feed:g}x the uncapped ceiling ({top.throughput_rps:.2f} req/s measured now), one request "
            f"every {1000 * interval_s:.2f} ms")


def compare(workload: Workload, zoo: Zoo, profiles: dict[str, DeviceProfile], policies: Sequence[str],
            progress: Callable[[str], None] | None = None, backend: str = "torch",
            pooled: Served | None = None) -> list[Agreement]:
    """Each policy real, then simulated twice (module docstring); `pooled` gathers what every real run served."""
    rows = []
    for name in policies:
        policy = get_policy(name)
        seen: list[Engine] = []
        real, results = run_policy(workload, zoo, policy, profiles, observe=seen.append, backend=backend)
        run = Served()
        run.add(seen[0], zoo)
        served = run.profiles(profiles)
        if pooled is not None:
            pooled.add(seen[0], zoo)
        plan = build_plan(workload, policy, profiles)  # the real run's executors, threads and budgets
        offline, _ = simulate_policy(workload, zoo, policy, profiles, replay_oracle(results), plan=plan)
        sim, _ = simulate_policy(workload, zoo, policy, served, replay_oracle(results), plan=plan)
        rows.append(Agreement(name, real.throughput_rps, sim.throughput_rps, real.switches, sim.switches,
                              offline.throughput_rps, offline.switches))
        if progress:
            progress(f"  {name}: measured {real.throughput_rps:.1f} req/s / {real.switches} switches, "
                     f"simulated {sim.throughput_rps:.1f} / {sim.switches} "
                     f"(from the offline profile: {offline.throughput_rps:.1f} / {offline.switches})")
    return rows


def format_agreement(rows: Sequence[Agreement]) -> str:
    head = (f"{'policy':<16}{'measured rps':>13}{'sim rps':>9}{'err':>8}{'measured sw':>12}{'sim sw':>8}{'err':>8}"
            f"  ok  |{'profile-timed rps':>18}{'err':>8}{'sw':>6}")
    lines = ["simulated = timed by the costs the real run served; profile-timed = timed by the offline profile",
             head, "-" * len(head)]
    for r in rows:
        perr = 100 * (r.profile_rps / r.measured_rps - 1)
        lines.append(f"{r.policy:<16}{r.measured_rps:>13.2f}{r.simulated_rps:>9.2f}{100 * r.rps_error:>7.1f}%"
                     f"{r.measured_switches:>12}{r.simulated_switches:>8}{100 * r.switch_error:>7.1f}%  "
                     f"{'yes' if r.within else 'NO ':<3} |{r.profile_rps:>18.2f}{perr:>7.1f}%{r.profile_switches:>6}")
    ok = sum(r.within for r in rows)
    lines.append(f"{ok} of {len(rows)} policies within {TOLERANCE:.0%} on both throughput and switches")
    return "\n".join(lines)
