"""Policies: the decisions that distinguish CoServe from the Samba-CoE baselines.

A policy is five small answers over one engine's mechanics:
  assign   which executor queue gets a new request      (round-robin | min-makespan)
  arrange  where in that queue it goes                   (fcfs | group | resident-first)
  evict    which residents leave a full pool first       (lru | fifo | two-stage | two-stage + queue-aware)
  prefetch whether to load the next group's expert while the current batch runs
  pools    one pool per executor (the paper, §4.1) or one per device shared by its executors
Baselines and ours run through the same queues, executors and loads, which
is what makes the side-by-side benchmark fair.

`coserve-paper` is the paper's mechanisms and nothing else; the rows after it
add our extras one at a time and end at `coserve` (ABLATION is that ladder).
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ...errors import UnknownChoice
from .queue import ExecutorQueue
from .request import Request
from .usage import ExpertUsage

# --- assign ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueOption:
    """One executor queue as the assigner sees it for a new request."""

    index: int
    pending_s: float  # predicted work already queued there
    added_s: float  # predicted extra latency if the request goes there


class Assigner(Protocol):
    needs_estimates: bool

    def choose(self, options: Sequence[QueueOption]) -> int: ...


class RoundRobin:
    """Even distribution over executors, blind to experts (Samba-CoE Parallel, CoServe None)."""

    needs_estimates = False

    def __init__(self) -> None:
        self._next = itertools.count()

    def choose(self, options: Sequence[QueueOption]) -> int:
        return options[next(self._next) % len(options)].index


class MinMakespan:
    """Paper §4.2, request assigning: minimise the longest queue, then the added latency."""

    needs_estimates = True
    EPS = 1e-9

    def choose(self, options: Sequence[QueueOption]) -> int:
        best: tuple[float, float, int] | None = None
        for opt in options:
            others = max((o.pending_s for o in options if o.index != opt.index), default=0.0)
            makespan = max(opt.pending_s + opt.added_s, others)
            key = (makespan, opt.added_s, opt.index)
            if best is None or _less(key, best, self.EPS):
                best = key
        assert best is not None
        return best[2]


def _less(a: tuple[float, float, int], b: tuple[float, float, int], eps: float) -> bool:
    if abs(a[0] - b[0]) > eps:
        return a[0] < b[0]
    if abs(a[1] - b[1]) > eps:
        return a[1] < b[1]
    return a[2] < b[2]


# --- arrange ------------------------------------------------------------------------------------


class Arranger(Protocol):
    name: str

    def place(self, queue: ExecutorQueue, request: Request, resident: bool) -> None: ...

    def refresh(self, queue: ExecutorQueue, resident: Callable[[str], bool]) -> None:
        """Before each batch is cut: what may have changed in the queue's order since the requests were placed."""


class FCFS:
    """First come, first served (Samba-CoE): behind everything."""

    name = "fcfs"

    def place(self, queue: ExecutorQueue, request: Request, resident: bool) -> None:
        queue.append(request)

    def refresh(self, queue: ExecutorQueue, resident: Callable[[str], bool]) -> None:
        pass


class GroupBySameExpert:
    """Paper §4.2, request arranging: behind queued requests of the same expert, else at the end."""

    name = "group"

    def place(self, queue: ExecutorQueue, request: Request, resident: bool) -> None:
        queue.join(request, behind_running=False)

    def refresh(self, queue: ExecutorQueue, resident: Callable[[str], bool]) -> None:
        pass


class ResidentFirst:
    """Group by expert, and start groups of already-resident experts in a front lane.

    Beyond the paper: a group for an expert that is in the pool now (or
    running on this executor) runs before groups that need a switch, which
    meanwhile grow, so one switch serves more requests. The queue bounds how
    long the main lane can be passed (MAX_BYPASS batches). A main-lane group
    whose expert has arrived since joins the front lane (`refresh`).
    """

    name = "resident-first"

    def place(self, queue: ExecutorQueue, request: Request, resident: bool) -> None:
        queue.join(request, front=resident, behind_running=True)

    def refresh(self, queue: ExecutorQueue, resident: Callable[[str], bool]) -> None:
        queue.promote(resident)


# --- evict ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Resident:
    """A resident expert that may be evicted (not in use, not being loaded)."""

    name: str
    nbytes: int
    loaded_seq: int
    used_seq: int


@dataclass(frozen=True)
class EvictionView:
    candidates: Sequence[Resident]
    resident: frozenset[str]  # everything resident in the pool, pinned ones included
    next_use: Mapping[str, int]  # experts with requests waiting -> how many groups run before theirs
    usage: ExpertUsage


class Evictor(Protocol):
    name: str

    def order(self, view: EvictionView) -> list[str]: ...


class LRU:
    name = "lru"

    def order(self, view: EvictionView) -> list[str]:
        return [r.name for r in sorted(view.candidates, key=lambda r: r.used_seq)]


class FIFO:
    name = "fifo"

    def order(self, view: EvictionView) -> list[str]:
        return [r.name for r in sorted(view.candidates, key=lambda r: r.loaded_seq)]


class DependencyAware:
    """Paper §4.3, two-stage eviction.

    Stage 1: subsequent experts none of whose preliminary experts are resident
    (they cannot run until one is loaded), largest first.
    Stage 2: the rest by ascending usage probability. The paper names no tie
    rule; the least recently used goes first.

    With `queue_aware` (beyond the paper), the queues say which experts are
    needed next: an expert with requests waiting is left out of stage 1 and
    goes last in stage 2, the one whose group runs furthest back first
    (Belady's rule on what the queue already knows). Evicting it would buy a
    certain reload.
    """

    def __init__(self, queue_aware: bool = False) -> None:
        self.queue_aware = queue_aware
        self.name = "two-stage" + (" + queue-aware" if queue_aware else "")

    def order(self, view: EvictionView) -> list[str]:
        usage = view.usage
        waiting = view.next_use if self.queue_aware else {}
        stage1 = [
            r for r in view.candidates
            if usage.is_subsequent(r.name)
            and not (usage.preliminaries[r.name] & view.resident)
            and r.name not in waiting
        ]
        chosen = {r.name for r in stage1}
        idle = [r for r in view.candidates if r.name not in chosen and r.name not in waiting]
        queued = [r for r in view.candidates if r.name in waiting]
        stage1.sort(key=lambda r: (-r.nbytes, r.name))
        idle.sort(key=lambda r: (usage.p(r.name), r.used_seq))
        queued.sort(key=lambda r: (-waiting[r.name], usage.p(r.name)))
        return [r.name for r in stage1 + idle + queued]


# --- the policies ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    name: str
    summary: str
    make_assigner: Callable[[], Assigner]
    arranger: Arranger
    evictor: Evictor
    prefetch: bool = False
    single_executor: bool = False
    shared_pool: bool = False  # one pool per device for its executors (ours) instead of one per executor (§4.1)


_PAPER_EVICT = DependencyAware()
_QUEUE_EVICT = DependencyAware(queue_aware=True)

_POLICIES: dict[str, Policy] = {
    p.name: p
    for p in [
        # the Samba-CoE baselines (§5.1)
        Policy("samba", "Samba-CoE: one executor per device, FCFS, LRU", RoundRobin, FCFS(), LRU(),
               single_executor=True),
        Policy("samba-fifo", "Samba-CoE with FIFO eviction", RoundRobin, FCFS(), FIFO(), single_executor=True),
        Policy("samba-parallel", "Samba-CoE on CoServe's executors (each its own pool), round-robin, FCFS, LRU",
               RoundRobin, FCFS(), LRU()),
        # the paper's ablation (§5.3, Figure 15), its mechanisms only
        Policy("coserve-none", "CoServe None: round-robin, FCFS, FIFO eviction", RoundRobin, FCFS(), FIFO()),
        Policy("coserve-em", "+ two-stage eviction (§4.3)", RoundRobin, FCFS(), _PAPER_EVICT),
        Policy("coserve-em-ra", "+ request arranging (§4.2)", RoundRobin, GroupBySameExpert(), _PAPER_EVICT),
        Policy("coserve-paper", "+ request assigning (§4.2): the paper's CoServe", MinMakespan, GroupBySameExpert(),
               _PAPER_EVICT),
        # our extras, one at a time
        Policy("coserve-paper+qe", "+ queue-aware eviction (ours)", MinMakespan, GroupBySameExpert(), _QUEUE_EVICT),
        Policy("coserve-paper+qe+lane", "+ resident-first lane (ours)", MinMakespan, ResidentFirst(), _QUEUE_EVICT),
        Policy("coserve-paper+qe+lane+pf", "+ next-group prefetch (ours)", MinMakespan, ResidentFirst(),
               _QUEUE_EVICT, prefetch=True),
        Policy("coserve", "+ one pool per device shared by its executors (ours): the product's policy",
               MinMakespan, ResidentFirst(), _QUEUE_EVICT, prefetch=True, shared_pool=True),
    ]
}

BASELINES = ("samba", "samba-fifo", "samba-parallel")
ABLATION = ("coserve-none", "coserve-em", "coserve-em-ra", "coserve-paper", "coserve-paper+qe",
            "coserve-paper+qe+lane", "coserve-paper+qe+lane+pf", "coserve")
POLICY_NAMES = tuple(_POLICIES)


class UnknownPolicy(UnknownChoice):
    """A policy name the engine does not have."""


def get_policy(name: str) -> Policy:
    try:
        return _POLICIES[name]
    except KeyError:
        raise UnknownPolicy(f"unknown policy {name!r}; choose from {', '.join(POLICY_NAMES)}") from None
