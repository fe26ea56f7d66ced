"""POST /auth/sign-in: a name and password for a session token (the dashboard attached to a kiosk signs in here).

The one route that takes no token. The password is checked with argon2 against the plant's users (access/users.py)
and never logged; a refusal is recorded in the audit trail. The session token is an API token like any other
(hashed, revocable with `inspector user revoke`), expiring after `session_hours`.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from ..access.identity import Unauthenticated
from ..access.users import UserBook
from ..results.errors import StoreUnavailable
from .http import Call, HttpError, json_object


class SignIn:
    def __init__(self, users: UserBook, session_hours: float) -> None:
        self.users, self.session_hours = users, session_hours

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
