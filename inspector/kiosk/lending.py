"""The kiosk's side of memory grants: it owns the memory set aside for a language model beside the line
(`--llm-mb`) and lends it over its token-guarded API (runtime/grants.py has the protocol)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..runtime.grants import GrantBook, GrantRefused, GrantUnknown, MiB
from ..runtime.memory import DeviceBudget
from .http import Call, HttpError, json_object


class Lender:
    def __init__(self, device_key: str, llm_mb: float, lease_s: float, say: Callable[[str], None]) -> None:
        self.book = GrantBook(DeviceBudget(f"{device_key} (set aside for a model)", int(llm_mb * MiB)), lease_s)
        self.say = say

    def routes(self) -> dict[str, Callable[[Call], dict[str, Any]]]:
        return {"/ledger/grant": self.grant, "/ledger/renew": self.renew, "/ledger/release": self.release}

    def snapshot(self) -> dict[str, Any]:
        self._sweep()
        return self.book.snapshot()

    def grant(self, call: Call) -> dict[str, Any]:
        req = json_object(call.body)
        holder, nbytes = str(req.get("holder") or "unnamed"), req.get("bytes")
        if not isinstance(nbytes, int):
            raise ValueError('send {"holder": "...", "bytes": N} with N a whole number of bytes')
        self._sweep()
        try:
            g = self.book.grant(holder, nbytes)
        except GrantRefused as e:
            raise HttpError(409, str(e)) from None
        self.say(f"lent {g.nbytes / MiB:.1f} MiB to {holder} (grant {g.id[:8]}, lease {self.book.lease_s:g} s)")
        return {"grant": g.id, "bytes": g.nbytes, "device": self.book.budget.device_key, "lease_s": self.book.lease_s}

    def renew(self, call: Call) -> dict[str, Any]:
        gid = str(json_object(call.body).get("grant"))
        try:
            g = self.book.renew(gid)
        except GrantUnknown:
            raise HttpError(404, f"no grant {gid!r}: it expired or was released; ask for a new one") from None
        return {"grant": g.id, "lease_s": self.book.lease_s}

    def release(self, call: Call) -> dict[str, Any]:
        gid = str(json_object(call.body).get("grant"))
        released = self.book.release(gid)
        if released:
            self.say(f"grant {gid[:8]} given back")
        return {"released": released}

    def _sweep(self) -> None:
        for g in self.book.sweep():
            self.say(f"took back {g.nbytes / MiB:.1f} MiB from {g.holder}: its lease ran out (grant {g.id[:8]})")

