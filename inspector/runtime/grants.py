"""Memory grants: one process owns a device's ledger and lends shares of it to others, on a lease.

The kiosk owns the box's device budget. A language model running as its own
process asks for the bytes its expert pool needs; the grant is a ledger opened
in the owner's budget, so the owner's accounting covers both, and nothing can be
lent twice. A grant is a lease: the holder renews it, and a holder that stops
renewing (killed, hung) loses it after `lease_s`, so a crashed model never keeps
the memory from the next one.

The protocol (over the kiosk's token-guarded HTTP API, the manual's "The language
model as a local service"):
    POST /ledger/grant   {"holder": str, "bytes": int} -> {"grant", "bytes", "device", "lease_s"} or 409
    POST /ledger/renew   {"grant": str}                -> {"grant", "lease_s"} or 404 (expired: ask again)
    POST /ledger/release {"grant": str}                -> {"released": bool}
"""
from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from .memory import DeviceBudget, OverBudget

MiB = 1 << 20


class GrantRefused(RuntimeError):
    """The owner cannot lend that much; the message says how much it could."""


class GrantUnknown(KeyError):
    """No such grant (never given, released, or expired): ask for a new one."""


@dataclass
class Grant:
    id: str
    holder: str
    nbytes: int
    expires: float


class GrantBook:
    def __init__(self, budget: DeviceBudget, lease_s: float = 15.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.budget, self.lease_s, self.clock = budget, lease_s, clock
        self._grants: dict[str, Grant] = {}
        self._lock = threading.Lock()

    def grant(self, holder: str, nbytes: int) -> Grant:
        if nbytes <= 0:
            raise ValueError(f"a grant needs a positive number of bytes, got {nbytes}")
        with self._lock:
            self._sweep()
            gid = uuid.uuid4().hex
            try:
                self.budget.open(f"grant:{gid}", nbytes)
            except OverBudget:
                free = self.budget.total - self.budget.allocated
                raise GrantRefused(f"{holder} asked for {nbytes / MiB:.1f} MiB on {self.budget.device_key}; "
                                   f"{free / MiB:.1f} MiB of the {self.budget.total / MiB:.1f} MiB set aside are "
                                   "free. Ask for less (a lower --cache-ratio) or set more aside on the kiosk "
                                   "(--llm-mb)") from None
            g = Grant(gid, holder, nbytes, self.clock() + self.lease_s)
            self._grants[gid] = g
            return g

    def renew(self, gid: str) -> Grant:
        with self._lock:
            self._sweep()
            g = self._grants.get(gid)
            if g is None:
                raise GrantUnknown(gid)
            g.expires = self.clock() + self.lease_s
            return g

    def release(self, gid: str) -> bool:
        with self._lock:
            return self._drop(gid)

    def sweep(self) -> list[Grant]:
        """Take back every grant whose lease ran out; those taken back."""
        with self._lock:
            return self._sweep()

    def snapshot(self) -> dict:
        with self._lock:
            now = self.clock()
            return {"device": self.budget.device_key, "set_aside_bytes": self.budget.total,
                    "lent_bytes": sum(g.nbytes for g in self._grants.values()), "lease_s": self.lease_s,
                    "grants": [{"grant": g.id, "holder": g.holder, "bytes": g.nbytes,
                                "expires_in_s": round(g.expires - now, 1)} for g in self._grants.values()]}

    def _sweep(self) -> list[Grant]:
        now = self.clock()
        gone = [g for g in self._grants.values() if g.expires <= now]
        for g in gone:
            self._drop(g.id)
        return gone

    def _drop(self, gid: str) -> bool:
        g = self._grants.pop(gid, None)
        if g is None:
            return False
        self.budget.close(f"grant:{gid}")
        return True
