"""The model's side of memory grants: ask the kiosk (which owns the box's device ledger) for the expert pool's
bytes before loading, keep the lease renewed, give it back on exit (protocol: runtime/grants.py).

A lease that cannot be renewed (the kiosk restarted, or took it back after a
stall) is asked for again; while the kiosk refuses, the server answers 503 and
its health says why, since memory it does not hold is not its to use.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from ...endpoint import EndpointError, request_json


class GrantError(RuntimeError):
    """The kiosk would not lend the memory (or could not be reached); the message says what to do."""


class Lease:
    def __init__(self, url: str, token: str | None, nbytes: int, log: Callable[[str], None] = lambda m: None,
                 holder: str = "inspector llm serve") -> None:
        self.url, self.token, self.nbytes, self.log = url.rstrip("/"), token, nbytes, log
        self.holder = f"{holder} (pid {os.getpid()})"
        self.lost: str | None = None  # why the grant is not held now
        self._stop = threading.Event()
        doc = self._ask()
        self.grant, self.lease_s, self.device = doc["grant"], float(doc["lease_s"]), doc["device"]
        self._thread = threading.Thread(target=self._keep, name="llm-lease", daemon=True)
        self._thread.start()

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return request_json(self.url + path, body, self.token, timeout=5)
        except EndpointError as e:
            if e.status is None:
                raise GrantError(f"cannot reach the kiosk at {self.url} ({e.message}); is it running with "
                                 "--llm-mb?") from None
            raise GrantError(f"the kiosk at {self.url} answered {e.status} to {path}: {e.message}") from None

    def _ask(self) -> dict[str, Any]:
        return self._post("/ledger/grant", {"holder": self.holder, "bytes": self.nbytes})

    def _keep(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                if self.lost is None:
                    self._post("/ledger/renew", {"grant": self.grant})
                else:
                    self.grant = self._ask()["grant"]
                    self.log("memory grant held again")
                    self.lost = None
            except GrantError as e:
                if self.lost is None:
                    self.log(f"memory grant lost: {e}")
                self.lost = str(e)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        if self.lost is None:
            try:
                self._post("/ledger/release", {"grant": self.grant})
            except GrantError as e:
                self.log(f"could not give the memory grant back ({e}); the kiosk takes it back when its lease ends")
