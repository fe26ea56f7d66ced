"""The bounded hand-over between a source and the line, with an explicit overflow policy.

A folder or a replay list can wait for the line (`wait`: back-pressure, nothing
lost). A live camera cannot: its frames keep coming whether the line keeps up
or not, so a full queue drops (`drop-oldest` keeps the freshest boards,
`drop-newest` keeps what is already queued). Every drop is counted and named.
"""
from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a type only: choosing the policy (the CLI's flags) needs no OpenCV
    from .sources import Frame

OVERFLOW_POLICIES = ("wait", "drop-oldest", "drop-newest")


@dataclass
class QueueCounters:
    accepted: int = 0
    dropped: int = 0
    taken: int = 0
    last_dropped: str | None = None  # serial of the last dropped board
    source_error: str | None = None  # why the source stopped, when it did not simply end


class IngestQueue:
    def __init__(self, capacity: int = 8, overflow: str = "wait") -> None:
        if overflow not in OVERFLOW_POLICIES:
            raise ValueError(f"unknown overflow policy {overflow!r}: use one of {', '.join(OVERFLOW_POLICIES)}")
        if capacity < 1:
            raise ValueError(f"ingest queue capacity must be at least 1, got {capacity}")
        self.capacity, self.overflow = capacity, overflow
        self.counters = QueueCounters()
        self._items: deque[Frame] = deque()
        self._cond = threading.Condition()
        self._closed = False

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    def put(self, frame: Frame) -> bool:
        """Queue a frame; False when this frame was not queued (dropped, or the queue is closed)."""
        with self._cond:
            if self.overflow == "wait":
                self._cond.wait_for(lambda: len(self._items) < self.capacity or self._closed)
            if self._closed:
                return False
            kept = True
            if len(self._items) >= self.capacity:
                victim = self._items.popleft() if self.overflow == "drop-oldest" else frame
                self.counters.dropped += 1
                self.counters.last_dropped = victim.serial
                kept = victim is not frame
                if not kept:
                    return False
            self._items.append(frame)
            self.counters.accepted += 1
            self._cond.notify_all()
            return kept

    def get(self, timeout: float | None = None) -> Frame | None:
        """The next frame; None once closed and empty, or after `timeout` with nothing queued."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._items or self._closed, timeout):
                return None
            if not self._items:
                return None
            frame = self._items.popleft()
            self.counters.taken += 1
            self._cond.notify_all()
            return frame

    def close(self) -> None:
        """No more frames: producers stop waiting, consumers get what is queued, then None."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def drain(self) -> Iterator[Frame]:
        while (frame := self.get()) is not None:
            yield frame


def feed(source: Iterable[Frame], queue: IngestQueue) -> None:
    """Move a source's frames into the queue until it ends or the queue is closed; then closes it (a thread target)."""
    try:
        for frame in source:
            if queue.closed:
                break
            if not queue.put(frame) and queue.closed:
                break  # not taken: leave the source where it is (a watched file stays for the next start)
    except Exception as exc:  # noqa: BLE001 - a broken source ends the feed; the operator is told why
        queue.counters.source_error = f"{type(exc).__name__}: {exc}"
    finally:
        queue.close()
