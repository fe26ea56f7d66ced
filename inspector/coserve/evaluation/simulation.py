"""Simulation: the real scheduler, expert managers, queues and policies on a virtual clock.

Nothing here decides anything: requests go through `Scheduler.submit`, batches
are cut by the executors' own `batch_limit`, evictions are the policy's via
`ExpertManager.begin_load`. What the simulator replaces is time: a batch takes
K*n + B from the device profile, a switch takes the profiled load latency of
the tier it comes from, loads from disk share one disk (they queue), loads
from host RAM share the device's link, and executors computing on one device
share its compute: k of them together run at the profiled concurrency
speedup(k), each at speedup(k)/k of its solo speed (processor sharing). On
a CPU a load in service is one more of the k, both ways: it takes its share
of the cores from the executors, and it is itself stretched to its share (a
disk read beside two computing executors takes about 1.7 times its time
alone on the project's 2-core box; `results/bench-cpu.md`). Verdicts come
from a pass oracle (the component's pass rate, or a real run's verdicts for
validation), since no model runs. A paper-scale task (hundreds of experts,
thousands of requests) runs in seconds.
"""
from __future__ import annotations

import heapq
import random
import threading
from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...experts.base import Prediction
from ...experts.registry import architecture_from_spec
from ...experts.zoo import ExpertEntry, Zoo
from ...runtime.devices import Device
from ...runtime.memory import DeviceBudget, MemoryLedger
from ...runtime.store import Tier
from ..online.engine import EnginePlan
from ..online.executor import ExecutorCore, next_use
from ..online.expert_manager import ExpertManager, ManagerStats
from ..online.policies import Policy
from ..online.pools import pool_layout
from ..online.profile import DeviceProfile
from ..online.request import Request, RequestResult
from ..online.scheduler import Scheduler
from ..online.timeline import ExecutorTime
from ..online.usage import ExpertUsage
from ..online.workload import Workload

PassOracle = Callable[[Request], bool]


class SimStore:
    """Where weights are, without weights: the disk, or the host RAM cache (LRU) of a GPU box."""

    def __init__(self, host_bytes: int) -> None:
        self._host: OrderedDict[str, int] = OrderedDict()
        self._ledger = MemoryLedger("sim-host", host_bytes) if host_bytes > 0 else None

    def tier_of(self, name: str) -> Tier:
        return Tier.HOST if name in self._host else Tier.DISK

    def fetched(self, name: str, nbytes: int) -> None:
        if self._ledger is None or nbytes > self._ledger.capacity:
            return
        if name in self._host:
            self._host.move_to_end(name)
            return
        while self._ledger.free < nbytes and self._host:
            old, _ = self._host.popitem(last=False)
            self._ledger.release(old)
        self._ledger.reserve(name, nbytes)
        self._host[name] = nbytes


class _Wake:
    """The executor's `wake` as the scheduler calls it: start work if idle."""

    def __init__(self, sim: Simulator, ex: SimExecutor) -> None:
        self._sim, self._ex = sim, ex

    def notify(self) -> None:
        self._sim.kick(self._ex)


class SimExecutor(ExecutorCore):
    busy = False
    expert: str | None = None
    batch: list[Request]
    segment: tuple[str, float] = ("idle", 0.0)  # what it is waiting for now, since when (virtual seconds)
    token = 0  # the current finish event's; a re-shared device reschedules and older events are void
    started = 0.0  # when its batch began computing


@dataclass(eq=False)
class SimLoad:
    """One switch in flight: what it loads, for whom, and (on a CPU, where it is shared) its solo seconds left."""
    manager: ExpertManager
    expert: str
    tier: Tier
    solo_s: float
    pin_for: SimExecutor | None
    started: float = 0.0
    token: int = 0
    claimed: bool = False  # a prefetch an executor wanted before it began: no longer counted as a prefetch


@dataclass
class SimRun:
    makespan_s: float
    results: dict[int, RequestResult]
    experts: ManagerStats
    executors: int
    time: ExecutorTime
    resident_at_start: set[str]


def rate_oracle(workload: Workload, seed: int = 0) -> PassOracle:
    """A classifier passes a part with its component's pass rate (seeded, reproducible)."""
    rates = {c.name: c.pass_rate for c in workload.components}

    def passes(request: Request) -> bool:
        if request.step > 0:
            return True
        return random.Random(hash((seed, request.id))).random() < rates[request.component]

    return passes


def replay_oracle(results: dict[int, RequestResult]) -> PassOracle:
    """Replay the verdicts of a real run, so that both see the same follow-ups."""

    def passes(request: Request) -> bool:
        steps = results[request.id].steps
        return steps[request.step][1].passed if request.step < len(steps) else False

    return passes


def simulated_zoo(workload: Workload, profile: DeviceProfile) -> Zoo:
    """The workload's experts as a catalogue, sized from the profile: no files, no weights."""
    zoo = Zoo(root=Path("<simulated>"), build_key="simulated", entries={})
    for item in workload.zoo_items():
        arch = architecture_from_spec(item.spec)
        size = profile.get(arch.key).weight_bytes
        zoo.entries[item.name] = ExpertEntry(item.name, arch.role, item.spec, "", size)
        zoo._archs[item.name] = arch  # noqa: SLF001 - the catalogue is ours to fill
    return zoo


class Simulator:
    def __init__(self, zoo: Zoo, usage: ExpertUsage, policy: Policy, plan: EnginePlan,
                 profiles: dict[str, DeviceProfile], passes: PassOracle) -> None:
        self.zoo, self.policy, self.plan, self.profiles, self._passes = zoo, policy, plan, profiles, passes
        self.now = 0.0
        self._events: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self._lock = threading.RLock()
        self.store = SimStore(plan.host_cache_bytes if any(s.device.is_cuda for s in plan.executors) else 0)
        budgets = {d: DeviceBudget(d.key, total) for d, total in plan.device_totals().items()}
        self.managers: dict[str, ExpertManager] = {}
        owner: dict[int, ExpertManager] = {}
        for pool in pool_layout([s.device for s in plan.executors], plan.pool_bytes, policy.shared_pool):
            key = pool.key
            self.managers[key] = ExpertManager(
                key, pool.device, budgets[pool.device].open(pool.name, pool.nbytes), self.store,  # type: ignore[arg-type]
                zoo, policy.evictor, usage, self._lock, next_use=lambda k=key: next_use(self.executors, k))
            owner.update((i, self.managers[key]) for i in pool.executors)
        self.executors: list[SimExecutor] = []
        for i, spec in enumerate(plan.executors):
            ex = SimExecutor(i, spec.device, owner[i], profiles[spec.device.key],
                             spec.batch_bytes, spec.threads, policy.prefetch, policy.arranger)
            ex.wake = _Wake(self, ex)  # type: ignore[attr-defined]
            ex.batch = []
            self.executors.append(ex)
        self.scheduler = Scheduler(self.executors, policy, self._lock)  # type: ignore[arg-type]
        self._disk: deque[SimLoad] = deque()  # loads waiting for the one disk, the head in service
        self._link_free: dict[Device, float] = defaultdict(float)
        self._load_waiters: dict[tuple[str, str], list[SimExecutor]] = defaultdict(list)
        self._pin_waiters: list[SimExecutor] = []
        self.results: dict[int, RequestResult] = {}
        # per device: the executors computing there -> solo seconds of work left; the per-executor rate and since when
        self._computing: dict[Device, dict[SimExecutor, float]] = defaultdict(dict)
        self._rate: dict[Device, tuple[float, float]] = {}
        self._cpu_loads: dict[Device, dict[SimLoad, float]] = defaultdict(dict)  # in service on a CPU: solo s left
        self._tokens = 0

    # -- the virtual clock ------------------------------------------------------------------------
    def _at(self, t: float, fn: Callable[..., None], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._events, (t, self._seq, fn, args))

    def run(self, stream: list[Request], interval_s: float, place: bool = True) -> SimRun:
        with self._lock:  # one thread; the managers' bookkeeping expects its lock held
            if place:
                self._place()
            at_start = {e for m in self.managers.values() for e in m.resident()}
            for i, request in enumerate(stream):
                self._at(i * interval_s, self._arrive, request)
            while self._events:
                self.now, _, fn, args = heapq.heappop(self._events)
                fn(*args)
        end = max((r.finished for r in self.results.values()), default=0.0)
        spent = ExecutorTime()
        for ex in self.executors:
            spent.add(ex.time)
        return SimRun(end, self.results, ManagerStats.merged([m.stats for m in self.managers.values()]),
                      len(self.executors), spent, at_start)

    def _place(self) -> None:
        """The engine's placement (paper §4.1): descending usage, round-robin over pools, no eviction."""
        self.preload(next(iter(self.managers.values())).usage.ranked(self.zoo.entries))

    def preload(self, experts: list[str], every_pool: bool = False) -> None:
        """As `Engine.preload`: round-robin over pools (or into every pool), into free space only."""
        pools = list(self.managers.values())
        with self._lock:
            for i, name in enumerate(experts):
                for m in pools if every_pool else [pools[i % len(pools)]]:
                    if m.has(name) or m.unavailable_reason(name) or m.begin_load(name, evict=False) is None:
                        continue
                    m.install(name, None, Tier.DISK.value, 0.0, pin=False, initial=True)

    # -- events -----------------------------------------------------------------------------------
    def _arrive(self, request: Request) -> None:
        request.arrival = self.now
        self.results[request.id] = RequestResult(request.id, request.component, arrival=self.now)
        reasons = [m.unavailable_reason(request.expert) for m in self.managers.values()]
        if all(reasons):
            self._finish(request, error=reasons[0])
            return
        self.scheduler.submit(request)

    def _now_waiting(self, ex: SimExecutor, kind: str) -> None:
        """Close the executor's current wait (load or blocked seconds count; idle is the rest), open `kind`."""
        was, since = ex.segment
        if was in ("load", "blocked"):
            setattr(ex.time, was, getattr(ex.time, was) + self.now - since)
        ex.segment = (kind, self.now)

    def kick(self, ex: SimExecutor) -> None:
        if not ex.busy:
            self._start(ex)

    def _start(self, ex: SimExecutor) -> None:
        if not ex.queue.groups:
            ex.busy = False
            self._now_waiting(ex, "idle")
            return
        ex.busy = True
        item = ex.cut_batch()
        assert item is not None
        ex.expert, ex.batch = item
        self._acquire(ex)

    def _acquire(self, ex: SimExecutor) -> None:
        m, expert = ex.manager, ex.expert
        assert expert is not None
        reason = m.unavailable_reason(expert)
        if reason:
            ex.queue.finish(ex.batch)
            for r in ex.batch:
                self._finish(r, error=reason)
            self._start(ex)
        elif m.is_resident(expert):
            m.try_pin(expert)
            self._compute(ex)
        elif m.is_loading(expert):
            self._now_waiting(ex, "load")
            self._load_waiters[(m.name, expert)].append(ex)
            self._claim(m, expert)
        elif m.begin_load(expert) is None:
            self._now_waiting(ex, "blocked")
            self._pin_waiters.append(ex)
        else:
            self._now_waiting(ex, "load")
            self._load(m, expert, pin_for=ex)

    def _load(self, m: ExpertManager, expert: str, pin_for: SimExecutor | None) -> None:
        tier = self.store.tier_of(expert)
        duration = self.profiles[m.device.key].get(self.zoo.architecture(expert).key).switch_s(tier.value)
        load = SimLoad(m, expert, tier, duration, pin_for)
        if tier is Tier.DISK:
            self._disk.append(load)
            if len(self._disk) == 1:
                self._serve_load(load)
        else:
            start = self._link_free[m.device] = max(self.now, self._link_free[m.device])
            self._link_free[m.device] += duration
            self._at(start, self._serve_load, load)

    def _claim(self, m: ExpertManager, expert: str) -> None:
        """As `ExpertManager.acquire`: a prefetch still queued for the disk is wanted now, so it goes next."""
        queued = list(self._disk)[1:]
        load = next((q for q in queued if q.manager is m and q.expert == expert and q.pin_for is None), None)
        if load is None or load.claimed:
            return
        load.claimed = True
        m.stats.prefetches -= 1
        m.stats.prefetch_claimed += 1
        self._disk.remove(load)
        self._disk.insert(1, load)

    def _serve_load(self, load: SimLoad) -> None:
        """The load begins: on a GPU it takes its profiled time; on a CPU it joins the device's sharing."""
        load.started = self.now
        device = load.manager.device
        if device.is_cuda:
            self._at(self.now + load.solo_s, self._loaded, load, 0)
            return
        self._advance(device)
        self._cpu_loads[device][load] = load.solo_s
        self._reschedule(device)

    def _loaded(self, load: SimLoad, token: int) -> None:
        if token != load.token:
            return  # superseded by a re-share of the device
        m, expert, tier = load.manager, load.expert, load.tier
        if not m.device.is_cuda:
            self._advance(m.device)
            del self._cpu_loads[m.device][load]
            self._reschedule(m.device)
        if tier is Tier.DISK:
            self._disk.popleft()
            if self._disk:
                self._serve_load(self._disk[0])
        self.store.fetched(expert, self.zoo.entries[expert].weight_bytes)
        pin_for = load.pin_for
        m.install(expert, None, tier.value, self.now - load.started, pin=pin_for is not None,
                  prefetched=pin_for is None and not load.claimed)
        if pin_for is not None:
            self._compute(pin_for)
        else:  # a prefetched expert is unpinned now: room for whoever waited on pins
            self._retry_pin_waiters()
        for waiter in self._load_waiters.pop((m.name, expert), []):
            self._acquire(waiter)

    def _retry_pin_waiters(self) -> None:
        waiters, self._pin_waiters = self._pin_waiters, []
        for waiter in waiters:
            self._acquire(waiter)

    def _compute(self, ex: SimExecutor) -> None:
        expert = ex.expert
        assert expert is not None
        self._now_waiting(ex, "compute")
        if ex.prefetch:
            nxt = ex.next_expert_to_prefetch(expert)
            m = ex.manager
            if nxt and not m.has(nxt) and not m.unavailable_reason(nxt) and m.begin_prefetch(nxt) is not None:
                m.stats.prefetches += 1
                self._load(m, nxt, pin_for=None)
        ex.started = self.now
        self._advance(ex.device)
        cold = ex.manager.first_batch(expert)
        self._computing[ex.device][ex] = ex.profile_for(expert).batch_s(len(ex.batch), cold)
        self._reschedule(ex.device)

    def _advance(self, device: Device) -> None:
        """Charge the work done since the device's last change at its per-participant rate."""
        rate, since = self._rate.get(device, (1.0, self.now))
        for running in (self._computing[device], self._cpu_loads[device]):
            for key in running:
                running[key] -= (self.now - since) * rate

    def _reschedule(self, device: Device) -> None:
        """A new share: every computing executor's (and CPU load's) finish moves to now + work left / new rate.

        On a CPU device a load in service counts as one more participant: it
        reads and copies on the same cores (and holds the interpreter) while
        the executors compute, and gets only its share of them itself.
        """
        running, loads = self._computing[device], self._cpu_loads[device]
        k = len(running) + len(loads)
        rate = self.profiles[device.key].speedup(k) / k if k else 1.0
        self._rate[device] = (rate, self.now)
        for ex, left in running.items():
            self._tokens += 1
            ex.token = self._tokens
            self._at(self.now + max(0.0, left) / rate, self._done, ex, ex.token)
        for load, left in loads.items():
            self._tokens += 1
            load.token = self._tokens
            self._at(self.now + max(0.0, left) / rate, self._loaded, load, load.token)

    def _done(self, ex: SimExecutor, token: int) -> None:
        if token != ex.token:
            return  # superseded by a re-share of the device
        self._advance(ex.device)
        del self._computing[ex.device][ex]
        self._reschedule(ex.device)
        ex.time.compute += self.now - ex.started
        ex.time.batches += 1
        ex.time.requests += len(ex.batch)
        expert, batch = ex.expert, ex.batch
        assert expert is not None
        ex.manager.unpin(expert)
        ex.queue.finish(batch)
        for request in batch:
            passed = self._passes(request)
            self.results[request.id].steps.append(
                (expert, Prediction(label=0 if passed else 1, score=1.0, passed=passed)))
            nxt = request.follow_up() if passed else None
            if nxt is not None:
                self.scheduler.submit(nxt)
            else:
                self._finish(request)
        self._retry_pin_waiters()
        ex.busy = False
        ex.expert = None
        self._start(ex)

    def _finish(self, request: Request, error: str | None = None) -> None:
        result = self.results[request.id]
        result.error = error
        result.finished = self.now


def warm_start(zoo: Zoo, usage: ExpertUsage, policy: Policy, plan: EnginePlan,
               profiles: dict[str, DeviceProfile]) -> list[str]:
    """The experts the engine's placement (paper §4.1) puts in `plan`'s pools for `policy`, in usage order.

    Computed on the simulator's bookkeeping, which places as the engine does, so nothing is loaded to learn it.
    """
    sim = Simulator(zoo, usage, policy, plan, profiles, lambda request: True)
    ranked = usage.ranked(zoo.entries)
    sim.preload(ranked)  # what `Simulator._place` does before a run
    held = {e for m in sim.managers.values() for e in m.resident()}
    return [e for e in ranked if e in held]
