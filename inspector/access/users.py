"""Users and their API tokens, in the results database every box of a plant shares.

A token is `insp_<key>_<secret>`: the key finds its row, only the sha256 of the whole token is stored (a token is
random and long, so a fast hash is enough; a password is not, so it gets argon2). Tokens expire and are revoked
one by one; a disabled user's tokens stop at once. Every change here is recorded in the audit trail by the
identity that made it, in the same call: no user or token changes unrecorded.
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import Engine, func, insert, select, update

from ..results.schema import ApiToken, AuditEvent, User
from .audit import AuditTrail, Change
from .identity import Identity, Unauthenticated
from .passwords import hash_password, needs_rehash, verify_password
from .roles import check_role

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
TOKEN = re.compile(r"^insp_([0-9a-f]{12})_([A-Za-z0-9_-]{20,})$")
MAX_REFUSED = 5  # failed sign-ins of one name within LOCKOUT_S before it is refused without a try
LOCKOUT_S = 900.0


@functools.cache
def _dummy_hash() -> str:
    """A hash for unknown names, so that they cost a sign-in as long as a known one; made at the first sign-in of
    any name, not at import (it takes a sign-in's time, 0.44 s under load, that every kiosk and command start paid)."""
    return hash_password("not-a-real-password")


@dataclass(frozen=True)
class UserRow:
    name: str
    role: str
    created_at: datetime
    disabled: bool
    tokens: int  # live ones: neither revoked nor expired


@dataclass(frozen=True)
class TokenRow:
    key: str
    user: str
    label: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None

    def state(self, now: datetime) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "live"


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_key(token: str) -> str | None:
    """A person's token's public key (what `user tokens` lists and `user revoke` takes); None for anything else."""
    m = TOKEN.match(token)
    return m.group(1) if m else None


class UserBook:
    def __init__(self, engine: Engine, audit: AuditTrail) -> None:
        self.engine, self.audit = engine, audit

    # -- people ----------------------------------------------------------------------------------------------
    def add(self, by: Identity, name: str, role: str, password: str) -> None:
        if not NAME.match(name):
            raise ValueError(f"user name {name!r}: letters, digits and . _ @ -, up to 64, starting with a letter "
                             "or digit")
        check_role(role)
        digest = hash_password(password)
        with self.engine.begin() as c:
            if c.execute(select(User.id).where(User.name == name)).first():
                raise ValueError(f"user {name} exists already; `inspector user list` shows them")
            c.execute(insert(User), [{"name": name, "role": role, "password_hash": digest,
                                      "created_at": datetime.now(timezone.utc), "disabled_at": None}])
        self.audit.record(by, Change("user.add", name, None, {"name": name, "role": role}))

    def users(self) -> list[UserRow]:
        now = datetime.now(timezone.utc)
        live = (select(ApiToken.user_id, func.count().label("n")).where(ApiToken.revoked_at.is_(None))
                .where((ApiToken.expires_at.is_(None)) | (ApiToken.expires_at > now))
                .group_by(ApiToken.user_id).subquery())
        q = select(User, live.c.n).outerjoin(live, live.c.user_id == User.id).order_by(User.name)
        with self.engine.connect() as c:
            return [UserRow(r.name, r.role, r.created_at, r.disabled_at is not None, int(r.n or 0))
                    for r in c.execute(q)]

    def _user(self, c, name: str):  # noqa: ANN001, ANN202 - a connection, a row
        row = c.execute(select(User).where(User.name == name)).first()
        if row is None:
            raise ValueError(f"no user {name!r}; `inspector user list` shows who there is")
        return row

    def disable(self, by: Identity, name: str, reason: str | None = None) -> None:
        with self.engine.begin() as c:
            row = self._user(c, name)
            if row.disabled_at is not None:
                return
            c.execute(update(User).where(User.id == row.id).values(disabled_at=datetime.now(timezone.utc)))
        self.audit.record(by, Change("user.disable", name, {"disabled": False}, {"disabled": True}, reason))

    def set_role(self, by: Identity, name: str, role: str, reason: str | None = None) -> None:
        check_role(role)
        with self.engine.begin() as c:
            row = self._user(c, name)
            c.execute(update(User).where(User.id == row.id).values(role=role))
        self.audit.record(by, Change("user.role", name, {"role": row.role}, {"role": role}, reason))

    def set_password(self, by: Identity, name: str, password: str) -> None:
        digest = hash_password(password)
        with self.engine.begin() as c:
            row = self._user(c, name)
            c.execute(update(User).where(User.id == row.id).values(password_hash=digest))
        self.audit.record(by, Change("user.password", name))  # never the hash itself

    def any_admin(self) -> bool:
        with self.engine.connect() as c:
            return c.execute(select(User.id).where(User.role == "admin", User.disabled_at.is_(None))).first() \
                is not None

    def sign_in(self, name: str, password: str, origin: str) -> Identity:
        """The person behind a name and password (Unauthenticated when wrong or disabled; the refusal is
        recorded, the password never). After MAX_REFUSED refusals of a name within LOCKOUT_S, the name is refused
        without a try until they age out (counted in the shared trail: across every box of the plant)."""
        since = datetime.now(timezone.utc) - timedelta(seconds=LOCKOUT_S)
        with self.engine.connect() as c:
            refused = c.execute(select(func.count()).select_from(AuditEvent).where(
                AuditEvent.kind == "sign_in.refused", AuditEvent.subject == name[:64],
                AuditEvent.at >= since)).scalar()
            row = c.execute(select(User).where(User.name == name)).first()
        if refused >= MAX_REFUSED:
            raise Unauthenticated(f"{refused} failed sign-ins of {name} in the last {LOCKOUT_S / 60:.0f} minutes: "
                                  f"wait, or ask an admin to set a new password (inspector user password)")
        dummy = _dummy_hash()  # made by the first sign-in whatever the name, so that one is no tell either
        ok = verify_password(row.password_hash if row is not None else dummy, password)
        if row is None or not ok or row.disabled_at is not None:
            why = "disabled" if row is not None and ok else "wrong name or password"
            self.audit.record(Identity(name[:64] or "?", row.role if row is not None else "-", origin),
                              Change("sign_in.refused", name[:64], None, {"why": why}))
            raise Unauthenticated("this user is disabled; ask an admin" if why == "disabled" else
                                  "wrong name or password")
        if needs_rehash(row.password_hash):
            with self.engine.begin() as c:
                c.execute(update(User).where(User.id == row.id).values(password_hash=hash_password(password)))
        who = Identity(row.name, row.role, origin)
        self.audit.record(who, Change("sign_in", row.name))
        return who

    # -- tokens ----------------------------------------------------------------------------------------------
    def issue(self, by: Identity, name: str, label: str, days: float | None = 90.0, audit: bool = True) -> str:
        """A new token for `name` (shown once; only its hash is kept). `days` None: it never expires."""
        key = secrets.token_hex(6)
        token = f"insp_{key}_{secrets.token_urlsafe(32)}"
        now = datetime.now(timezone.utc)
        expires = None if days is None else now + timedelta(days=days)
        with self.engine.begin() as c:
            row = self._user(c, name)
            if row.disabled_at is not None:
                raise ValueError(f"user {name} is disabled: no new tokens")
            c.execute(insert(ApiToken), [{"key": key, "secret_sha256": _sha(token), "user_id": row.id,
                                          "label": label[:128], "created_at": now, "expires_at": expires,
                                          "revoked_at": None}])
        if audit:
            self.audit.record(by, Change("token.issue", f"{name}/{key}", None,
                                         {"user": name, "key": key, "label": label,
                                          "expires_at": expires.isoformat() if expires else None}))
        return token

    def revoke(self, by: Identity, key: str, reason: str | None = None) -> None:
        with self.engine.begin() as c:
            row = c.execute(select(ApiToken.id, ApiToken.revoked_at, User.name).join(User, User.id == ApiToken.user_id)
                            .where(ApiToken.key == key)).first()
            if row is None:
                raise ValueError(f"no token {key!r}; `inspector user tokens NAME` lists a user's tokens by key")
            if row.revoked_at is not None:
                return
            c.execute(update(ApiToken).where(ApiToken.id == row.id).values(revoked_at=datetime.now(timezone.utc)))
        self.audit.record(by, Change("token.revoke", f"{row.name}/{key}", {"revoked": False}, {"revoked": True},
                                     reason))

    def tokens(self, name: str | None = None) -> list[TokenRow]:
        q = select(ApiToken, User.name).join(User, User.id == ApiToken.user_id).order_by(ApiToken.id)
        if name:
            q = q.where(User.name == name)
        with self.engine.connect() as c:
            return [TokenRow(r.key, r.name, r.label, r.created_at, r.expires_at, r.revoked_at) for r in c.execute(q)]

    def holder(self, token: str) -> tuple[str, str]:
        """(name, role) of a token's user; Unauthenticated saying why not (unknown, revoked, expired, disabled)."""
        m = TOKEN.match(token)
        if m is None:
            raise Unauthenticated("not a token of this plant (insp_...): send Authorization: Bearer <your token>; "
                                  "`inspector user token NAME` issues one")
        with self.engine.connect() as c:
            row = c.execute(select(ApiToken.secret_sha256, ApiToken.expires_at, ApiToken.revoked_at, User.name,
                                   User.role, User.disabled_at).join(User, User.id == ApiToken.user_id)
                            .where(ApiToken.key == m.group(1))).first()
        if row is None or not hmac.compare_digest(row.secret_sha256, _sha(token)):
            raise Unauthenticated("unknown token: send Authorization: Bearer <your token>")
        if row.revoked_at is not None:
            raise Unauthenticated("this token was revoked; ask an admin for a new one (inspector user token NAME)")
        if row.expires_at is not None and row.expires_at <= datetime.now(timezone.utc):
            raise Unauthenticated("this token expired; ask an admin for a new one (inspector user token NAME)")
        if row.disabled_at is not None:
            raise Unauthenticated(f"user {row.name} is disabled; ask an admin")
        return row.name, row.role
