"""An executor's request queue: an ordered list of same-expert groups.

Grouping is what lets one switch serve many requests; where a new request
goes is the policy's arranging decision, the queue offers the moves (append,
join, join in front) and keeps the order and the predicted work. Groups in
front (experts already resident) may pass the main lane's head group at most
MAX_BYPASS batches in a row, so nothing waits forever. A main-lane group whose
expert has become resident since (a prefetch, another executor's switch into a
shared pool) joins the front lane in the order the groups formed (`promote`).
All methods run under the engine lock.
"""
from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .request import Request


@dataclass
class Group:
    """Consecutive requests for one expert, executed as one or more batches."""

    expert: str
    requests: deque[Request] = field(default_factory=deque)
    front: bool = False  # in the front lane: its expert was resident when the group formed, or is now (promote)
    bypassed: int = 0  # batches of front groups served while this one waited at the main head
    seq: int = 0  # the order the queue's groups formed in


MAX_BYPASS = 32


class ExecutorQueue:
    def __init__(self) -> None:
        self.groups: deque[Group] = deque()
        self._by_expert: dict[str, Group] = {}  # the queued group of each expert (at most one in a grouped queue)
        self.pending_s = 0.0  # predicted seconds of queued + running work
        self.running: str | None = None  # expert of the batch being executed
        self._formed = 0  # groups formed so far: the next one's seq

    def __len__(self) -> int:
        # read by the dashboard's snapshot from another thread while the engine's thread changes the queue: the
        # groups copied in one step (a tuple of a deque is made under the GIL), never iterated while they change
        return sum(len(g.requests) for g in tuple(self.groups))

    def __iter__(self) -> Iterator[Group]:
        return iter(self.groups)

    def has_expert(self, expert: str) -> bool:
        """Queued (or running): its switch is already paid for on this executor."""
        return self.running == expert or expert in self._by_expert

    def group_for(self, expert: str) -> Group | None:
        """The queued group of `expert` (the first one, in an FCFS queue that holds several)."""
        return self._by_expert.get(expert)

    def _new_group(self, request: Request) -> Group:
        self._formed += 1
        return Group(request.expert, deque([request]), seq=self._formed)

    def _index(self, group: Group) -> None:
        self._by_expert.setdefault(group.expert, group)

    def _unindex(self, group: Group) -> None:
        if self._by_expert.get(group.expert) is group:
            del self._by_expert[group.expert]
            later = next((g for g in self.groups if g.expert == group.expert), None)  # FCFS: a later group
            if later is not None:
                self._by_expert[group.expert] = later

    def append(self, request: Request) -> None:
        """First come, first served: behind everything, batched only with an identical tail."""
        if self.groups and self.groups[-1].expert == request.expert:
            self.groups[-1].requests.append(request)
        else:
            group = self._new_group(request)
            self.groups.append(group)
            self._index(group)

    def join(self, request: Request, front: bool = False, behind_running: bool = True) -> None:
        """Arrange behind queued requests of the same expert (paper §4.2), else start a group.

        With `behind_running`, the batch being executed counts as queued: a
        request for the running expert starts a group right behind it, while
        that expert is resident. With `front`, a new group goes to the end of
        the front lane instead of the end of the queue.
        """
        group = self.group_for(request.expert)
        if group is not None:
            group.requests.append(request)
            return
        new = self._new_group(request)
        if (behind_running and self.running == request.expert) or front:
            new.front = True
            pos = 0
            while pos < len(self.groups) and self.groups[pos].front:
                pos += 1
            self.groups.insert(pos, new)
        else:
            self.groups.append(new)
        self._index(new)

    def promote(self, resident: Callable[[str], bool]) -> None:
        """Main-lane groups whose expert is resident now (or on its way: `resident` is the pool's `has`, as when
        requests are placed) join the front lane, merged into it by the order the groups formed. A group's lane
        is chosen when it forms; one that stayed in the main lane after its expert arrived was passed by every
        later front group until the expert was evicted and loaded again (the simulator, wide-150 x 4000: 218
        switches, against 152 with promotion)."""
        ready = [g for g in self.groups if not g.front and resident(g.expert)]
        if not ready:
            return
        lane = [g for g in self.groups if g.front]
        for g in ready:
            g.front, g.bypassed = True, 0
        # each list keeps its own order (an aged-out group at the lane's head stays there); merged by seq
        self.groups = deque([*heapq.merge(lane, ready, key=lambda g: g.seq), *(g for g in self.groups if not g.front)])

    def take_batch(self, limit: int | Callable[[str], int]) -> tuple[str, list[Request]] | None:
        """Pop up to `limit` requests of the head group (the batch splitter's cut). Given a function, the limit is
        asked of the group that is cut, which is not the head's when an aged-out main-lane group goes first."""
        if not self.groups:
            return None
        head = self.groups[0]
        if head.front:
            waiting = next((g for g in self.groups if not g.front), None)
            if waiting is not None:
                waiting.bypassed += 1
                if waiting.bypassed > MAX_BYPASS:  # aged out: it goes first now
                    self.groups.remove(waiting)
                    self.groups.appendleft(waiting)
                    waiting.front, waiting.bypassed = True, 0
                    head = waiting
        most = limit(head.expert) if callable(limit) else limit
        batch = [head.requests.popleft() for _ in range(min(most, len(head.requests)))]
        if not head.requests:
            self.groups.popleft()
            self._unindex(head)
        self.running = head.expert
        return head.expert, batch

    def upcoming_experts(self) -> list[str]:
        """Experts of the queued groups in execution order (for prefetching)."""
        return [g.expert for g in self.groups]

    def finish(self, batch: list[Request]) -> None:
        self.running = None
        self.pending_s = max(0.0, self.pending_s - sum(r.predicted_s for r in batch))
