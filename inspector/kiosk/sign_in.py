"""POST /auth/sign-in: a name and password for a session token (the dashboard attached to a kiosk signs in here);
POST /auth/sign-out: that token revoked (the dashboard locks or closes).

Guessing is slowed twice: a name is locked out after a few refusals (access/users.py, across the plant), and an
address that keeps failing, whatever names it tries, is answered 429 for a while (here, per kiosk).

The one route that takes no token. The password is checked with argon2 against the plant's users (access/users.py)
and never logged; a refusal is recorded in the audit trail. The session token is an API token like any other
(hashed, revocable with `inspector user revoke`), expiring after `session_hours`.
"""
from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from datetime import datetime, timedelta, timezone
from typing import Any

from ..access.gate import Gate
from ..access.identity import Unauthenticated
from ..access.users import UserBook
from ..results.errors import StoreUnavailable
from .http import Call, HttpError, json_object

ADDRESS_REFUSALS = 20  # failed sign-ins from one address within ADDRESS_WINDOW_S before it is answered 429
ADDRESS_WINDOW_S = 900.0


class SignIn:
    def __init__(self, users: UserBook, session_hours: float, gate: Gate | None = None) -> None:
        self.users, self.session_hours, self.gate = users, session_hours, gate
        self._refused: dict[str, deque[float]] = defaultdict(deque)  # address -> times of its refusals
        self._lock = threading.Lock()

    def _recent(self, address: str) -> int:
        with self._lock:
            seen = self._refused[address]
            while seen and seen[0] < time.monotonic() - ADDRESS_WINDOW_S:
                seen.popleft()
            if not seen:
                del self._refused[address]
            return len(seen)

    def sign_out(self, call: Call) -> dict[str, Any]:
        key = call.who.token_key
        if key is None:
            raise ValueError("only a person's token signs out (this one is the box's service token)")
        self.users.revoke(call.who, key, "signed out")
        if self.gate is not None:
            self.gate.forget(key)
        return {"signed_out": call.who.name}

    def __call__(self, call: Call) -> dict[str, Any]:
        doc = json_object(call.body, 'JSON {"user": NAME, "password": PASSWORD}')
        name, password = doc.get("user"), doc.get("password")
        if not isinstance(name, str) or not isinstance(password, str):
            raise ValueError('send {"user": NAME, "password": PASSWORD}')
        if self._recent(call.address) >= ADDRESS_REFUSALS:
            raise HttpError(429, f"too many failed sign-ins from {call.address}: wait {ADDRESS_WINDOW_S / 60:.0f} "
                                 "minutes")
        try:
            who = self.users.sign_in(name, password, call.who.origin)
            token = self.users.issue(who, who.name, f"session from {call.who.origin}", self.session_hours / 24,
                                     audit=False)  # the sign-in itself is the record
        except Unauthenticated:
            with self._lock:
                self._refused[call.address].append(time.monotonic())
            raise
        except StoreUnavailable as exc:
            raise HttpError(503, f"cannot check the sign-in now: {exc}") from None
        expires = datetime.now(timezone.utc) + timedelta(hours=self.session_hours)
        return {"token": token, "name": who.name, "role": who.role, "expires_at": expires.isoformat()}
