"""CoServe as the paper has it beside our extras: per-executor pools, the ablation ladder, recipes and the
switch floor, box memory, the simulator's shared compute, where the time goes, repeats, sweeps and charts."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from inspector.coserve.evaluation.bench import run_policy, simulate_policy
from inspector.coserve.evaluation.boxes import fit_to_box
from inspector.coserve.evaluation.paper import format_tasks, summarise
from inspector.coserve.evaluation.plots import plot_bench, plot_sweep
from inspector.coserve.evaluation.report import BenchReport, RunReport, format_table, median_report
from inspector.coserve.evaluation.simulation import Simulator, rate_oracle
from inspector.coserve.evaluation.sweep import SweepReport, parse_sweep, resized
from inspector.coserve.online.executor_plan import build_plan
from inspector.coserve.online.policies import ABLATION, get_policy
from inspector.coserve.online.pools import pool_layout
from inspector.coserve.online.profile import DeviceProfile
from inspector.coserve.online.queue import ExecutorQueue
from inspector.coserve.online.request import Request, Route
from inspector.coserve.online.workload import MiB, parse_workload
from inspector.runtime.devices import Device
from inspector.yamlio import ConfigError

from .conftest import TINY, tiny_workload

CPU = Device("cpu")


def test_pools_are_per_executor_in_the_paper_and_per_device_in_ours() -> None:
    shared = pool_layout([CPU, CPU, CPU], {CPU: 300}, shared=True)
    assert [(p.name, p.nbytes, p.executors) for p in shared] == [("pool", 300, (0, 1, 2))]
    paper = pool_layout([CPU, CPU, CPU], {CPU: 300}, shared=False)
    assert [(p.name, p.nbytes, p.executors) for p in paper] == [("pool-0", 100, (0,)), ("pool-1", 100, (1,)),
                                                                ("pool-2", 100, (2,))]


def test_the_ladder_adds_one_mechanism_per_step_from_none_to_coserve() -> None:
    def mechanisms(name: str) -> dict[str, object]:
        p = get_policy(name)
        return {"assign": p.make_assigner.__name__, "arrange": p.arranger.name, "evict": p.evictor.name,
                "prefetch": p.prefetch, "pools": p.shared_pool}

    steps = [mechanisms(name) for name in ABLATION]
    assert ABLATION[0] == "coserve-none" and ABLATION[3] == "coserve-paper" and ABLATION[-1] == "coserve"
    for before, after in zip(steps, steps[1:]):
        changed = [k for k in before if before[k] != after[k]]
        assert len(changed) == 1, (before, after)
    paper = steps[3]
    assert paper == {"assign": "MinMakespan", "arrange": "group", "evict": "two-stage", "prefetch": False,
                     "pools": False}


def test_paper_arranging_never_groups_behind_the_running_batch() -> None:
    def request(i: int, expert: str) -> Request:
        return Request(i, expert, Route((expert,)), None, 0.0)  # type: ignore[arg-type]

    for behind, expected in ((False, ["b", "a"]), (True, ["a", "b"])):
        q = ExecutorQueue()
        q.join(request(0, "a"), behind_running=behind)
        q.take_batch(1)  # "a" runs now
        q.join(request(1, "b"), behind_running=behind)
        q.join(request(2, "a"), behind_running=behind)
        assert q.upcoming_experts() == expected


def cpu_only(profiles: dict) -> dict:
    """The CPU's profile alone: these tests count the tiny workload's two CPU executors (a GPU box adds its own)."""
    return {k: v for k, v in profiles.items() if k == "cpu"}


def test_coserve_paper_serves_from_per_executor_pools_with_the_same_verdicts(tiny) -> None:
    workload, zoo, profiles = tiny
    profiles = cpu_only(profiles)
    seen = []
    report, results = run_policy(workload, zoo, get_policy("coserve-paper"), profiles, observe=seen.append)
    engine = seen[0]
    assert len(engine.managers) == len(engine.executors) == 2
    assert {ex.manager.name for ex in engine.executors} == set(engine.managers)
    pool = workload.expert_pool_bytes // 2
    assert all(m.ledger.capacity == pool for m in engine.managers.values())
    _, ours = run_policy(workload, zoo, get_policy("coserve"), profiles)
    assert {i: r.verdict for i, r in results.items()} == {i: r.verdict for i, r in ours.items()}
    assert report.completed == workload.requests and report.floor <= report.switches


RECIPES = TINY.split("components:")[0] + (
    "components: {generate: 30, recipes: 3, types_per_recipe: 8, parts_per_board: 20, boards_per_lot: 2,\n"
    "             with_detector: 0.5}\nboards: 5\narrival_interval_ms: 0\nmemory: {expert_pool_mb: 45}\n"
)


def test_a_bench_refuses_per_executor_pools_smaller_than_the_largest_expert(tiny) -> None:
    from inspector.coserve.evaluation.bench import check_budget

    workload, _, profiles = tiny
    profiles = cpu_only(profiles)
    small = dataclasses.replace(workload, expert_pool_bytes=30 * MiB)  # 15 MiB each: the 18.7 MiB classifier fits not
    check_budget(small, ["samba", "coserve"], profiles)  # one pool (samba) or one shared pool: fine
    with pytest.raises(ValueError, match="coserve-paper gives each of its 2 executors its own pool: 15 MiB each"):
        check_budget(small, ["coserve", "coserve-paper"], profiles)


def test_a_bench_refuses_a_pool_that_leaves_its_executors_no_room_for_one_sample(tiny) -> None:
    """An expert pool grown up to the device's size left each executor bytes for its batches, and every batch was
    cut to one request whatever memory it overran: a sweep of expert_pool_mb ran past device_mb and reported a
    third of the throughput. Refused now, the sweep before its first run."""
    from inspector.coserve.evaluation.bench import check_budget
    from inspector.coserve.evaluation.sweep import run_sweep
    from inspector.errors import UnknownChoice

    workload, _, profiles = tiny
    profiles = cpu_only(profiles)
    roomy = dataclasses.replace(workload, device_bytes=100 * MiB, expert_pool_bytes=45 * MiB, pool_fixed=True)
    check_budget(roomy, ["samba", "coserve"], profiles)
    full = dataclasses.replace(roomy, expert_pool_bytes=int(99.9 * MiB))
    with pytest.raises(ValueError, match=r"samba: each executor on cpu has 0\.10 MiB for batches .* less than one "
                                         r"sample of .*lower memory.expert_pool_mb or raise memory.device_mb"):
        check_budget(full, ["samba", "coserve"], profiles)
    benched: list[float] = []
    with pytest.raises(UnknownChoice, match=r"expert_pool_mb: 100, 120 MiB leave no room for batches in the "
                                            r"workload's device_mb \(100\)"):
        run_sweep(roomy, "expert_pool_mb", [40, 100, 120], lambda w: benched.append(w.expert_pool_bytes))
    assert benched == []  # refused before the first size ran


def test_recipes_carry_subsets_and_the_stream_follows_the_lots() -> None:
    w = parse_workload(RECIPES, "recipes.yaml")
    recipes = w.board_recipes()
    assert len(recipes) == 3 and all(len(r.parts) == 8 for r in recipes)
    assert [r.name for r in w.board_plan()] == ["recipe-1", "recipe-1", "recipe-2", "recipe-2", "recipe-3"]
    assert w.requests == sum(r.parts_per_board for r in w.board_plan())
    stream = w.stream()
    first = {name for name, _ in recipes[0].parts}
    assert {r.component for r in stream[: 2 * recipes[0].parts_per_board]} == first
    touched = {r.component for r in stream}
    assert len(touched) < len(w.components)  # a run touches the recipes it passes through, not the family
    counts = {c.name: c.count for c in w.components}
    assert all(counts[name] >= n for r in recipes for name, n in r.parts)
    usage = w.usage()
    assert sum(usage.probability.values()) == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="types_per_recipe and boards_per_lot need recipes"):
        parse_workload(RECIPES.replace("recipes: 3, ", ""), "recipes.yaml")


def test_the_floor_is_what_no_policy_can_avoid(tiny) -> None:
    workload, zoo, profiles = tiny
    small = dataclasses.replace(workload, expert_pool_bytes=40 * MiB)  # 20 MiB per executor: one classifier each
    oracle = rate_oracle(small)
    floors = []
    for name in ("samba", "coserve-paper", "coserve"):
        report, results = simulate_policy(small, zoo, get_policy(name), profiles, oracle)
        touched = {e for r in results.values() for e, _ in r.steps}
        assert 0 < report.floor <= len(touched) and report.floor <= report.switches
        floors.append(report.floor)
    assert "floor" in format_table(BenchReport(small.describe(), "cpu", 1.0, [report], True))


def test_a_unified_box_has_one_budget_and_no_host_cache() -> None:
    w = tiny_workload(device_bytes=80 * MiB, pool_fixed=False, cpu_pool_bytes=20 * MiB, host_cache_bytes=500 * MiB)
    uma = fit_to_box(w, {"memory": {"unified_mb": 200, "reserved_mb": 40}, "executors": {"cuda": 2, "cpu": 1}}, "u")
    assert uma.host_cache_bytes == 0
    assert uma.device_bytes == 140 * MiB and uma.expert_pool_bytes == int(0.75 * 140 * MiB)
    assert uma.executors["cpu"] == 2 and not uma.executors["cuda"]  # fixed by the workload: the box's do not apply
    open_counts = fit_to_box(dataclasses.replace(w, executors_fixed=False), {"executors": {"cuda": 2, "cpu": 1}}, "u")
    assert open_counts.executors == {"cuda": 2, "cpu": 1}
    with pytest.raises(ValueError, match="exceed the 100 MiB of unified memory"):
        fit_to_box(tiny_workload(expert_pool_bytes=90 * MiB, cpu_pool_bytes=20 * MiB),
                   {"memory": {"unified_mb": 140, "reserved_mb": 40}}, "u")
    with pytest.raises(ValueError, match="host RAM"):
        fit_to_box(w, {"memory": {"host_mb": 100}}, "n")


def test_executors_on_one_device_share_its_compute_in_the_simulator(tiny) -> None:
    workload, zoo, profiles = tiny
    policy = get_policy("coserve")

    def makespan(curve: list[float]) -> float:
        prof = dataclasses.replace(profiles["cpu"], concurrency=curve)
        plan = build_plan(workload, policy, {"cpu": prof}, all_resident=True)
        sim = Simulator(zoo, workload.usage(), policy, plan, {"cpu": prof}, rate_oracle(workload))
        sim.preload(list(zoo.entries), every_pool=True)
        run = sim.run(workload.stream(), 0.0, place=False)
        assert run.time.compute > 0 and run.time.batches > 0
        return run.makespan_s

    independent, shared = makespan([1.0, 2.0]), makespan([1.0, 1.0])
    assert shared > 1.5 * independent  # two executors that cannot overlap take about twice as long
    assert DeviceProfile({}, {}, [1.0, 1.5]).speedup(5) == 1.5 and DeviceProfile({}, {}).speedup(3) == 3.0
    assert DeviceProfile({}, {}, [1.0, 1.5]).solo_s(2.0, 2) == pytest.approx(1.5)


def test_where_the_time_goes_adds_up(tiny) -> None:
    workload, zoo, profiles = tiny
    report, _ = run_policy(workload, zoo, get_policy("coserve-paper"), profiles)
    shares = report.time_shares
    assert set(shares) == {"compute", "load", "blocked", "idle", "other", "slowed"}
    assert 0 <= shares["slowed"] <= shares["compute"]  # a part of compute, not beside it
    kinds = {k: v for k, v in shares.items() if k != "slowed"}
    assert shares["compute"] > 0 and sum(kinds.values()) == pytest.approx(1.0, abs=0.02)
    assert report.mean_batch >= 1


def row(policy: str, rps: float, switches: int, floor: int = 3) -> RunReport:
    return RunReport(policy, rps, switches, 10, 0, 1.0, 2.0, 0.1, 0.01, floor=floor,
                     time_shares={"compute": 0.5, "load": 0.5})


def test_repeats_report_medians_and_their_spread() -> None:
    med = median_report([row("coserve", 10, 5), row("coserve", 14, 7), row("coserve", 11, 9)])
    assert med.throughput_rps == 11 and med.switches == 7 and med.rps_samples == [10, 14, 11]
    report = BenchReport({"name": "w", "component_types": 2, "requests": 10, "expert_pool_mb": 1,
                          "experts_total_mb": 2}, "cpu", 20.0, [row("samba", 2, 20), med], True, repeat=3)
    table = format_table(report)
    assert "medians of 3 interleaved runs" in table and "±18.2%" in table
    assert "coserve reaches 55% of it)" in table  # no ceiling run of its own: no rounds to pair
    # with the ceiling rerun every round, coserve is also set against the ceiling of its own round
    ceiling = median_report([row("coserve (all resident)", r, 0) for r in (20, 16, 22)])
    report.ceiling, report.ceiling_rps = ceiling, ceiling.throughput_rps
    table = format_table(report)
    assert "coserve reaches 55% of it; round by round 50%, 88%, 50%, median 50%)" in table, table


def test_sweep_parses_sizes_and_resizes_the_device() -> None:
    assert parse_sweep("device_mb=300,400") == ("device_mb", [300.0, 400.0])
    for bad, message in (("pool=3", "PARAMETER one of"), ("device_mb=a,b", "must be numbers"),
                         ("device_mb=0", "above 0")):
        with pytest.raises(ValueError, match=message):
            parse_sweep(bad)
    w = tiny_workload(device_bytes=80 * MiB, pool_fixed=False)
    assert resized(w, "device_mb", 200).expert_pool_bytes == int(0.75 * 200 * MiB)
    assert resized(w, "expert_pool_mb", 30).expert_pool_bytes == 30 * MiB


def test_charts_are_written_as_png(tmp_path: Path) -> None:
    report = BenchReport({"name": "w"}, "cpu", 20.0, [row("samba", 2, 20), row("coserve", 12, 4)], True)
    sweep = SweepReport("device_mb", [100, 200], [report, report])
    for path in (plot_bench(report, tmp_path / "a.png"), plot_sweep(sweep, tmp_path / "s" / "b.png")):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def test_paper_task_summary_names_the_band_and_the_floor() -> None:
    report = BenchReport({"name": "paper-a1"}, "paper-numa", 300.0,
                         [row("samba", 10, 600, 40), row("coserve-paper", 80, 100, 40), row("coserve", 200, 60, 44)],
                         True)
    text = format_tasks(summarise("paper-a1", report, ("coserve-paper", "coserve")), "paper-numa")
    assert "8.00x     in 4.5-10.5" in text and "20.00x  above 4.5-10.5" in text
    assert text.splitlines()[3].endswith("40           30.00x")  # the ceiling, 30x samba: no policy passes it
    assert "coserve-paper: throughput in the paper's band on 1 of 1 tasks, switch reduction on 1 of 1" in text
