"""Memory allocation of a running line: the expected effect, the planner over a rule set, live reallocation."""
from __future__ import annotations

from pathlib import Path

import pytest

from inspector.app.allocation import Allocation, expected_effect, planned
from inspector.app.line import Line, LineConfig
from inspector.app.run import line_profiles

from .conftest import DEMO_RULES as RULES

MiB = 2**20


@pytest.fixture(scope="module")
def profiles(demo):
    root, zoo = demo
    return line_profiles(zoo, root / "models", lambda _m: None)


def test_the_expected_effect_follows_the_pool(demo, profiles) -> None:
    _, zoo = demo
    # the tiny zoo: two 18.7 MiB classifiers and an 11.5 MiB detector, 49 MiB in all
    small = expected_effect(RULES, zoo, profiles, LineConfig(device_mb=80, expert_pool_mb=20))
    large = expected_effect(RULES, zoo, profiles, LineConfig(device_mb=80, expert_pool_mb=50))
    assert small.experts_total == large.experts_total == len(zoo.entries)
    assert small.experts_fit < large.experts_fit == len(zoo.entries)
    assert small.usage_covered < large.usage_covered == pytest.approx(1.0)
    assert large.batch_mb == pytest.approx((80 - 50) / large.executors)
    assert small.parts_per_s > 0 and large.parts_per_s > 0 and small.failed == large.failed == 0
    assert small.switches_per_board > large.switches_per_board
    with pytest.raises(ValueError, match="largest expert"):
        expected_effect(RULES, zoo, profiles, LineConfig(device_mb=80, expert_pool_mb=5))
    with pytest.raises(ValueError, match="no batch memory"):
        expected_effect(RULES, zoo, profiles, LineConfig(device_mb=80, expert_pool_mb=80))


def test_the_planner_runs_over_a_rule_set_and_keeps_its_trail(demo, profiles) -> None:
    _, zoo = demo
    plan = planned(RULES, zoo, profiles, LineConfig(device_mb=60))
    assert plan.trials and plan.executor_rule.startswith("searched")
    assert plan.workload.expert_pool_bytes + plan.workload.batch_bytes <= 60 * MiB or plan.memory.rule != "decay-window"
    assert sum(len(p) for p in plan.placement) >= 1


def test_live_reallocation_evicts_to_the_new_pool_and_refuses_what_cannot_fit(demo, profiles) -> None:
    _, zoo = demo
    line = Line(RULES, zoo, profiles, LineConfig(device_mb=80, expert_pool_mb=50))
    engine = line.engine
    manager = next(iter(engine.managers.values()))
    assert len(manager.resident()) == len(zoo.entries)  # placed by usage: all 49 MiB fit in 50
    n = len(engine.executors)
    largest = max(e.weight_bytes for e in zoo.entries.values())
    with pytest.raises(ValueError, match="largest expert"):
        engine.reallocate(largest - 1, 1 * MiB)
    with pytest.raises(ValueError, match="exceeds the device"):
        engine.reallocate(50 * MiB, 80 * MiB)
    with pytest.raises(ValueError, match="one sample"):
        engine.reallocate(50 * MiB, 1)
    assert manager.ledger.capacity == 50 * MiB  # a refused edit changes nothing
    pool = largest + MiB
    engine.reallocate(pool, (80 * MiB - pool) // n)
    assert manager.ledger.capacity == pool and manager.ledger.used <= pool
    assert len(manager.resident()) == 1
    assert all(ex.batch_bytes == (80 * MiB - pool) // n for ex in engine.executors)
    engine.stop()


def test_an_allocation_says_whether_it_applies_live() -> None:
    running = Allocation(160, 120, None)
    assert Allocation(160, 80, None).live_over(running)
    assert not Allocation(160, 80, 1).live_over(running)
    assert not Allocation(200, 120, None).live_over(running)
    config = Allocation(200, 90, 2).applied_to(LineConfig())
    assert (config.device_mb, config.pool_mb, config.executors) == (200, 90, 2)


def test_the_controller_refuses_an_allocation_or_rules_without_a_line(tmp_path: Path) -> None:
    from inspector.app.controller import LineController

    ctl = LineController(tmp_path / "models", tmp_path / "data")
    with pytest.raises(RuntimeError, match="no line is running"):
        ctl.apply_allocation(Allocation(160, 80, None))
    with pytest.raises(RuntimeError, match="no line is running"):
        ctl.apply_rules("recipe: x")
    assert ctl.snapshot()["controller"]["phase"] == "idle"
