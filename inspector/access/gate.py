"""A bearer token to an Identity: what the kiosk's API and the model server ask on every guarded route.

Two kinds of token are known: a person's (`insp_...`, looked up in the results database, see users.py) and the
box's own service token (the installer's token file), which acts with the `service` role only. A person's token
that checked out is remembered for `cache_s` (a dashboard polls several routes a second; a revoked or expired
token is refused at most that long after), a refused one is never remembered.
"""
from __future__ import annotations

import hashlib
import hmac
import threading
import time

from .identity import Identity, Unauthenticated
from .roles import Permission
from .users import UserBook, token_key

CACHE_S = 2.0
SERVICE = "service"


class Gate:
    def __init__(self, users: UserBook | None, service_token: str | None = None, cache_s: float = CACHE_S) -> None:
        self.users, self.service_token, self.cache_s = users, service_token, cache_s
        self._seen: dict[str, tuple[float, str, str, str | None]] = {}  # sha256 -> (until, name, role, key)
        self._lock = threading.Lock()

    @property
    def open(self) -> bool:
        """Whether anyone at all can get through (a user database or a service token)."""
        return self.users is not None or self.service_token is not None

    def identify(self, authorization: str | None, origin: str) -> Identity:
        if not self.open:
            raise Unauthenticated("this server has neither users nor a token, so it takes no changes; start it with "
                                  "--db (users: `inspector user add`) or --token-file")
        if not authorization or not authorization.startswith("Bearer "):
            raise Unauthenticated("no credential: send Authorization: Bearer <your token> (`inspector user token "
                                  "NAME` issues one, the dashboard signs in for you)")
        token = authorization[7:].strip()
        if self.service_token and hmac.compare_digest(token.encode(), self.service_token.encode()):
            return Identity(SERVICE, SERVICE, origin)
        if self.users is None:
            raise Unauthenticated("wrong token: this server knows only its service token (no --db for users)")
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        with self._lock:
            hit = self._seen.get(digest)
        if hit is not None and hit[0] > now:
            return Identity(hit[1], hit[2], origin, token_key(token))
        name, role = self.users.holder(token)
        with self._lock:
            if len(self._seen) > 1000:
                self._seen.clear()
            self._seen[digest] = (now + self.cache_s, name, role, token_key(token))
        return Identity(name, role, origin, token_key(token))

    def forget(self, key: str) -> None:
        """A token revoked here is refused at once here (other processes: within `cache_s`)."""
        with self._lock:
            self._seen = {d: v for d, v in self._seen.items() if v[3] != key}

    def check(self, authorization: str | None, origin: str, permission: Permission) -> Identity:
        who = self.identify(authorization, origin)
        who.require(permission)
        return who
