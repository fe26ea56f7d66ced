"""POST /auth/sign-in: a name and password for a session token (the dashboard attached to a kiosk signs in here);
POST /auth/sign-out: that token revoked (the dashboard locks or closes).

The one route that takes no token. The password is checked with argon2 against the plant's users (access/users.py)
and never logged; a refusal is recorded in the audit trail. The session token is an API token like any other
(hashed, revocable with `inspector user revoke`), expiring after `session_hours`.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from ..access.gate import Gate
from ..access.identity import Unauthenticated
from ..access.users import UserBook
from ..results.errors import StoreUnavailable
from .http import Call, HttpError, json_object


class SignIn:
    def __init__(self, users: UserBook, session_hours: float, gate: Gate | None = None) -> None:
        self.users, self.session_hours, self.gate = users, session_hours, gate

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
        try:
            who = self.users.sign_in(name, password, call.who.origin)
            token = self.users.issue(who, who.name, f"session from {call.who.origin}", self.session_hours / 24,
                                     audit=False)  # the sign-in itself is the record
        except Unauthenticated:
            raise
        except StoreUnavailable as exc:
            raise HttpError(503, f"cannot check the sign-in now: {exc}") from None
        expires = datetime.now(timezone.utc) + timedelta(hours=self.session_hours)
        return {"token": token, "name": who.name, "role": who.role, "expires_at": expires.isoformat()}
