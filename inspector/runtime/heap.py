"""Giving freed heap memory back to the operating system (glibc's malloc_trim), for months of running.

A line allocates and frees image and tensor buffers of many sizes from several threads; glibc keeps the
freed pages in its arenas, so the resident set creeps up although nothing is live (measured: ~50 MiB over
12,000 parts, of which malloc_trim returns all but a few). Trimming every half minute keeps the box's
memory flat. Elsewhere than glibc it does nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time

try:
    _name = ctypes.util.find_library("c")
    _trim = getattr(ctypes.CDLL(_name), "malloc_trim", None) if _name else None
except OSError:
    _trim = None


def trim() -> bool:
    """Return freed heap to the OS now; False where the C library has no malloc_trim."""
    if _trim is None:
        return False
    _trim(0)
    return True


class Trimmer:
    """Calls `trim` at most every `every_s` seconds, from whichever thread calls `maybe` (cheap otherwise)."""

    def __init__(self, every_s: float = 30.0) -> None:
        self.every_s = every_s
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def maybe(self) -> None:
        now = time.monotonic()
        if now - self._last < self.every_s:
            return
        with self._lock:
            if now - self._last < self.every_s:
                return
            self._last = now
        trim()
