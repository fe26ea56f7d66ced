"""The engine on real tiny experts: follow-ups, policy-independent results, prefetch, pinning, bad input."""
from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from inspector.coserve.evaluation.bench import check_budget, run_policy
from inspector.coserve.online.engine import Engine
from inspector.coserve.online.executor_plan import build_plan
from inspector.coserve.online.expert_manager import ExpertManager
from inspector.coserve.online.policies import POLICY_NAMES, get_policy
from inspector.coserve.online.pools import PoolSpec, pool_arena
from inspector.coserve.online.request import Request, Route
from inspector.experts.zoo import Zoo
from inspector.runtime.arena import aligned
from inspector.runtime.devices import Device
from inspector.runtime.memory import MemoryLedger
from inspector.runtime.store import TieredStore

from .conftest import tiny_workload


def _plain_state(zoo: Zoo, name: str) -> dict[str, torch.Tensor]:
    store = TieredStore()
    store.register(name, zoo.path_of(name))
    return store.fetch(name, Device("cpu"))[0]


def test_follow_up_requests_go_to_the_shared_detector(tiny) -> None:
    workload, zoo, profiles = tiny
    report, results = run_policy(workload, zoo, get_policy("coserve"), profiles)
    assert report.completed == workload.requests and report.failed == 0
    comps = {c.name: c for c in workload.components}
    two_step = 0
    for res in results.values():
        comp = comps[res.component]
        cls_name, cls_pred = res.steps[0]
        assert cls_name == comp.classifier
        if cls_pred.passed and comp.detector:
            assert [e for e, _ in res.steps] == [comp.classifier, comp.detector]
            two_step += 1
        else:
            assert len(res.steps) == 1
        assert res.verdict == ("pass" if all(p.passed for _, p in res.steps) else "fail")
    assert two_step > 0 and any(r.verdict == "fail" for r in results.values())


def test_same_request_same_result_under_every_policy(tiny) -> None:
    workload, zoo, profiles = tiny
    reference = None
    for name in POLICY_NAMES:
        _, results = run_policy(workload, zoo, get_policy(name), profiles)
        summary = {i: (r.verdict, [(e, p.label, p.passed) for e, p in r.steps]) for i, r in results.items()}
        scores = {i: [p.score for _, p in r.steps] for i, r in results.items()}
        if reference is None:
            reference = (summary, scores)
            continue
        assert summary == reference[0], f"{name} changed a verdict"
        for i, s in scores.items():
            assert s == pytest.approx(reference[1][i], abs=1e-4), f"{name} changed a score of request {i}"


def test_switches_differ_but_every_policy_completes(tiny) -> None:
    workload, zoo, profiles = tiny
    reports = {n: run_policy(workload, zoo, get_policy(n), profiles)[0] for n in ("samba", "coserve")}
    assert all(r.completed == workload.requests and r.failed == 0 for r in reports.values())
    assert reports["coserve"].switches < reports["samba"].switches


def _manager(zoo: Zoo, pool_bytes: int, policy: str = "coserve", arena: bool = False,
             next_use: Callable[[], dict[str, int]] = dict) -> ExpertManager:
    store = TieredStore()
    for name in zoo.entries:
        store.register(name, zoo.path_of(name))
    usage = tiny_workload().usage()
    spec = PoolSpec("pool", Device("cpu"), pool_bytes, (0,))
    return ExpertManager("pool", Device("cpu"), MemoryLedger("pool", pool_bytes), store, zoo,
                         get_policy(policy).evictor, usage, threading.RLock(), next_use=next_use,
                         arena=pool_arena(spec, zoo) if arena else None)


def test_switches_read_into_the_pools_own_memory_and_give_it_back(tiny) -> None:
    """Slots are reused switch after switch: no leak, no fresh buffer, and no expert reads another's weights."""
    _, zoo, _ = tiny
    names = [n for n in zoo.entries if n.startswith("cls-")]
    one = max(zoo.entries[n].weight_bytes for n in names)
    manager = _manager(zoo, 2 * one, arena=True)
    assert manager.arena is not None
    x = torch.rand(2, 3, 32, 32)
    reference = {}
    with torch.inference_mode():
        for n in names:  # each alone, through the store's plain path
            reference[n] = zoo.architecture(n).materialize(_plain_state(zoo, n), torch.device("cpu"))(x)
        for n in names * 3:  # a pool of two: every acquire past the second is a switch into a freed slot
            out = manager.acquire(n)(x)
            manager.release(n)
            assert torch.equal(out, reference[n]), f"{n} computed with weights not its own"
    assert manager.stats.switches >= 3 * len(names) - 2 and manager.stats.unpooled_loads == 0
    held = sum(aligned(zoo.path_of(n).stat().st_size) for n in manager.resident())
    assert len(manager.resident()) == 2 and manager.arena.used == held  # only the residents hold slots
    manager.close()


def test_runtime_switches_read_into_the_pools_own_memory_too(tiny) -> None:
    """ONNX Runtime's shared-graph weights land in the pool's slots as torch's do (no fresh buffer a switch), stay
    there while resident, and a freed slot overwritten by the next expert never changes another's predictions."""
    pytest.importorskip("onnxruntime")
    from inspector.experts.backends import get_backend
    from inspector.experts.backends.base import Weights

    _, zoo, _ = tiny
    backend = get_backend("onnxruntime", threads=1)
    names = [n for n in zoo.entries if n.startswith("cls-")]
    one = max(zoo.entries[n].weight_bytes for n in names)
    manager = _manager(zoo, 2 * one, arena=True)
    manager.backend = backend
    assert manager.arena is not None
    x = torch.rand(2, 3, 32, 32)
    home = zoo.root / "runtime"
    reference = {}
    for n in names:  # each alone, in memory of its own
        arch = zoo.architecture(n)
        loaded, _ = backend.load(arch, n, zoo.entries[n].weights_sha256, Weights.of_file(zoo.path_of(n)),
                                 torch.device("cpu"), home)
        assert not backend.in_pool_memory(loaded)
        reference[n] = [(p.label, p.score) for p in backend.run(arch, loaded, x)]
    for n in names * 3:  # a pool of two: every acquire past the second is a switch into a freed slot
        loaded = manager.acquire(n)
        assert backend.in_pool_memory(loaded)
        got = [(p.label, p.score) for p in backend.run(zoo.architecture(n), loaded, x)]
        manager.release(n)
        assert got == reference[n], f"{n} computed with weights not its own"
    assert manager.stats.switches >= 3 * len(names) - 2 and manager.stats.unpooled_loads == 0
    held = sum(aligned(next(home.glob(f"{n}-*.weights.safetensors")).stat().st_size) for n in manager.resident())
    assert len(manager.resident()) == 2 and manager.arena.used == held  # only the residents hold slots
    manager.close()


def test_an_executor_gives_torch_one_thread_where_a_runtime_computes(tiny) -> None:
    """Torch only prepares the crops and reads out predictions beside ONNX Runtime: given the executor's threads, its
    OpenMP workers spun on the cores the runtime's pool wanted (samba's detector batches ran 2-6x slower on 2 cores).
    Where torch runs the experts it gets them all."""
    pytest.importorskip("onnxruntime")
    from inspector.coserve.online.executor import Executor
    from inspector.experts.backends import get_backend

    workload, zoo, profiles = tiny
    seen: dict[str, int] = {}
    for name in ("torch", "onnxruntime"):
        backend = get_backend(name, threads=2)
        real_run = backend.run

        def run(arch, loaded, batch, real_run=real_run, name=name):  # noqa: ANN001, ANN202 - the backend's own run
            seen[name] = torch.get_num_threads()
            return real_run(arch, loaded, batch)

        backend.run = run  # type: ignore[method-assign]
        manager = _manager(zoo, 1 << 30)
        manager.backend = backend
        lock, done = threading.RLock(), threading.Event()
        executor = Executor(0, Device("cpu"), manager, profiles["cpu"], 1 << 30, 2, False, lock,
                            lambda *args, done=done: done.set())
        with lock:
            executor.queue.join(Request(0, "R", Route(("cls-R",)), workload.image(workload.components[0], 0), 0.0))
        executor.start()
        assert done.wait(120), f"{name}: the batch never finished"
        executor.stop()
        executor.join(10)
        manager.close()
    assert seen == {"torch": 2, "onnxruntime": 1}


def test_prefetch_loads_in_the_background_while_a_batch_runs(tiny) -> None:
    _, zoo, _ = tiny
    one = zoo.entries["cls-R"].weight_bytes
    manager = _manager(zoo, 2 * one)
    module = manager.acquire("cls-R")  # the running batch's expert, pinned
    assert manager.prefetch("cls-C")
    assert manager.has("cls-C")  # on its way: the scheduler sees no further switch
    with torch.inference_mode():  # compute goes on while the loader thread reads
        module(torch.rand(2, 3, 32, 32))
    manager.release("cls-R")
    manager.acquire("cls-C")  # waits for the prefetch if it has begun (else loads it itself); no second load
    manager.release("cls-C")
    stats = manager.stats
    assert stats.switches == 2 and stats.prefetches + stats.prefetch_claimed == 1
    assert stats.prefetch_used == stats.prefetches
    manager.close()


def test_an_expert_wanted_while_its_prefetch_still_queues_is_loaded_at_once(tiny) -> None:
    """A prefetch waits behind the loader's earlier work; an executor that needs its expert first does not wait
    behind that work too: it loads the expert itself, and the loader skips it (one load, not two)."""
    _, zoo, _ = tiny
    one = max(zoo.entries[n].weight_bytes for n in ("cls-R", "cls-C", "cls-U"))
    manager = _manager(zoo, 2 * one, arena=True)
    assert manager.arena is not None
    for n in ("cls-R", "cls-C"):  # a full pool: the prefetch must evict one of them
        manager.acquire(n)
        manager.release(n)
    gate = threading.Event()
    manager._loader.submit(gate.wait)  # noqa: SLF001 - the loader busy with an earlier prefetch, for as long as we say
    try:
        assert manager.prefetch("cls-U") and manager.has("cls-U")
        got: list[object] = []
        taker = threading.Thread(target=lambda: got.append(manager.acquire("cls-U")))
        taker.start()
        taker.join(timeout=30)
        assert got and not taker.is_alive(), "the executor waited behind the loader's queue"
        manager.release("cls-U")
        held = sum(aligned(zoo.path_of(n).stat().st_size) for n in manager.resident())
        assert len(manager.resident()) == 2 and manager.arena.used == held  # the evicted expert's slot is free now
    finally:
        gate.set()
    manager.close()  # the loader reaches the claimed prefetch and skips it
    stats = manager.stats
    assert stats.switches == 3 and stats.prefetch_claimed == 1 and stats.prefetches == 0
    assert "cls-U" in manager.resident() and len(manager.resident()) == 2


def test_a_prefetch_evicts_only_experts_needed_after_the_one_it_loads(tiny) -> None:
    """Belady's rule on what the queues know: a prefetch for a group two places back may evict an expert no queue
    waits for, or one whose group runs later, never one whose group runs first."""
    _, zoo, _ = tiny
    names = sorted(n for n in zoo.entries if n.startswith("cls-"))[:3]
    one = max(zoo.entries[n].weight_bytes for n in names)
    waiting: dict[str, int] = {}
    manager = _manager(zoo, 2 * one, next_use=lambda: dict(waiting))  # the executors' queues, as the engine has them
    first, second, later = names
    for n in (first, second):
        manager.acquire(n)
        manager.release(n)
    waiting.update({first: 0, second: 1, later: 2})  # both residents run before `later`
    assert not manager.prefetch(later) and set(manager.resident()) == {first, second}  # nothing evicted either
    waiting.update({second: 3})  # `second` now runs after `later`: it may make room
    assert manager.prefetch(later)
    manager.acquire(later)
    manager.release(later)
    assert set(manager.resident()) == {first, later}
    assert manager.stats.prefetch_used + manager.stats.prefetch_claimed == 1  # used, or claimed before it began
    manager.close()


def test_expert_in_use_is_never_evicted(tiny) -> None:
    _, zoo, _ = tiny
    one = zoo.entries["cls-R"].weight_bytes
    manager = _manager(zoo, 2 * one)
    manager.acquire("cls-R")
    manager.acquire("cls-C")
    assert not manager.prefetch("cls-U")  # only pinned experts could make room
    got: list[str] = []
    waiter = threading.Thread(target=lambda: got.append(type(manager.acquire("cls-U")).__name__))
    waiter.start()
    time.sleep(0.3)
    assert waiter.is_alive() and not got  # waits rather than evicting an expert in use
    manager.release("cls-C")
    waiter.join(10)
    assert got == ["ResNet"]
    assert set(manager.resident()) == {"cls-R", "cls-U"}  # cls-C, unpinned, made room
    manager.close()


def test_batches_split_at_memory_feasible_size(tiny) -> None:
    workload, zoo, profiles = tiny
    plan = build_plan(workload, get_policy("coserve"), profiles)
    engine = Engine(zoo, workload.usage(), get_policy("coserve"), plan, profiles)
    ex = engine.executors[0]
    prof = ex.profile_for("cls-R")
    assert ex.batch_limit("cls-R") == min(prof.max_batch, ex.batch_bytes // prof.act_bytes_per_sample)
    ex.batch_bytes = 3 * prof.act_bytes_per_sample
    assert ex.batch_limit("cls-R") == min(3, prof.max_batch)
    for i in range(7):
        engine.submit(Request(i, "R", Route(("cls-R",)), workload.image(workload.components[0], i), 0.0))
    sizes = []
    with engine._lock:  # noqa: SLF001 - inspect the queues before any executor runs
        for executor in engine.executors:
            executor.batch_bytes = ex.batch_bytes
            while (item := executor.queue.take_batch(executor.batch_limit("cls-R"))) is not None:
                sizes.append(len(item[1]))
                executor.queue.finish(item[1])
    assert sum(sizes) == 7 and max(sizes) <= 3


def _copy_zoo(zoo: Zoo, dest: Path) -> Path:
    shutil.copytree(zoo.root, dest)
    return dest


def _run_copy(tiny, root: Path):
    workload, _, profiles = tiny
    zoo = Zoo.load(root)
    return run_policy(workload, zoo, get_policy("coserve"), profiles)


def test_missing_and_corrupt_weights_fail_only_their_requests(tiny, tmp_path: Path) -> None:
    workload, zoo, _ = tiny
    root = _copy_zoo(zoo, tmp_path / "zoo")
    (root / "cls-U.safetensors").unlink()
    raw = (root / "cls-Q.safetensors").read_bytes()
    (root / "cls-Q.safetensors").write_bytes(raw[: len(raw) // 3])
    report, results = _run_copy(tiny, root)
    by_comp: dict[str, list] = {}
    for r in results.values():
        by_comp.setdefault(r.component, []).append(r)
    assert all(r.error and "missing" in r.error and "inspector zoo build" in r.error for r in by_comp["U"])
    assert all(r.error and "corrupt" in r.error for r in by_comp["Q"])
    others = [r for c, rs in by_comp.items() if c not in ("U", "Q") for r in rs]
    assert others and all(r.error is None for r in others)
    assert report.failed == len(by_comp["U"]) + len(by_comp["Q"])
    assert report.completed == workload.requests - report.failed


def test_unknown_architecture_in_manifest_fails_its_requests(tiny, tmp_path: Path) -> None:
    _, zoo, _ = tiny
    root = _copy_zoo(zoo, tmp_path / "zoo")
    manifest = json.loads((root / "manifest.json").read_text())
    for entry in manifest["experts"]:
        if entry["name"] == "cls-L":
            entry["spec"]["arch"] = "resnet11"
    (root / "manifest.json").write_text(json.dumps(manifest))
    report, results = _run_copy(tiny, root)
    failed = [r for r in results.values() if r.error]
    assert failed and all(r.component == "L" and "resnet11 is not a known depth" in r.error for r in failed)
    assert report.completed + report.failed == len(results)


def test_budget_smaller_than_largest_expert(tiny) -> None:
    workload, zoo, profiles = tiny
    small = tiny_workload(expert_pool_bytes=15 * 2**20)  # the detector fits, classifiers do not
    with pytest.raises(ValueError, match="less than the largest expert .* raise it to at least 19"):
        check_budget(small)
    plan = build_plan(small, get_policy("coserve"), profiles)
    engine = Engine(zoo, small.usage(), get_policy("coserve"), plan, profiles)
    engine.start()
    image = workload.image(workload.components[0], 0)
    assert not engine.submit(Request(0, "R", Route(("cls-R", "det-a")), image, 0.0))
    assert engine.submit(Request(1, "R", Route(("det-a",)), image, 0.0))
    assert engine.drain(30)
    engine.stop()
    assert "needs 18.7 MiB but the pool" in engine.results[0].error
    assert engine.results[1].error is None and engine.results[1].steps
    assert engine.stats().failed == 1 and engine.stats().completed == 1


def test_wrong_image_shape_fails_that_request_only(tiny) -> None:
    workload, zoo, profiles = tiny
    policy = get_policy("coserve")
    engine = Engine(zoo, workload.usage(), policy, build_plan(workload, policy, profiles), profiles)
    engine.start()
    good = workload.image(workload.components[0], 0)
    assert not engine.submit(Request(0, "R", Route(("cls-R",)), torch.rand(32, 32), 0.0))
    assert not engine.submit(Request(1, "R", Route(("cls-R",)), torch.rand(4, 32, 32), 0.0))
    assert engine.submit(Request(2, "R", Route(("cls-R",)), good, 0.0))
    assert not engine.submit(Request(3, "X", Route(("cls-nope",)), good, 0.0))
    assert engine.drain(30)
    engine.stop()
    assert "image must be 3xHxW" in engine.results[0].error and "(32, 32)" in engine.results[0].error
    assert "(4, 32, 32)" in engine.results[1].error
    assert engine.results[2].error is None
    assert "not in the zoo" in engine.results[3].error
    stats = engine.stats()
    assert stats.failed == 3 and stats.completed == 1 and stats.accepted == 4
