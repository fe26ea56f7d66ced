"""Offline phase: executor search, memory rules and the decay window, placement, overrides."""
from __future__ import annotations

import dataclasses
import random

import pytest

from inspector.coserve.evaluation.simulation import simulated_zoo
from inspector.coserve.offline.planner import (
    decay_window,
    make_plan,
    placement,
    ranked_experts,
    search_executors,
)
from inspector.coserve.online.profile import ArchProfile, DeviceProfile
from inspector.coserve.online.workload import MiB, Workload, parse_workload

BIG = """\
name: synthetic
seed: 5
classifier: {arch: resnet10, input_size: 32, classes: 2}
detectors:
  - {name: det, arch: yolov8n.yaml, input_size: 32, classes: 2}
components: {generate: 100, parts_per_board: 400, zipf: 1.0, with_detector: 0.3}
requests: 100
memory: {device_mb: 1000}
"""


def profile(act_mib: float = 4.0, max_batch: int = 8) -> DeviceProfile:
    def arch(key: str, mib: float) -> ArchProfile:
        return ArchProfile(key, 0.001, 0.002, max_batch, int(mib * MiB), int(act_mib * MiB), {"disk": 0.02}, threads=1)
    archs = [arch("resnet10@32/c2", 10), arch("yolov8n.yaml@32/c2", 5)]
    return DeviceProfile({"device": "cpu", "cores": 4}, {DeviceProfile.entry(a.key, 1): a for a in archs})


@pytest.fixture()
def setup():
    w = parse_workload(BIG, "synthetic.yaml")
    prof = profile()
    return w, simulated_zoo(w, prof), {"cpu": prof}


def experts_of(w: Workload) -> float:
    return w.expert_pool_bytes / (10 * MiB)


def test_window_stops_after_the_peak(setup) -> None:
    w, zoo, _ = setup
    calls = []

    def rising_then_falling(x: Workload) -> float:
        n = experts_of(x)
        calls.append(n)
        return 10 + n if n < 40 else 50 - 2 * (n - 40)

    choice = decay_window(w, zoo, rising_then_falling, main_executors=2, min_batch=4 * MiB)
    assert choice.rule == "decay-window" and choice.window is not None
    lo, hi = choice.window
    assert lo <= choice.experts <= hi
    assert "below the trend" in choice.why
    # measured only at window bounds: the peak lies in the last two windows
    assert choice.steps[-3].experts <= 40 <= hi and lo == choice.steps[-2].experts
    # windows shrink by the decay factor 1 - 15/100 (equation 1)
    widths = [s.upper_pct - s.lower_pct for s in choice.steps]
    assert widths[0] == pytest.approx(15) and widths[1] == pytest.approx(15 * 0.85)
    assert len(calls) == len(choice.steps)


def test_flat_curve_runs_to_the_memory_limit_and_keeps_the_best(setup) -> None:
    w, zoo, _ = setup
    choice = decay_window(w, zoo, lambda x: 50.0, main_executors=2, min_batch=4 * MiB)
    assert all(s.predicted_rps is None or s.predicted_rps == pytest.approx(50) for s in choice.steps)
    assert "less than one batch" in choice.why or "whole CDF" in choice.why
    assert choice.batch_bytes_per_executor >= 4 * MiB  # one batch per executor still fits
    assert choice.expert_pool_bytes + 2 * choice.batch_bytes_per_executor <= w.device_bytes


def test_noise_within_the_margin_does_not_stop_the_search(setup) -> None:
    w, zoo, _ = setup
    rng = random.Random(1)
    step = iter(range(100))

    def linear_in_steps_with_noise(x: Workload) -> float:  # equation 2 fits over the step index
        return (10 + 2 * next(step)) * (1 + rng.uniform(-0.01, 0.01))

    choice = decay_window(w, zoo, linear_in_steps_with_noise, main_executors=2, min_batch=4 * MiB)
    assert "below the trend" not in choice.why  # 1% noise never falls 5% short of the trend
    assert len(choice.steps) >= 5


def test_limited_compute_rule_reserves_the_max_batch(setup) -> None:
    w, zoo, _ = setup
    tiny_batches = {"cpu": profile(act_mib=0.5, max_batch=8)}  # 4 MiB per executor << 10% of 1000 MiB
    plan = make_plan(dataclasses.replace(w, executors={"cpu": 2, "cuda": None}, executors_fixed=True), zoo,
                     tiny_batches, evaluate=lambda x: pytest.fail("no sample runs under the limited-compute rule"))
    assert plan.memory.rule == "limited-compute"
    assert plan.memory.batch_bytes_per_executor == 4 * MiB
    assert plan.memory.expert_pool_bytes == w.device_bytes - 2 * 4 * MiB


def test_executor_search_cpu_box_picks_the_best(setup) -> None:
    w, _, _ = setup
    score = {1: 10, 2: 30, 3: 25, 4: 20, 5: 18, 6: 15}
    trials = search_executors(w, lambda x: score[x.executors["cpu"]], has_cuda=False, cores=4)
    assert [(t.cpu, t.throughput_rps) for t in trials] == list(score.items())  # two past the cores: the decline


def test_executor_search_gpu_keeps_best_gpu_count_then_adds_cpu(setup) -> None:
    w, _, _ = setup
    score = {(1, 0): 5, (2, 0): 9, (3, 0): 12, (4, 0): 11, (5, 0): 10, (6, 0): 9, (3, 1): 13, (3, 2): 12.5}
    trials = search_executors(w, lambda x: score[(x.executors["cuda"], x.executors["cpu"])], has_cuda=True, cores=8)
    assert [(t.cuda, t.cpu) for t in trials] == list(score)
    assert max(trials, key=lambda t: t.throughput_rps).cpu == 1


def test_placement_is_round_robin_by_descending_usage(setup) -> None:
    w, zoo, _ = setup
    ranked = ranked_experts(w, zoo)
    usage = w.usage()
    assert [usage.p(e) for e in ranked] == sorted((usage.p(e) for e in ranked), reverse=True)
    pools = placement(w, zoo, [25 * MiB, 25 * MiB])
    assert pools[0][0] == ranked[0] and pools[1][0] == ranked[1]
    assert all(sum(zoo.entries[e].weight_bytes for e in p) <= 25 * MiB for p in pools)


def test_overrides_take_precedence(setup) -> None:
    w, zoo, profiles = setup
    fixed = dataclasses.replace(w, expert_pool_bytes=300 * MiB, pool_fixed=True,
                                executors={"cpu": 3, "cuda": None}, executors_fixed=True)
    plan = make_plan(fixed, zoo, profiles, evaluate=lambda x: pytest.fail("overrides need no search"))
    assert plan.executors == {"cuda": 0, "cpu": 3} and plan.executor_rule.startswith("override")
    assert plan.memory.rule == "override" and plan.workload.expert_pool_bytes == 300 * MiB
