"""Is the simulator right here? Each policy for real, then simulated with the same verdicts.

Both runs use this box's measured profile; the simulated run replays the
real run's verdicts so both schedule exactly the same follow-ups. The issue's
bar is agreement within 15% on throughput and switches per policy.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..experts.zoo import Zoo
from .bench import run_policy, simulate_policy
from .policies import get_policy
from .profile import DeviceProfile
from .simulation import replay_oracle
from .workload import Workload

TOLERANCE = 0.15


@dataclass
class Agreement:
    policy: str
    measured_rps: float
    simulated_rps: float
    measured_switches: int
    simulated_switches: int

    @property
    def rps_error(self) -> float:
        return self.simulated_rps / self.measured_rps - 1

    @property
    def switch_error(self) -> float:
        return self.simulated_switches / max(1, self.measured_switches) - 1

    @property
    def within(self) -> bool:
        return abs(self.rps_error) <= TOLERANCE and abs(self.switch_error) <= TOLERANCE


def compare(workload: Workload, zoo: Zoo, profiles: dict[str, DeviceProfile], policies: Sequence[str],
            progress: Callable[[str], None] | None = None) -> list[Agreement]:
    rows = []
    for name in policies:
        policy = get_policy(name)
        real, results = run_policy(workload, zoo, policy, profiles)
        sim, _ = simulate_policy(workload, zoo, policy, profiles, replay_oracle(results))
        rows.append(Agreement(name, real.throughput_rps, sim.throughput_rps, real.switches, sim.switches))
        if progress:
            progress(f"  {name}: measured {real.throughput_rps:.1f} req/s / {real.switches} switches, "
                     f"simulated {sim.throughput_rps:.1f} / {sim.switches}")
    return rows


def format_agreement(rows: Sequence[Agreement]) -> str:
    head = f"{'policy':<16}{'measured rps':>13}{'sim rps':>9}{'err':>8}{'measured sw':>12}{'sim sw':>8}{'err':>8}  ok"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.policy:<16}{r.measured_rps:>13.2f}{r.simulated_rps:>9.2f}{100 * r.rps_error:>7.1f}%"
                     f"{r.measured_switches:>12}{r.simulated_switches:>8}{100 * r.switch_error:>7.1f}%  "
                     f"{'yes' if r.within else 'NO'}")
    ok = sum(r.within for r in rows)
    lines.append(f"{ok} of {len(rows)} policies within {TOLERANCE:.0%} on both throughput and switches")
    return "\n".join(lines)
