"""Byte-exact accounting of what is resident in one pool against its budget."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field


class OverBudget(RuntimeError):
    """A reservation would exceed a ledger's budget: evict first or raise the budget."""


@dataclass
class MemoryLedger:
    """Counts every byte a pool holds, keyed by what holds it.

    The ledger is the single truth about residency bytes; pools, caches and the
    MoE engine all reserve through one so that the runtime can report totals.
    """

    name: str
    capacity: int
    _entries: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    peak: int = 0

    @property
    def used(self) -> int:
        with self._lock:
            return sum(self._entries.values())

    @property
    def free(self) -> int:
        return self.capacity - self.used

    def holds(self, key: str) -> bool:
        with self._lock:
            return key in self._entries

    def size_of(self, key: str) -> int:
        with self._lock:
            return self._entries[key]

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._entries)

    def reserve(self, key: str, nbytes: int) -> None:
        if nbytes < 0:
            raise ValueError(f"{self.name}: negative reservation {nbytes} for {key}")
        with self._lock:
            if key in self._entries:
                raise KeyError(f"{self.name}: {key} is already reserved")
            used = sum(self._entries.values())
            if used + nbytes > self.capacity:
                raise OverBudget(
                    f"{self.name}: {key} needs {nbytes} bytes but only {self.capacity - used} of "
                    f"{self.capacity} are free"
                )
            self._entries[key] = nbytes
            self.peak = max(self.peak, used + nbytes)

    def release(self, key: str) -> int:
        with self._lock:
            return self._entries.pop(key)


class DeviceBudget:
    """All ledgers carved out of one device's memory, so one budget covers every client.

    The inspection engine and the MoE engine each open ledgers here; together
    they may not exceed the device budget.
    """

    def __init__(self, device_key: str, total_bytes: int) -> None:
        self.device_key = device_key
        self.total = total_bytes
        self._ledgers: dict[str, MemoryLedger] = {}
        self._lock = threading.Lock()

    @property
    def allocated(self) -> int:
        with self._lock:
            return sum(ledger.capacity for ledger in self._ledgers.values())

    def open(self, name: str, capacity: int) -> MemoryLedger:
        with self._lock:
            taken = sum(ledger.capacity for ledger in self._ledgers.values())
            if name in self._ledgers:
                raise KeyError(f"ledger {name} already open on {self.device_key}")
            if taken + capacity > self.total:
                raise OverBudget(
                    f"{self.device_key}: ledger {name} wants {capacity} bytes, only "
                    f"{self.total - taken} of {self.total} are unallocated"
                )
            ledger = MemoryLedger(name=f"{self.device_key}/{name}", capacity=capacity)
            self._ledgers[name] = ledger
            return ledger

    def close(self, name: str) -> None:
        with self._lock:
            self._ledgers.pop(name, None)

    def ledgers(self) -> dict[str, MemoryLedger]:
        with self._lock:
            return dict(self._ledgers)
