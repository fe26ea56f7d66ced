"""The engine: executors, their pools and queues, one scheduler, one policy.

`submit` accepts a component request and returns at once; executors serve
it and its follow-ups; `drain` waits until everything accepted has a
result. A request that cannot be served gets an error result with its
reason and is counted; the engine keeps serving the rest.
"""
from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ...experts.backends.base import Backend
from ...experts.backends.torch_backend import TorchBackend
from ...experts.base import BadInput, Prediction
from ...experts.operating import same_expert
from ...experts.zoo import ExpertEntry, Zoo
from ...runtime.devices import Device
from ...runtime.memory import DeviceBudget, MemoryLedger
from ...runtime.store import TieredStore
from .executor import Executor, next_use
from .expert_manager import ExpertManager, ManagerStats
from .policies import Policy
from .pools import pool_arena, pool_layout
from .profile import DeviceProfile
from .request import Request, RequestResult
from .scheduler import Scheduler
from .timeline import Concurrency, ExecutorTime
from .usage import ExpertUsage
from .workload import MiB


@dataclass(frozen=True)
class ExecutorSpec:
    """One executor: its device, its batch (intermediate) bytes, its CPU threads."""

    device: Device
    batch_bytes: int
    threads: int = 1


@dataclass
class EnginePlan:
    """Executors and, per device, the bytes of expert memory (one shared pool or split, as the policy says)."""

    executors: list[ExecutorSpec]
    pool_bytes: dict[Device, int]
    host_cache_bytes: int = 0  # host RAM cache in front of the disk (GPU boxes)
    drop_page_cache: bool = True

    def device_totals(self) -> dict[Device, int]:
        totals = dict(self.pool_bytes)
        for spec in self.executors:
            totals[spec.device] = totals.get(spec.device, 0) + spec.batch_bytes
        return totals


@dataclass
class EngineStats:
    """Requests accepted and how they ended, the scheduler's time, and the pools' work."""

    accepted: int = 0
    completed: int = 0
    failed: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    sched_overhead_s: float = 0.0
    experts: ManagerStats = field(default_factory=ManagerStats)
    time: ExecutorTime = field(default_factory=ExecutorTime)  # summed over the executors

    def plus(self, other: EngineStats) -> EngineStats:
        """These counts and `other`'s: a line's over the engines it served one after another."""
        spent = ExecutorTime()
        spent.add(self.time)
        spent.add(other.time)
        failures = dict(self.failures)
        for why, n in other.failures.items():
            failures[why] = failures.get(why, 0) + n
        return EngineStats(self.accepted + other.accepted, self.completed + other.completed,
                           self.failed + other.failed, failures, self.sched_overhead_s + other.sched_overhead_s,
                           ManagerStats.merged([self.experts, other.experts]), spent)


@dataclass
class ExpertView:
    """One expert as an operator sees it (the dashboard's experts table)."""

    expert: str
    role: str
    tier: str
    usage: float
    hits: int
    loads: int
    last_used: float | None  # time.time()
    size_mb: float


def pool_shortfall(zoo: Zoo, pool_bytes: int) -> str | None:
    """Why an expert pool of this size cannot serve the zoo (it cannot hold its largest expert), or None."""
    largest = max(e.weight_bytes for e in zoo.entries.values())
    if pool_bytes >= largest:
        return None
    return (f"an expert pool of {pool_bytes / MiB:.1f} MiB cannot hold the largest expert "
            f"({largest / MiB:.1f} MiB); give the pool at least that")


class Engine:
    def __init__(
        self,
        zoo: Zoo,
        usage: ExpertUsage,
        policy: Policy,
        plan: EnginePlan,
        profiles: dict[str, DeviceProfile],
        backend: Backend | None = None,
    ) -> None:
        self.zoo = zoo
        self.backend = backend or TorchBackend()
        self.usage = usage
        self.policy = policy
        self.plan = plan
        self._lock = threading.RLock()
        self._idle = threading.Condition(self._lock)
        self.budgets = {d: DeviceBudget(d.key, total) for d, total in plan.device_totals().items()}
        has_cuda = any(spec.device.is_cuda for spec in plan.executors)
        host: MemoryLedger | None = None
        if has_cuda and plan.host_cache_bytes > 0:
            host = MemoryLedger("host-cache", plan.host_cache_bytes)
        self.store = TieredStore(host, pin_host=has_cuda, drop_page_cache=plan.drop_page_cache)
        for name in zoo.entries:
            self.store.register(name, zoo.path_of(name), zoo.entries[name].weights_sha256)
        self.executors: list[Executor] = []
        # pools by "<device>/<pool>" name: one per device, or one per executor (the policy's shared_pool)
        self.managers: dict[str, ExpertManager] = {}
        owner: dict[int, ExpertManager] = {}
        for pool in pool_layout([s.device for s in plan.executors], plan.pool_bytes, policy.shared_pool):
            key = pool.key
            manager = self.managers[key] = ExpertManager(
                name=key, device=pool.device, ledger=self.budgets[pool.device].open(pool.name, pool.nbytes),
                store=self.store, zoo=zoo, evictor=policy.evictor, usage=usage, lock=self._lock,
                next_use=lambda k=key: next_use(self.executors, k), arena=pool_arena(pool, zoo),
                backend=self.backend,
            )
            manager.profile = profiles.get(pool.device.key)
            owner.update((i, manager) for i in pool.executors)
        # a runtime keeps evicted experts' sessions in the host tier, within the host budget, on the boxes that have
        # one (a GPU box, as for torch's host copies); on a CPU box the pool is the host's memory and holds them all
        self.backend.keep(plan.host_cache_bytes if has_cuda else 0)
        for i, spec in enumerate(plan.executors):
            self.budgets[spec.device].open(f"batch-{i}", spec.batch_bytes)
            self.executors.append(Executor(
                i, spec.device, owner[i], profiles[spec.device.key], spec.batch_bytes,
                spec.threads, policy.prefetch, self._lock, self._batch_done, policy.arranger,
            ))
        shared = {d: Concurrency() for d in plan.pool_bytes}  # executors of one device share its compute
        for ex in self.executors:
            ex.concurrency = shared.setdefault(ex.device, Concurrency())
        for manager in self.managers.values():
            manager.concurrency = shared.setdefault(manager.device, Concurrency())
        self.scheduler = Scheduler(self.executors, policy, self._lock)
        self.results: dict[int, RequestResult] = {}
        # A long-running line sets this: each finished result is handed over (outside the engine's
        # lock) and dropped from `results`, so memory stays flat however long the line runs.
        self.on_result: Callable[[RequestResult], None] | None = None
        self._finished: list[RequestResult] = []
        self._outstanding = 0
        self._stats = EngineStats()
        self._started = False

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the executors; first every architecture gets a spare module shell per loading thread.

        Deep-copying a module is slow (a YOLO: a third of a second here); done
        now, at start, no switch while serving pays it.
        """
        if not self._started:
            loaders: dict[Device, int] = {}
            for ex in self.executors:
                loaders[ex.device] = loaders.get(ex.device, 0) + 1
            archs = {id(a): a for a in (self.zoo.architecture(e) for e in self.zoo.entries
                                        if e not in self.zoo.unavailable)}
            for device, n in (loaders.items() if self.backend.name == "torch" else ()):
                for arch in archs.values():
                    arch.keep_shells(device.torch, n + 1)  # + the prefetcher
            for ex in self.executors:
                ex.start()
            self._started = True

    def preload(self, experts: list[str], every_pool: bool = False) -> None:
        """Place experts before serving: round-robin over the pools (paper §4.1), or into every pool.

        An expert that does not fit where its turn falls is skipped; placement
        never evicts.
        """
        pools = list(self.managers.values())
        for i, name in enumerate(experts):
            for manager in pools if every_pool else [pools[i % len(pools)]]:
                manager.preload(name)

    def place_by_usage(self) -> None:
        """System initialisation (paper §4.1): fill the pools by descending usage probability."""
        self.preload(self.usage.ranked(self.zoo.entries))

    def set_usage(self, usage: ExpertUsage) -> None:
        """New usage probabilities (a changed rule set) for the next eviction decisions; nothing is moved now."""
        with self._lock:
            self.usage = usage
            for manager in self.managers.values():
                manager.usage = usage

    def reallocate(self, pool_bytes: int, batch_bytes: int) -> None:
        """Live: a new split of the main device between its expert pool and its executors' batches.

        The device total stays (it is what the box has); the pool shrinks by
        evicting in the policy's order, the executors' batch limits follow at
        their next batch. Raises ValueError naming what does not fit.
        """
        main = self.executors[0].device
        mine = [i for i, ex in enumerate(self.executors) if ex.device == main]
        pools = [m for m in self.managers.values() if m.device == main]
        total = self.budgets[main].total
        sample = max(p.act_bytes_per_sample for p in self.executors[mine[0]].profile.archs.values())
        short = pool_shortfall(self.zoo, pool_bytes // len(pools))
        if short:
            raise ValueError(short if len(pools) == 1 else f"split over {len(pools)} executors' pools, {short}")
        if batch_bytes < sample:
            raise ValueError(f"{batch_bytes / MiB:.2f} MiB per executor cannot hold one sample's activations "
                             f"({sample / MiB:.2f} MiB); give the batches more or the pool less")
        if pool_bytes + len(mine) * batch_bytes > total:
            raise ValueError(f"pool {pool_bytes / MiB:.1f} MiB + {len(mine)} x {batch_bytes / MiB:.1f} MiB of batches "
                             f"exceeds the device's {total / MiB:.1f} MiB")
        ledgers = self.budgets[main].ledgers()
        with self._lock:
            for i in mine:
                ledgers[f"batch-{i}"].capacity = batch_bytes
                self.executors[i].batch_bytes = batch_bytes
            self.plan.pool_bytes[main] = pool_bytes
        for manager in pools:
            manager.resize(pool_bytes // len(pools))

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every accepted request has a result; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._outstanding:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def stop(self) -> None:
        """Stop the executors (if started) and the pools' loaders; safe on an engine that never started."""
        if self._started:
            for ex in self.executors:
                ex.stop()
            for ex in self.executors:
                ex.join()
        for manager in self.managers.values():
            manager.close()

    # -- requests -----------------------------------------------------------------------------------
    def submit(self, request: Request) -> bool:
        """Accept a component request; False (with an error result) when it cannot be served."""
        reason = self._reject_reason(request)
        with self._lock:
            self._stats.accepted += 1
            self.results[request.id] = RequestResult(request.id, request.component, arrival=request.arrival)
            if reason:
                self._fail(request, reason)
        if reason:
            self._deliver()
            return False
        with self._lock:
            self._outstanding += 1
        self.scheduler.submit(request)
        return True

    def _reject_reason(self, request: Request) -> str | None:
        for expert in request.route.experts:
            if expert not in self.zoo.entries:
                return f"route of {request.component} names expert {expert!r}, which is not in the zoo"
        expert = request.expert
        reasons = [m.unavailable_reason(expert) for m in self.managers.values()]
        if all(reasons):
            return reasons[0]
        try:
            self.zoo.architecture(expert).check(request.image)
        except BadInput as exc:
            return f"{request.component}: {exc}"
        return None

    def _batch_done(
        self, executor: Executor, batch: list[Request], preds: list[Prediction] | None, error: str | None
    ) -> None:
        follow_ups: list[Request] = []
        with self._lock:
            executor.queue.finish(batch)
            for i, req in enumerate(batch):
                if error is not None or preds is None:
                    self._fail(req, error or "no prediction")
                    self._outstanding -= 1
                    continue
                pred = preds[i]
                result = self.results[req.id]
                result.steps.append((req.expert, pred))
                nxt = req.follow_up() if pred.passed else None
                if nxt is not None:
                    follow_ups.append(nxt)
                else:
                    result.finished = time.perf_counter()
                    self._stats.completed += 1
                    self._outstanding -= 1
                    self._finished.append(result)
            if not self._outstanding:
                self._idle.notify_all()
        for nxt in follow_ups:
            self.scheduler.submit(nxt)
        self._deliver()

    def _deliver(self) -> None:
        with self._lock:
            if self.on_result is None:
                self._finished.clear()
                return
            done, self._finished = self._finished, []
            for r in done:
                self.results.pop(r.id, None)
        for r in done:
            self.on_result(r)

    def _fail(self, request: Request, reason: str) -> None:
        result = self.results[request.id]
        result.error = reason
        result.finished = time.perf_counter()
        self._finished.append(result)
        self._stats.failed += 1
        kind = re.sub(r"'[^']*'", "'…'", reason)[:160]  # one kind per cause, whichever expert it hit
        self._stats.failures[kind] = self._stats.failures.get(kind, 0) + 1

    def replace_weights(self, name: str, entry: ExpertEntry, timeout: float | None = None) -> None:
        """Serve `entry`'s weights for expert `name` from the next load on (a retrained version, a rollback).

        The caller sends no request for `name` meanwhile (the line holds boards at a board boundary); this waits
        for batches running on it and loads in flight to end, drops every pool's copy and the host cache's, and
        registers the new file and hash with the store. Same architecture only (a new one is a new zoo); the
        operating point may change with the weights (a retrained detector's threshold: experts/operating.py).
        TimeoutError when it stays busy past `timeout`; nothing is changed then.
        """
        old = self.zoo.entries.get(name)
        if old is None:
            raise KeyError(f"the engine serves no expert {name!r}")
        if not same_expert(entry.spec, old.spec) or entry.weight_bytes != old.weight_bytes:
            raise ValueError(f"the new weights of {name} are for another architecture ({entry.spec}, not "
                             f"{old.spec}); change architectures by building a new zoo")
        if (entry.file, entry.weights_sha256) == (old.file, old.weights_sha256):  # the same weights at another point
            with self._lock:
                self.zoo.serve_entry(entry)  # the next batch decodes with it; the loaded copies stay
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        evicted: list[tuple[ExpertManager, list]] = []
        with self._lock:
            while any(m.busy_with(name) for m in self.managers.values()):
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"expert {name} stayed busy for {timeout:g} s; its weights were not replaced")
                self._idle.wait(0.02)  # batches end and loads install under this lock; a short poll is enough
            for manager in self.managers.values():
                evicted.append((manager, manager.forget(name)))
            self.store.forget_host(name)
            self.store.register(name, self.zoo.root / entry.file, entry.weights_sha256)
            self.zoo.serve_entry(entry)
        for manager, gone in evicted:
            manager.retire(gone)

    # -- reporting ----------------------------------------------------------------------------------
    def failed_experts(self) -> dict[str, str]:
        """Every expert that failed to load on some device, with the reason (the others keep serving)."""
        out: dict[str, str] = {}
        for manager in self.managers.values():
            out.update(manager.failed())
        return out

    def expert_views(self) -> list[ExpertView]:
        """Every expert of the zoo: where it is now, its usage probability, its pools' counters summed.

        Tier: the name of the device pool holding it (its ledger's), or "loading into" it, else "host" when the host
        cache holds it (GPU boxes), else "disk".
        """
        host = set(self.store.host_resident())
        with self._lock:
            views = {name: ExpertView(name, e.role, "host" if name in host else "disk", self.usage.p(name), 0, 0,
                                      None, e.weight_bytes / MiB) for name, e in self.zoo.entries.items()}
            for manager in reversed(list(self.managers.values())):  # the first pool holding it names the tier
                for name in manager.loading():
                    views[name].tier = f"loading into {manager.ledger.name}"
                for name in manager.resident():
                    views[name].tier = manager.ledger.name
            for manager in self.managers.values():
                for name, c in manager.per_expert.items():
                    v = views[name]
                    v.hits += c.hits
                    v.loads += c.loads
                    if c.last_used is not None:
                        v.last_used = max(v.last_used or 0.0, c.last_used)
            return list(views.values())

    def stats(self) -> EngineStats:
        spent = ExecutorTime()
        for ex in self.executors:
            spent.add(ex.time)
        with self._lock:
            return EngineStats(
                accepted=self._stats.accepted, completed=self._stats.completed, failed=self._stats.failed,
                failures=dict(self._stats.failures), sched_overhead_s=self.scheduler.overhead_s,
                experts=ManagerStats.merged([m.stats for m in self.managers.values()]), time=spent,
            )
