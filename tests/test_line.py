"""The inspection line end to end with a tiny trained demo zoo: rules -> crops -> engine -> verdicts -> DB."""
from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from inspector.app.line import LineConfig
from inspector.app.run import run_line
from inspector.app.service import ServiceConfig
from inspector.cli import main
from inspector.ingest.sources import SyntheticSource
from inspector.results.store import ResultStore, sqlite_url
from inspector.routing.rules import parse_rules
from inspector.training.classifier import to_batch
from inspector.training.demo_zoo import _retries, build_demo_zoo
from inspector.training.jobs import SEED_STEP, TrainJob, run_job
from inspector.training.labelled.evaluate import served_module
from inspector.training.labelled.metrics import calls
from inspector.training.samples import collect

from .conftest import DEMO_RULES as RULES
from .conftest import TINY_RECIPE
from .test_routing_rules import GOOD


def test_demo_zoo_manifest_records_training(demo) -> None:
    _, zoo = demo
    assert set(zoo.entries) == {"cls-R1K", "cls-D1N", "det-p"}
    for e in zoo.entries.values():
        assert e.val_accuracy is not None and 0.0 <= e.val_accuracy <= 1.0
        assert e.weights_sha256 and len(e.weights_sha256) == 64 and e.train_samples > 0
        assert e.train_seed == 0  # one run each: no floor in the tiny recipe
    assert zoo.entries["det-p"].classes == ("in_place", "reversed")


def test_each_demo_classifier_passes_parts_at_the_margin_its_validation_crops_chose(demo) -> None:
    """The operating point lies between the validation's good parts and defects (classifier.operating_margin),
    and miscalls no more of those crops than the top class would."""
    _, zoo = demo
    val = collect([RULES], TINY_RECIPE["val_per_type"], 1, TINY_RECIPE["rates"])  # the build's validation boards
    for name in ("cls-R1K", "cls-D1N"):
        arch, module = served_module(zoo, name)
        margin = zoo.entries[name].spec["good_margin"]
        assert arch.good_margin == margin
        crops = val.by_classifier[name]
        x, y = to_batch(arch, crops)
        with torch.inference_mode():
            logits = module(x).float().numpy()
        truth = (y.numpy() != 0)
        at_margin = (calls(logits, margin) != 0) != truth
        at_top = (calls(logits, None) != 0) != truth
        assert at_margin.sum() <= at_top.sum(), name


def test_an_expert_short_of_its_floor_is_trained_again_with_another_seed_and_the_best_run_kept() -> None:
    samples = collect([RULES], 24, seed=5, cap=48)
    name = sorted(samples.by_classifier)[0]
    crops = samples.by_classifier[name]
    job = TrainJob(name, "classifier", RULES.classifier_spec, crops[:16], crops[16:], epochs=1, seed=3,
                   augment=0.0, floor=1.01, attempts=3)  # a floor no run reaches: every attempt is made
    best = run_job(job)
    runs = sorted([best.val_accuracy, *best.other_runs])
    assert len(best.other_runs) == 2 and best.val_accuracy == runs[-1]
    assert best.seed in (3, 3 + SEED_STEP, 3 + 2 * SEED_STEP)
    once = run_job(replace(job, floor=0.0))  # any run reaches it: trained once, with the job's own seed
    assert once.other_runs == () and once.seed == 3
    unjudged = run_job(replace(job, val=[]))  # no held-out crops: nothing to judge a run by, so one run
    assert unjudged.other_runs == () and unjudged.seed == 3
    said = _retries(replace(job, floor=0.99), replace(best, val_accuracy=0.95, other_runs=(0.9, 0.93)))
    assert "3 runs (the others reached 0.900, 0.930)" in said and "WARNING: still below 0.990" in said
    assert _retries(job, once) == ""  # one run: the usual log line only


def test_demo_zoo_is_cached(demo) -> None:
    root, zoo = demo
    again = build_demo_zoo(root / "models" / "demo", [RULES], recipe=TINY_RECIPE)
    assert again.build_key == zoo.build_key
    assert {e.weights_sha256 for e in again.entries.values()} == {e.weights_sha256 for e in zoo.entries.values()}


def _run(demo, policy: str, tmp_path: Path, boards: int = 6):
    root, zoo = demo
    store = ResultStore(sqlite_url(tmp_path / f"{policy}.sqlite"))
    service, _ = run_line(RULES, zoo, root / "models", SyntheticSource(RULES, boards, seed=77),
                          ServiceConfig(LineConfig(policy=policy, device_mb=40)), store, tmp_path / policy,
                          lambda _m: None)
    return service.line, service.detection, service.writer, store


def test_every_board_and_part_is_stored_and_verdicts_do_not_depend_on_policy(demo, tmp_path: Path) -> None:
    verdicts, scores = {}, {}
    for policy in ("coserve", "samba"):
        line, detection, writer, store = _run(demo, policy, tmp_path)
        assert line.stats.boards == 6 and writer.status().written == 6
        assert store.count() == (6, 18)
        assert detection.good + detection.defective == 18
        # boards finish, and are stored, in the order the policy's scheduling completes them
        parts = sorted((i.board_serial, p.ref, p.verdict, p.defect_class, p.score)
                       for i in store.inspections() for p in i.parts)
        verdicts[policy] = [row[:4] for row in parts]
        scores[policy] = [row[4] for row in parts]
        assert all(i.ruleset_version == RULES.version for i in store.inspections())
    assert verdicts["coserve"] == verdicts["samba"]
    assert scores["coserve"] == pytest.approx(scores["samba"], abs=1e-4)  # batch sizes differ: float rounding


def test_inspector_run_and_export_from_the_command_line(demo, tmp_path: Path, capsys) -> None:
    root, zoo = demo
    rules = tmp_path / "mini.yaml"
    rules.write_text(GOOD)
    data = tmp_path / "data"
    assert main(["--models", str(root / "models"), "run", "--rules", str(rules), "--zoo", str(zoo.root),
                 "--boards", "3", "--data", str(data), "--device-mb", "40"]) == 0
    out = capsys.readouterr().out
    assert "3 boards, 9 parts" in out and "parts/s" in out and "defect detection rate" in out
    assert main(["export", "--csv", str(tmp_path / "out.csv"), "--data", str(data)]) == 0
    rows = list(csv.DictReader((tmp_path / "out.csv").open()))
    assert len(rows) == 9 and {r["ref"] for r in rows} == {"R1", "R2", "D1"}


def test_a_rule_set_naming_experts_the_zoo_lacks_is_refused(demo, tmp_path: Path) -> None:
    root, zoo = demo
    other = parse_rules(GOOD.replace("D1N:", "D2N:"), "other.yaml")
    from inspector.app.line import Line

    with pytest.raises(ValueError, match="cls-D2N"):
        Line(other, zoo, {}, LineConfig())


def test_an_expert_whose_weights_were_swapped_fails_alone(demo, tmp_path: Path) -> None:
    """Weights are checked against the sha256 recorded at training on first read: a swapped file fails that
    expert only (its parts get `error` with both digests), every other part is inspected, health names it."""
    import shutil

    from inspector.experts.zoo import Zoo
    from inspector.kiosk.health import health

    root, zoo = demo
    copy = tmp_path / "zoo"
    shutil.copytree(zoo.root, copy)
    swapped = Zoo.load(copy)
    a, b = (swapped.path_of(n) for n in ("cls-R1K", "cls-D1N"))  # the same architecture: it loads, but wrong
    shutil.copyfile(b, a)
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    service, _ = run_line(RULES, swapped, root / "models", SyntheticSource(RULES, 3, seed=78),
                          ServiceConfig(LineConfig(device_mb=40)), store, tmp_path / "data", lambda _m: None)
    parts = [p for i in store.inspections() for p in i.parts]
    bad = [p for p in parts if p.expert == "cls-R1K"]
    assert bad and all(p.verdict == "error" and "not the weights this expert was trained with" in p.error for p in bad)
    assert all(p.verdict != "error" for p in parts if p.component_type != bad[0].component_type)
    assert set(service.line.engine.failed_experts()) == {"cls-R1K"}
    from inspector.app.snapshot import snapshot

    snap = snapshot(service)
    snap["state"] = "running"
    reasons = health(snap, 0.0, 60)["reasons"]
    assert any("expert cls-R1K failed" in r for r in reasons), reasons


def test_an_api_edit_is_applied_once_while_the_watcher_polls(demo, tmp_path: Path) -> None:
    """An API edit writes the watched file and applies it; the watcher polling the same file at that moment
    must not take the new file for an edit of its own and apply it a second time."""
    import threading

    from inspector.app.line import Line
    from inspector.app.rules_watch import RulesWatcher
    from inspector.app.run import line_profiles

    root, zoo = demo
    path = tmp_path / "rules.yaml"
    path.write_text(GOOD)
    profiles = line_profiles(zoo, root / "models", lambda _m: None)
    watcher = RulesWatcher(Line(parse_rules(GOOD, str(path)), zoo, profiles, LineConfig(device_mb=40)), path,
                           poll_s=0)
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            watcher.check()

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        for i in range(20):
            watcher.submit(f"{GOOD}\n# edit {i}\n")
    finally:
        stop.set()
        poller.join()
    assert watcher.state.applied == 20 and watcher.state.refused == 0
