"""A pool's own block of host memory, which its switches read weights into.

Why: a switch that reads into a fresh buffer pays for that buffer every
time: page faults and zeroing on first touch, then an munmap (and the TLB
shootdowns it sends to the cores computing) when the expert is evicted. On a
CPU box that is the larger part of a switch's CPU cost, and it is taken from
the executors' cores. A pool that owns its memory, as the paper's expert pools
do, reads each expert into a slot of it and hands the slot back on eviction.

Slots start at page-aligned offsets and span whole pages, so a slot can
take an O_DIRECT read (`diskio.read_into`): the disk's DMA lands in the slot
and the CPU copies nothing. Pages are faulted in when the pool is made
(MAP_POPULATE), not by the first switch into each slot: on the project's
2-core box a switch that faulted in its slot's pages beside two computing
executors took 35-58 ms where one into faulted pages took 15 ms
(`results/bench-cpu.md`). They stay; `trim` gives the free ones back (a pool
shrunk live), and those fault in again when next used.
"""
from __future__ import annotations

import bisect
import mmap
import threading

from .diskio import DIRECT_ALIGN, round_up

ALIGN = max(mmap.PAGESIZE, DIRECT_ALIGN)  # whole pages, and what O_DIRECT asks of an address and a length


def aligned(nbytes: int) -> int:
    """`nbytes` rounded up to whole aligned pages: the size a slot for it takes."""
    return round_up(nbytes, ALIGN)


class HostArena:
    """Slots in one anonymous mapping, best fit, neighbours merged when freed.

    A request that no free extent can hold gets None; the caller then reads
    into memory of its own (a fragmented or outgrown arena is slower, never wrong).
    """

    def __init__(self, name: str, capacity: int) -> None:
        self.name = name
        self.capacity = aligned(max(capacity, ALIGN))
        # populated: the pages are faulted in once, here, not by the first switch into each slot (a switch that
        # faults in a slot's pages takes several times as long beside computing executors)
        self._map = mmap.mmap(-1, self.capacity,
                              flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0))
        self._view = memoryview(self._map)
        self._free: list[tuple[int, int]] = [(0, self.capacity)]  # (offset, length), sorted by offset
        self._slots: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def alloc(self, key: str, nbytes: int) -> memoryview | None:
        """A writable, aligned slot of at least `nbytes` (rounded up to pages) for `key`, or None if none fits."""
        need = aligned(nbytes)
        with self._lock:
            if key in self._slots:
                raise KeyError(f"{self.name}: {key} already holds a slot")
            best = None
            for i, (_, length) in enumerate(self._free):
                if length >= need and (best is None or length < self._free[best][1]):
                    best = i
                    if length == need:
                        break
            if best is None:
                return None
            off, length = self._free[best]
            if length == need:
                del self._free[best]
            else:
                self._free[best] = (off + need, length - need)
            self._slots[key] = (off, need)
        return self._view[off : off + need]

    def free(self, key: str) -> bool:
        """Give `key`'s slot back (False if it held none). Its memory must no longer be read: the next load
        overwrites it."""
        with self._lock:
            slot = self._slots.pop(key, None)
            if slot is None:
                return False
            off, length = slot
            i = bisect.bisect(self._free, (off, length))
            if i < len(self._free) and off + length == self._free[i][0]:  # merge with the extent after
                length += self._free[i][1]
                del self._free[i]
            if i > 0 and self._free[i - 1][0] + self._free[i - 1][1] == off:  # and with the one before
                prev_off, prev_len = self._free[i - 1]
                self._free[i - 1] = (prev_off, prev_len + length)
            else:
                self._free.insert(i, (off, length))
        return True

    def holds(self, key: str) -> bool:
        with self._lock:
            return key in self._slots

    @property
    def used(self) -> int:
        with self._lock:
            return sum(length for _, length in self._slots.values())

    @property
    def largest_free(self) -> int:
        with self._lock:
            return max((length for _, length in self._free), default=0)

    def trim(self) -> None:
        """Return the free extents' pages to the OS (they fault in again, zeroed, when next used)."""
        if not hasattr(self._map, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
            return
        with self._lock:
            for off, length in self._free:
                self._map.madvise(mmap.MADV_DONTNEED, off, length)
