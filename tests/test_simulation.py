"""The simulator: the real scheduler and pools on a virtual clock; checked against the engine."""
from __future__ import annotations

import dataclasses
import json
import re

import pytest

from inspector.coserve.evaluation.bench import run_simulated_bench, simulate_policy
from inspector.coserve.evaluation.boxes import box_profiles
from inspector.coserve.evaluation.report import format_table
from inspector.coserve.evaluation.simcheck import Served, compare, with_feed
from inspector.coserve.evaluation.simulation import rate_oracle
from inspector.coserve.online.policies import get_policy
from inspector.coserve.online.profile import load_box
from inspector.coserve.online.workload import load_workload


def test_simulation_is_deterministic_and_uses_the_policies(tiny) -> None:
    workload, zoo, profiles = tiny
    oracle = rate_oracle(workload)
    a, _ = simulate_policy(workload, zoo, get_policy("coserve"), profiles, oracle)
    b, _ = simulate_policy(workload, zoo, get_policy("coserve"), profiles, oracle)
    samba, _ = simulate_policy(workload, zoo, get_policy("samba"), profiles, oracle)
    assert (a.switches, a.makespan_s) == (b.switches, b.makespan_s)
    assert a.completed == samba.completed == workload.requests
    assert a.switches < samba.switches


def test_simulator_agrees_with_the_engine_on_a_small_workload(tiny) -> None:
    """Same verdicts replayed: switches must agree closely; time only within a sanity factor here.

    The 15% throughput agreement is a benchmark (`inspector bench --check-sim`), not a timed test.
    """
    workload, zoo, profiles = tiny
    for row in compare(workload, zoo, profiles, ["samba", "coserve"]):
        slack = max(3, 0.25 * row.measured_switches)  # a tiny run has few switches: allow a few either way
        assert abs(row.simulated_switches - row.measured_switches) <= slack, row
        assert 0.5 <= row.simulated_rps / row.measured_rps <= 2.0, row


def test_a_check_writes_this_machine_as_a_box_of_what_its_runs_served(tiny, models_dir, tmp_path) -> None:
    """`--check-sim --save-box`: the served costs of every policy's run, pooled, become a box another machine
    simulates on; what the runs served replaces the offline K, B and load latencies, the rest is kept."""
    from inspector.cli.engine import save_served_box

    workload, zoo, profiles = tiny
    served = Served()
    compare(workload, zoo, profiles, ["samba", "coserve"], pooled=served)
    assert served.runs == 2 and served.batches and served.loads["cpu"]
    refit = served.profiles(profiles)
    box = tmp_path / "this-box.json"
    save_served_box(box, refit, workload, ["samba", "coserve"], "torch", served.runs)

    name, devices, doc = load_box(box)
    assert name == "this-box" and doc["memory"]["host_mb"] > 0 and "2 real runs served" in doc["sources"]["devices"]
    assert devices["cpu"].to_json() == refit["cpu"].to_json()
    offline, again = profiles["cpu"].archs, devices["cpu"].archs
    assert offline.keys() == again.keys()
    assert any((a.k_s, a.b_s, a.load_s) != (offline[k].k_s, offline[k].b_s, offline[k].load_s)
               for k, a in again.items())  # refit from the runs, not the offline profile copied
    label, _, boxed, _ = box_profiles(str(box), models_dir, workload)
    assert label.startswith("this-box") and boxed["cpu"].to_json() == refit["cpu"].to_json()
    report = run_simulated_bench(workload, ["samba", "coserve"], models_dir, box=str(box), ceiling=False)
    assert all(r.completed == workload.requests for r in report.runs) and report.verdicts_identical
    assert report.backend == "torch"  # the box's own: what its runs ran on, not the command's default
    assert "ceiling" not in format_table(report)  # not run: no "nan req/s" line
    doc["devices"]["cpu"]["fingerprint"]["backend"] = "onnxruntime"
    (tmp_path / "ort-box.json").write_text(json.dumps(doc))
    ort = run_simulated_bench(workload, ["coserve"], models_dir, box=str(tmp_path / "ort-box.json"), ceiling=False)
    assert ort.backend == "onnxruntime"


def test_a_check_is_fed_from_the_ceiling_it_measures(tiny) -> None:
    """`--check-sim --feed X` checks where the engine sets the pace, as `bench --feed X` measures: the stream is
    offered X times the all-resident ceiling measured first (the flag was ignored by the check before)."""
    workload, zoo, profiles = tiny
    fed, line = with_feed(workload, zoo, profiles, 2.0)
    ceiling = float(re.search(r"\(([\d.]+) req/s measured now\)", line).group(1))
    assert line.startswith("offered: 2x the uncapped ceiling") and ceiling > 0
    assert fed.arrival_interval_s == pytest.approx(1 / (2 * ceiling), rel=0.01)
    assert (fed.requests, fed.seed) == (workload.requests, workload.seed)  # the same stream, offered faster
    with pytest.raises(ValueError, match="positive multiple"):
        with_feed(workload, zoo, profiles, 0.0)


def test_simulating_here_builds_no_zoo_once_its_architectures_are_measured(tiny, models_dir, tmp_path) -> None:
    """`bench --simulate` on this box needs the profile, not the weights: where the saved profile already holds
    every architecture of the workload, the run simulates on a catalogue of its experts (a 240-type workload's zoo
    was 14 GB, built only to be simulated), with the same figures; an architecture not measured yet builds and
    profiles as before."""
    import shutil

    workload, _, _ = tiny
    built = run_simulated_bench(workload, ["samba", "coserve"], models_dir, ceiling=False)
    bare = tmp_path / "models"
    shutil.copytree(models_dir / "profiles", bare / "profiles")
    again = run_simulated_bench(workload, ["samba", "coserve"], bare, ceiling=False)
    assert not (bare / "zoo").exists()
    assert [(r.policy, r.throughput_rps, r.switches) for r in again.runs] == \
        [(r.policy, r.throughput_rps, r.switches) for r in built.runs]
    other = dataclasses.replace(workload, classifier={**workload.classifier, "input_size": 40})  # not measured here
    run_simulated_bench(other, ["coserve"], bare, ceiling=False)
    assert (bare / "zoo").is_dir()


def test_save_box_needs_a_check(capsys) -> None:
    from inspector.cli import main

    assert main(["bench", "--save-box", "x.json", "--simulate"]) == 2
    assert "add --check-sim" in capsys.readouterr().err


def test_paper_scale_task_on_the_shipped_numa_profile(models_dir) -> None:
    report = run_simulated_bench(load_workload("paper-a1"), ["samba", "coserve"], models_dir, box="paper-numa",
                                 ceiling=False)
    samba, coserve = report.runs
    assert samba.completed == coserve.completed == 2500 and report.verdicts_identical
    assert coserve.switches < samba.switches and coserve.throughput_rps > samba.throughput_rps
    assert "paper-numa" in report.device and report.workload["component_types"] == 352


def test_unknown_box_lists_the_shipped_ones(models_dir) -> None:
    with pytest.raises(ValueError, match="h200, paper-numa, paper-uma"):
        run_simulated_bench(load_workload("paper-a1"), ["coserve"], models_dir, box="paper-zzz")


@pytest.mark.parametrize("box", ["paper-numa", "paper-uma"])
def test_shipped_boxes_keep_the_papers_stated_switch_proportions(box: str) -> None:
    """Figure 1's text: an SSD->GPU switch is over 90% of inference latency on both boxes, and even a CPU->GPU
    switch is over 60%; the estimated costs in the box files must not contradict the paper."""
    import json

    from inspector.coserve.evaluation.boxes import find_box

    doc = json.loads(find_box(box).read_text(encoding="utf-8"))
    archs = [a for name, dev in doc["devices"].items() if name.startswith("cuda") for a in dev["archs"].values()]
    assert archs
    for arch in archs:
        batch1 = arch["k_s"] + arch["b_s"]
        loads = arch["load_s"]
        assert loads["disk"] / (loads["disk"] + batch1) > 0.90, arch["key"]
        assert loads["host"] / (loads["host"] + batch1) > 0.60, arch["key"]


def test_the_measured_gpu_box_simulates_the_gpu_it_was_measured_on(models_dir) -> None:
    """h200.json is a GPU window's two measured profiles, unchanged: the default task simulated on it."""
    import dataclasses
    import json

    from inspector.coserve.evaluation.boxes import find_box

    doc = json.loads(find_box("h200").read_text(encoding="utf-8"))
    assert "commit" in doc["measured"] and set(doc["devices"]) == {"cuda:0", "cpu"}
    assert doc["devices"]["cuda:0"]["fingerprint"]["name"] == "NVIDIA H200"
    fast = dataclasses.replace(load_workload("default"), arrival_interval_s=0.00025)
    report = run_simulated_bench(fast, ["samba", "coserve"], models_dir, box="h200", ceiling=False)
    samba, coserve = report.runs
    assert "h200" in report.device and report.verdicts_identical and samba.completed == coserve.completed == 1000
    assert coserve.switches < samba.switches and coserve.throughput_rps > 2 * samba.throughput_rps


def test_the_first_batch_after_a_switch_pays_the_profiled_cold_cost(tiny) -> None:
    """A profile's cold_s is charged once per load, to the batch that first runs on it: samba (one executor, no
    prefetch, so no load overlaps a batch) computes about cold_s longer per load that ran, and schedules the same.
    Compute, not the makespan, and every request at once in batches of one, in both runs: otherwise a slower run
    also fills what was a wait for arrivals in the faster one and lets requests gather into fewer batches, by amounts
    that depend on the measured profile (in CI the makespan showed 33 of 37 switches' worth)."""
    import copy
    import dataclasses

    tiny_workload, zoo, measured = tiny
    workload = dataclasses.replace(tiny_workload, arrival_interval_s=0.0)
    cold = 0.05
    profiles = copy.deepcopy(measured)
    for prof in profiles.values():  # costs of its own, not this machine's: the run is the same wherever it runs
        prof.concurrency = []  # (CI once read 25 of 37 loads' worth here on a profile it had measured itself)
        for arch in prof.archs.values():
            arch.max_batch, arch.k_s, arch.b_s, arch.cold_s = 1, 0.002, 0.001, 0.0
            arch.load_s = {tier: 0.01 for tier in arch.load_s}
    chilled = copy.deepcopy(profiles)
    for prof in chilled.values():
        for arch in prof.archs.values():
            arch.cold_s = cold
    oracle = rate_oracle(workload)
    warm, _ = simulate_policy(workload, zoo, get_policy("samba"), profiles, oracle)
    slow, _ = simulate_policy(workload, zoo, get_policy("samba"), chilled, oracle)
    assert slow.switches == warm.switches > 0

    def compute_s(run) -> float:  # noqa: ANN001 - a RunReport; samba runs one executor
        return run.time_shares["compute"] * run.makespan_s

    extra = compute_s(slow) - compute_s(warm)
    assert cold * warm.switches * 0.95 <= extra <= cold * (warm.switches + len(zoo.entries)) * 1.01, extra


def test_a_refit_reads_the_cold_cost_apart_from_k_and_b(tiny) -> None:
    """Served batches flagged as the first after a switch refit cold_s; the warm ones alone refit K and B."""
    from inspector.coserve.online.profile import served_profile

    _, _, profiles = tiny
    prof = profiles["cpu"]
    key = next(iter(prof.archs.values())).key
    k, b, cold = 0.002, 0.001, 0.0007
    batches = [(key, n, k * n + b, 1.0, False) for n in (1, 2, 4)] + [(key, n, k * n + b + cold, 1.0, True)
                                                                       for n in (1, 3)]
    refit = served_profile(prof, batches, [], 1).get(key, 1)
    assert refit.k_s == pytest.approx(k) and refit.b_s == pytest.approx(b) and refit.cold_s == pytest.approx(cold)
    only_cold = served_profile(prof, [b_ for b_ in batches if b_[4]], [], 1).get(key, 1)
    assert only_cold.cold_s == 0.0  # no warm batch to tell them apart: K and B took the cold ones in
    untouched = served_profile(prof, [b_ for b_ in batches if not b_[4]], [], 1).get(key, 1)
    assert untouched.cold_s == prof.get(key, 1).cold_s  # nothing cold served: the profile's stands


def test_the_engine_marks_each_loads_first_batch_cold(tiny) -> None:
    """The real executors flag the batch that first runs on a loaded expert, as the simulator charges it: samba loads
    only for the batch about to run, so each of its switches is followed by exactly one such batch."""
    from inspector.coserve.evaluation.bench import run_policy

    workload, zoo, profiles = tiny
    seen = []
    report, _ = run_policy(workload, zoo, get_policy("samba"), {"cpu": profiles["cpu"]}, observe=seen.append)
    engine = seen[0]
    served = [b for ex in engine.executors for b in ex.served]
    cold = sum(1 for b in served if b[4])
    initial = sum(m.stats.initial_loads for m in engine.managers.values())
    assert report.switches > 0 and report.switches <= cold <= report.switches + initial
    assert len(served) > cold  # and the batches after it on the same expert are warm
