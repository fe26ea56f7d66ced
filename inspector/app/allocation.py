"""Memory allocation of a running line: what an operator may change, how it applies, what it should do.

The device's memory is split between the expert pool and the executors'
batches (CoServe §4.4). A new split over the same executors and device total
applies live (`Engine.reallocate`); a new executor count or device total
means new executors and ledgers, so the line is drained and restarted. The
expected effect is the simulator's run of the same rule set on this box's
measured profile, before and after, so the operator sees a number, not a guess.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..coserve.evaluation.bench import simulate_policy
from ..coserve.evaluation.simulation import rate_oracle
from ..coserve.offline.planner import Plan, make_plan, placement, sim_evaluator
from ..coserve.online.engine import pool_shortfall
from ..coserve.online.executor_plan import build_plan
from ..coserve.online.policies import get_policy
from ..coserve.online.profile import DeviceProfile
from ..coserve.online.workload import MiB
from ..experts.zoo import Zoo
from ..routing.rules import RuleSet
from .line import Line, LineConfig, rules_workload

SIM_BOARDS = 8  # boards per simulated run: enough for the pool to reach its steady state


@dataclass(frozen=True)
class Allocation:
    device_mb: float
    expert_pool_mb: float
    executors: int | None  # None: the box's default (one per core on a CPU box)

    @classmethod
    def of(cls, config: LineConfig) -> Allocation:
        return cls(config.device_mb, config.pool_mb, config.executors)

    def applied_to(self, config: LineConfig) -> LineConfig:
        return dataclasses.replace(config, device_mb=self.device_mb, expert_pool_mb=self.expert_pool_mb,
                                   executors=self.executors)

    def live_over(self, running: Allocation) -> bool:
        """True when only the pool/batch split changes: the engine applies it without a restart."""
        return self.device_mb == running.device_mb and self.executors == running.executors


def reallocate_live(line: Line, new: Allocation) -> float:
    """Apply a split over the same device and executors to a running line; the MiB of batches per executor.
    ValueError (nothing changed) when it does not fit."""
    engine = line.engine
    main = engine.executors[0].device
    count = sum(1 for ex in engine.executors if ex.device == main)
    batch = int((new.device_mb - new.expert_pool_mb) * MiB) // count
    engine.reallocate(int(new.expert_pool_mb * MiB), batch)
    line.config = new.applied_to(line.config)
    return batch / MiB


@dataclass(frozen=True)
class Effect:
    """What an allocation should do to this line, from the rule set's usage and the simulator."""

    executors: int
    batch_mb: float  # per executor
    experts_fit: int  # experts the pool holds at start: most used first, as the engine places them
    experts_total: int
    usage_covered: float  # their share of the usage probability: the hit rate's ceiling
    parts_per_s: float  # simulated on this box's profile
    switches_per_board: float
    failed: int


def expected_effect(rules: RuleSet, zoo: Zoo, profiles: dict[str, DeviceProfile], config: LineConfig,
                    boards: int = SIM_BOARDS) -> Effect:
    """Raises ValueError (with what to change) when the allocation cannot run at all."""
    workload = rules_workload(rules, config, profiles)
    short = pool_shortfall(zoo, workload.expert_pool_bytes)
    if short:
        raise ValueError(short)
    policy = get_policy(config.policy)
    plan = build_plan(workload, policy, profiles)
    main = plan.executors[0].device
    batch = plan.executors[0].batch_bytes
    usage = rules.usage()
    held = placement(workload, zoo, [workload.expert_pool_bytes])[0]  # what the engine places at start (§4.1)
    sample = dataclasses.replace(workload, requests=boards * len(rules.placements()))
    report, _ = simulate_policy(sample, zoo, policy, profiles, rate_oracle(sample, sample.seed), plan=plan)
    return Effect(executors=sum(1 for s in plan.executors if s.device == main), batch_mb=batch / MiB,
                  experts_fit=len(held), experts_total=len(zoo.entries),
                  usage_covered=sum(usage.p(name) for name in held),
                  parts_per_s=report.throughput_rps, switches_per_board=report.switches / boards,
                  failed=report.failed)


def planned(rules: RuleSet, zoo: Zoo, profiles: dict[str, DeviceProfile], config: LineConfig) -> Plan:
    """The offline planner (executor search, then the decay window) over this rule set, on the simulator.

    The rule set's workload is one board; the planner samples several (its own cap), not one cold start.
    """
    workload = dataclasses.replace(rules_workload(rules, config, profiles),
                                   requests=SIM_BOARDS * len(rules.placements()))
    return make_plan(workload, zoo, profiles, sim_evaluator(zoo, profiles))
