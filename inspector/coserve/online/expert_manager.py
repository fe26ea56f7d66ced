"""Expert management for one expert pool (paper §4.3, plus our prefetch).

A pool belongs to one executor (the paper's layout) or to all executors of
a device (ours); `pools.py` says which, the manager works the same either way.

Mechanics only: residency, byte accounting through the pool's ledger,
pinning (an expert in use or being loaded is never evicted), loads through
the tiered store (on a CPU, into slots of the pool's own memory, `arena`),
and a background loader for prefetches. *Which* residents
leave a full pool is the policy's evictor's answer.
"""
from __future__ import annotations

import itertools
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from torch import nn

from ...experts.backends.base import Backend, Weights
from ...experts.backends.torch_backend import TorchBackend
from ...experts.base import StateDict
from ...experts.zoo import Zoo
from ...runtime.arena import HostArena
from ...runtime.devices import Device
from ...runtime.memory import MemoryLedger
from ...runtime.store import TieredStore, WeightsUnavailable
from .policies import EvictionView, Evictor, Resident
from .profile import DeviceProfile
from .timeline import Concurrency, ExecutorTime
from .usage import ExpertUsage

HISTORY = 20_000  # switches and batches remembered for the offline refit (a bench run holds far fewer)


class ExpertUnavailable(RuntimeError):
    """This expert cannot be served here; requests for it fail with this reason."""


@dataclass
class _Slot:
    module: nn.Module
    nbytes: int
    loaded_seq: int
    used_seq: int
    in_use: int = 0
    prefetched: bool = False
    fresh: bool = True  # no batch has run on it since its load: the next one pays the profile's cold_s


@dataclass
class ManagerStats:
    """What the manager did: switches per tier with their seconds, and its own overhead."""

    hits: int = 0
    switches: int = 0
    evictions: int = 0
    prefetches: int = 0
    prefetch_used: int = 0
    prefetch_claimed: int = 0  # prefetches an executor needed before the loader began them, and loaded itself
    initial_loads: int = 0
    unpooled_loads: int = 0  # disk reads the arena had no slot for (fragmented, or the pool grew past it)
    loads_by_tier: dict[str, int] = field(default_factory=dict)
    load_s_by_tier: dict[str, float] = field(default_factory=dict)
    decision_s: float = 0.0  # eviction decisions and bookkeeping: the EM overhead

    def record_load(self, tier: str, seconds: float, count: int = 1) -> None:
        self.loads_by_tier[tier] = self.loads_by_tier.get(tier, 0) + count
        self.load_s_by_tier[tier] = self.load_s_by_tier.get(tier, 0.0) + seconds

    @classmethod
    def merged(cls, parts: list[ManagerStats]) -> ManagerStats:
        """The sum over several pools (what the engine reports)."""
        total = cls()
        for part in parts:
            for name in ("hits", "switches", "evictions", "prefetches", "prefetch_used", "prefetch_claimed",
                         "initial_loads", "unpooled_loads", "decision_s"):
                setattr(total, name, getattr(total, name) + getattr(part, name))
            for tier, n in part.loads_by_tier.items():
                total.record_load(tier, part.load_s_by_tier[tier], n)
        return total


@dataclass
class ExpertCounters:
    """One expert's life in this pool, for the dashboard's experts table."""

    hits: int = 0
    loads: int = 0  # switches into this pool (initial placement not counted)
    last_used: float | None = None  # time.time() of the last batch it served or the last load


class ExpertManager:
    def __init__(
        self,
        name: str,
        device: Device,
        ledger: MemoryLedger,
        store: TieredStore,
        zoo: Zoo,
        evictor: Evictor,
        usage: ExpertUsage,
        lock: threading.RLock,
        next_use: Callable[[], Mapping[str, int]],
        arena: HostArena | None = None,
        backend: Backend | None = None,
    ) -> None:
        self.name = name
        self.backend = backend or TorchBackend()  # what a loaded expert is and how it runs (experts/backends)
        self.device = device
        self.ledger = ledger
        self.store = store
        self.zoo = zoo
        self.evictor = evictor
        self.usage = usage
        self._cv = threading.Condition(lock)
        self._next_use = next_use
        # the pool's own memory that disk reads land in (CPU pools); slots are keyed per load, since an evicted
        # expert's slot is given back only after its module let go of it, possibly after the expert loads again
        self.arena = arena
        self._arena_keys: dict[int, str] = {}  # id(module) -> its slot's key
        self._load_ids = itertools.count()
        self._slots: dict[str, _Slot] = {}
        self._loading: set[str] = set()
        # prefetches submitted to the loader and not begun, with what each evicted: an executor may claim one
        self._queued: dict[str, list[tuple[str, nn.Module]]] = {}
        self._failed: dict[str, str] = {}
        self._seq = 0
        self.stats = ManagerStats()
        self.per_expert: defaultdict[str, ExpertCounters] = defaultdict(ExpertCounters)
        # (expert, tier, start, seconds) of the newest switches: what the simulator check refits; bounded, since a
        # line runs for months
        self.loads: deque[tuple[str, str, float, float]] = deque(maxlen=HISTORY)
        self._loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-prefetch")
        # on a CPU, the device's compute counter: a load in progress reads and copies on the executors' cores, so it
        # counts beside them (what the simulator models; the engine sets it)
        self.concurrency: Concurrency | None = None
        # the backend's profile of this pool's device: what a resident expert really holds where it was measured (a
        # runtime session's memory is not its weights'); without one, experts are charged their weights
        self.profile: DeviceProfile | None = None

    # -- queries (under the engine lock) ---------------------------------------------------------
    def has(self, expert: str) -> bool:
        """Resident or on its way: a request for it pays no further switch here."""
        return expert in self._slots or expert in self._loading

    def need(self, expert: str) -> int:
        """The pool bytes `expert` takes once resident: measured for its backend, else its weights."""
        weights = self.zoo.entries[expert].weight_bytes
        return weights if self.profile is None else self.profile.pool_bytes_of(self.zoo.architecture(expert).key,
                                                                                weights)

    def resident(self) -> list[str]:
        return list(self._slots)

    def loading(self) -> list[str]:
        return list(self._loading)

    def unavailable_reason(self, expert: str) -> str | None:
        if expert in self.zoo.unavailable:
            return f"expert {expert!r} cannot be built: {self.zoo.unavailable[expert]}"
        need = self.need(expert)
        if need > self.ledger.capacity:
            return (
                f"expert {expert!r} needs {need / 2**20:.1f} MiB but the pool {self.ledger.name} has only "
                f"{self.ledger.capacity / 2**20:.1f} MiB; raise memory.expert_pool_mb so that every "
                f"executor's pool holds at least {need / 2**20:.0f} MiB"
            )
        return self._failed.get(expert)

    def failed(self) -> dict[str, str]:
        """Experts whose load failed (missing, corrupt or swapped weights), with the reason; their requests fail."""
        with self._cv:
            return dict(self._failed)

    # -- mechanics shared by every driver (executor threads, the simulator); under the lock --------
    def try_pin(self, expert: str) -> nn.Module | None:
        """A hit: pin the resident expert for a batch and return its module (None if not resident).

        The simulator's modules are None; it asks `is_resident` before pinning.
        """
        slot = self._slots.get(expert)
        if slot is None:
            return None
        self._seq += 1
        slot.used_seq = self._seq
        slot.in_use += 1
        self.stats.hits += 1
        counters = self.per_expert[expert]
        counters.hits += 1
        counters.last_used = time.time()
        if slot.prefetched:
            slot.prefetched = False
            self.stats.prefetch_used += 1
        return slot.module

    def is_resident(self, expert: str) -> bool:
        return expert in self._slots

    def is_loading(self, expert: str) -> bool:
        return expert in self._loading

    def unpin(self, expert: str) -> None:
        self._slots[expert].in_use -= 1
        self._cv.notify_all()

    def begin_load(self, expert: str, evict: bool = True,
                   needed_at: int | None = None) -> list[tuple[str, nn.Module]] | None:
        """Make room in the policy's eviction order and reserve `expert`'s bytes.

        Returns the evicted (expert, module) pairs, for the caller to retire
        once it has left the lock (freeing weights is not a decision), or None
        when only pinned experts stand in the way (then nothing is evicted).
        `needed_at` (a prefetch: how many queued groups run before `expert`'s):
        no expert whose group runs no later is evicted for it, so a prefetch
        never buys a reload sooner than the load it saves. The time spent here
        is the EM overhead.
        """
        t0 = time.perf_counter()
        need = self.need(expert)
        evicted: list[tuple[str, nn.Module]] = []
        if self.ledger.free < need and evict:
            waiting = self._next_use() if needed_at is not None else {}
            free, victims = self.ledger.free, []
            for victim in self._eviction_order():
                if free >= need:
                    break
                if needed_at is not None and waiting.get(victim, needed_at + 1) <= needed_at:
                    break  # the order puts queued experts last, furthest use first: the rest are needed sooner
                victims.append(victim)
                free += self.ledger.size_of(victim)
            if free >= need:
                evicted = [(victim, self._evict(victim)) for victim in victims]
        fits = self.ledger.free >= need
        if fits:
            self.ledger.reserve(expert, need)
            self._loading.add(expert)
        self.stats.decision_s += time.perf_counter() - t0
        return evicted if fits else None

    def begin_prefetch(self, expert: str) -> list[tuple[str, nn.Module]] | None:
        """`begin_load` for a prefetch: room made only from experts needed after `expert` or not queued at all."""
        return self.begin_load(expert, needed_at=self._next_use().get(expert, 0))

    def install(self, expert: str, module: nn.Module | None, tier: str, seconds: float, pin: bool,
                prefetched: bool = False, initial: bool = False) -> None:
        """A load begun with `begin_load` finished: the expert is resident (and pinned if asked)."""
        self._seq += 1
        self._slots[expert] = _Slot(module, self.ledger.size_of(expert), self._seq, self._seq,
                                    in_use=1 if pin else 0, prefetched=prefetched)
        self._loading.discard(expert)
        if initial:
            self.stats.initial_loads += 1
        else:
            self.stats.switches += 1
            self.stats.record_load(tier, seconds)
            counters = self.per_expert[expert]
            counters.loads += 1
            counters.last_used = time.time()
            self.loads.append((expert, tier, time.perf_counter() - seconds, seconds))
        self._cv.notify_all()

    def first_batch(self, expert: str) -> bool:
        """Whether the batch about to run is the first on this expert since its load (asked once per batch)."""
        with self._cv:
            slot = self._slots.get(expert)
            if slot is None or not slot.fresh:
                return False
            slot.fresh = False
            return True

    def _eviction_order(self) -> list[str]:
        """The unpinned residents in the order the policy's evictor would drop them."""
        view = EvictionView(
            candidates=[Resident(n, s.nbytes, s.loaded_seq, s.used_seq) for n, s in self._slots.items()
                        if s.in_use == 0],
            resident=frozenset(self._slots), next_use=self._next_use(), usage=self.usage)
        return self.evictor.order(view)

    def resize(self, capacity: int) -> None:
        """A new pool size, live (the dashboard's allocation): evicts in the policy's order down to it.

        Experts pinned by a running batch stay; the pool is then over its size
        until they finish, and the next load evicts the rest.
        """
        evicted: list[tuple[str, nn.Module]] = []
        with self._cv:
            shrunk = capacity < self.ledger.capacity
            self.ledger.capacity = capacity
            for victim in self._eviction_order() if self.ledger.free < 0 else []:
                if self.ledger.free >= 0:
                    break
                evicted.append((victim, self._evict(victim)))
            self._cv.notify_all()
        self.retire(evicted)
        if shrunk and self.arena is not None:
            self.arena.trim()  # a smaller pool gives its memory back, not just its ledger bytes

    def abort_load(self, expert: str, reason: str) -> None:
        """A load begun with `begin_load` failed: give its bytes back, remember why."""
        self._failed[expert] = reason
        self._loading.discard(expert)
        self.ledger.release(expert)
        self._cv.notify_all()

    def busy_with(self, expert: str) -> bool:
        """A batch runs on `expert` here, or it is being loaded (its weights cannot be replaced now)."""
        slot = self._slots.get(expert)
        return expert in self._loading or (slot is not None and slot.in_use > 0)

    def forget(self, expert: str) -> list[tuple[str, nn.Module]]:
        """Drop `expert` (resident and idle) and its failure: its weights were replaced, the next use loads the
        new ones. Under the lock; the caller retires what is returned, outside it."""
        self._failed.pop(expert, None)
        self.backend.forget(expert)
        if expert not in self._slots:
            return []
        return [(expert, self._evict(expert))]

    def retire(self, evicted: list[tuple[str, nn.Module]]) -> None:
        """Hand evicted modules' shells back to their architectures (outside the lock: it is not a decision)."""
        for name, module in evicted:
            if module is not None:  # the simulator's residents have none
                self.backend.retire(self.zoo.architecture(name), module, self.device.torch)
                key = self._arena_keys.pop(id(module), None)
                if key is not None:  # evicted and unpinned, it serves nothing any more: its slot may be overwritten
                    self.arena.free(key)

    def _evict(self, expert: str) -> nn.Module:
        slot = self._slots.pop(expert)
        self.ledger.release(expert)
        self.stats.evictions += 1
        return slot.module

    # -- the executor threads' side: blocking waits and real loads -----------------------------------
    def acquire(self, expert: str, clock: ExecutorTime | None = None) -> nn.Module:
        """The expert's module, resident and pinned; loads (switches) it if needed.

        `clock` gets the seconds spent waiting: on a load (this one's or
        another executor's) or blocked behind pinned experts.
        """
        clock = clock if clock is not None else ExecutorTime()
        with self._cv:
            while True:
                reason = self.unavailable_reason(expert)
                if reason:
                    raise ExpertUnavailable(reason)
                module = self.try_pin(expert)
                if module is not None:
                    return module
                t0 = time.perf_counter()
                if expert in self._queued:  # its prefetch waits behind others: wanted now, so loaded now, here
                    evicted = self._queued.pop(expert)  # the room its prefetch made, retired here, not later
                    self.stats.prefetches -= 1
                    self.stats.prefetch_claimed += 1
                    break
                if expert in self._loading:
                    self._cv.wait()
                    clock.load += time.perf_counter() - t0
                    continue
                evicted = self.begin_load(expert)
                if evicted is None:  # only pinned experts in the way: wait for one to unpin
                    self._cv.wait()
                    clock.blocked += time.perf_counter() - t0
                    continue
                break
        self.retire(evicted)  # free evicted weights outside the lock
        t0 = time.perf_counter()
        self._load(expert, pin=True)
        clock.load += time.perf_counter() - t0
        with self._cv:
            slot = self._slots.get(expert)
            if slot is None:
                raise ExpertUnavailable(self._failed.get(expert, f"loading {expert!r} failed"))
            return slot.module

    def release(self, expert: str) -> None:
        with self._cv:
            self.unpin(expert)

    def prefetch(self, expert: str) -> bool:
        """Start loading `expert` in the background if room can be made without waiting and without evicting an
        expert whose queued group runs before `expert`'s."""
        with self._cv:
            if self.has(expert) or self.unavailable_reason(expert):
                return False
            evicted = self.begin_prefetch(expert)
            if evicted is None:
                return False
            self.stats.prefetches += 1
            self._queued[expert] = evicted
        self._loader.submit(self._prefetch_load, expert)
        return True

    def _prefetch_load(self, expert: str) -> None:
        with self._cv:
            evicted = self._queued.pop(expert, None)
        if evicted is None:
            return  # an executor needed it first and loaded it itself (`acquire`)
        self.retire(evicted)
        self._load(expert, False, True)

    def preload(self, expert: str) -> None:
        """Initial placement before serving: a load into free space, not counted as a switch."""
        with self._cv:
            if self.has(expert) or self.unavailable_reason(expert):
                return
            if self.begin_load(expert, evict=False) is None:
                return
        self._load(expert, pin=False, initial=True)

    def close(self) -> None:
        self._loader.shutdown(wait=True)

    def _load(self, expert: str, pin: bool, prefetched: bool = False, initial: bool = False) -> None:
        sharing = self.concurrency if not self.device.is_cuda else None
        if sharing is not None:
            sharing.load_started()
        try:
            self._load_counted(expert, pin, prefetched, initial)
        finally:
            if sharing is not None:
                sharing.load_ended()

    def _load_counted(self, expert: str, pin: bool, prefetched: bool, initial: bool) -> None:
        t0 = time.perf_counter()
        key = f"{expert}#{next(self._load_ids)}"
        taken: list[bool] = []
        arch, sha = self.zoo.architecture(expert), self.zoo.entries[expert].weights_sha256

        def slot(nbytes: int) -> memoryview | None:  # one slot a load: its first read gets the pool's memory
            if taken:
                return None
            taken.append(True)
            return self._slot(key, nbytes)

        pooled = slot if self.arena is not None else None

        def fetch() -> tuple[StateDict, str]:
            state, record = self.store.fetch(expert, self.device, pooled)
            return state, record.tier.value

        try:
            module = self.backend.cached(expert, sha, self.device.torch)  # a runtime session kept in the host tier
            tier = "host"
            if module is None:
                module, tier = self.backend.load(arch, expert, sha,
                                                 Weights(fetch, self.store.drop_page_cache, slot=pooled),
                                                 self.device.torch, self.zoo.root / "runtime")
            seconds = time.perf_counter() - t0  # the whole switch: fetch and module build
        except (WeightsUnavailable, RuntimeError, KeyError, ValueError, OSError) as exc:
            if self.arena is not None:
                self.arena.free(key)
            with self._cv:  # a KeyError's text is only its key: name the error, or the failure reads as '...'
                self.abort_load(expert, f"KeyError: {exc}" if isinstance(exc, KeyError) else str(exc))
            return
        if self.arena is not None and self.arena.holds(key):
            if self.backend.in_pool_memory(module):
                self._arena_keys[id(module)] = key
            else:
                self.arena.free(key)  # a runtime copied the weights into its session: the slot is free again
        with self._cv:
            self.install(expert, module, tier, seconds, pin, prefetched, initial)

    def _slot(self, key: str, nbytes: int) -> memoryview | None:
        assert self.arena is not None
        view = self.arena.alloc(key, nbytes)
        if view is None:
            self.stats.unpooled_loads += 1
        return view
