"""The audit trail: every change to a line, append-only, each row chained to the one before by a hash.

A row's hash is sha256 over the previous row's hash and the row's own fields (canonical JSON), so editing a row,
deleting one or slipping one in breaks the chain at that row, and `inspector audit verify` names it. Two writers
(kiosks of one plant, a dashboard and the CLI) cannot fork the chain: `prev_sha256` is unique, so the slower of
two appends on the same head is refused by the database and appends again on the new head. What a chain cannot
show by itself is its own tail cut off: `verify` prints the head's hash and row count to compare with a copy
kept elsewhere (the kiosk logs the head after each change; CSV exports carry every hash).

On PostgreSQL the migration takes UPDATE and DELETE on this table from the boxes' role (installer's
postgres-roles.sql): the trail is append-only for them, not only by convention.
"""
from __future__ import annotations

import csv
import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import IO, Any

from sqlalchemy import Engine, func, insert, select
from sqlalchemy.exc import IntegrityError, OperationalError

from ..results.schema import AuditEvent
from .identity import Identity

GENESIS = "0" * 64  # the previous hash of the first row
FIELDS = ("at", "actor", "role", "origin", "line", "station", "kind", "subject", "before", "after", "reason")
APPEND_TRIES = 20

# every kind of change the trail records (the dashboard's filter and the tests read this list)
KINDS = ("rules.apply", "rules.rollback", "rules.file", "rules.changeover", "rules.activate", "rules.alternate",
         "rules.revise", "board.install", "board.serve", "board.profile", "board.next", "board.remove",
         "allocation", "expert.swap", "expert.rollback", "expert.install", "expert.publish",
         "expert.threshold", "review", "camera",
         "user.add", "user.disable", "user.role", "user.password", "token.issue", "token.revoke", "sign_in",
         "sign_in.refused")


@dataclass(frozen=True)
class Change:
    """What happened, before the trail gives it a time and a place in the chain."""

    kind: str
    subject: str
    before: Any = None  # anything JSON can hold; None: nothing before (a new user, a first review)
    after: Any = None
    reason: str | None = None


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


def _stamp(at: datetime) -> str:
    return at.astimezone(timezone.utc).isoformat(timespec="microseconds")


def row_hash(prev: str, row: dict[str, Any]) -> str:
    """The chain's link: the previous hash and this row's fields, canonically."""
    body = {k: (_stamp(row[k]) if k == "at" else row[k]) for k in FIELDS}
    return hashlib.sha256((prev + json.dumps(body, sort_keys=True)).encode()).hexdigest()


@dataclass(frozen=True)
class Broken:
    """Where the chain stops holding, and how."""

    row_id: int
    why: str


@dataclass(frozen=True)
class Verdict:
    rows: int
    head: str  # the newest row's hash (GENESIS for an empty trail)
    broken: tuple[Broken, ...]

    @property
    def intact(self) -> bool:
        return not self.broken


class AuditTrail:
    """Appends for one line (its name and station go on every row) and reads the plant's whole trail."""

    def __init__(self, engine: Engine, line: str = "", station: str = "") -> None:
        self.engine, self.line, self.station = engine, line, station

    def record(self, who: Identity, change: Change, at: datetime | None = None) -> AuditEvent:
        """Append one row on the current head; returns it (with its hash). Raises what the database raises when
        it cannot be written: a change that cannot be recorded is the caller's to refuse or to report."""
        if change.kind not in KINDS:
            raise ValueError(f"unknown kind of change {change.kind!r}; one of {', '.join(KINDS)}")
        row = {"at": at or datetime.now(timezone.utc), "actor": who.name, "role": who.role,
               "origin": who.origin[:256], "line": self.line, "station": self.station, "kind": change.kind,
               "subject": change.subject[:256], "before": _json(change.before), "after": _json(change.after),
               "reason": change.reason}
        for attempt in range(APPEND_TRIES):
            try:
                with self.engine.begin() as c:
                    if c.dialect.name == "postgresql":  # one appender at a time across the plant: no retries
                        c.exec_driver_sql("SELECT pg_advisory_xact_lock(7370391)")
                    head = c.execute(select(AuditEvent.sha256).order_by(AuditEvent.id.desc()).limit(1)).scalar()
                    prev = head or GENESIS
                    full = {**row, "prev_sha256": prev, "sha256": row_hash(prev, row)}
                    key = c.execute(insert(AuditEvent).returning(AuditEvent.id), [full]).scalar_one()
                return AuditEvent(id=key, **full)
            except (IntegrityError, OperationalError) as exc:  # another writer took this head (or held the lock)
                # on a SQLite file every OperationalError of a working database is a passing state of another
                # connection (a lock, a checkpoint, a WAL being recovered): tried again like a lock; on a server,
                # only a lock is (anything else is the server's own trouble and is raised at once)
                transient = "locked" in str(exc) or self.engine.dialect.name == "sqlite"
                if isinstance(exc, OperationalError) and (not transient or attempt == APPEND_TRIES - 1):
                    raise
                time.sleep(0.01 * (attempt + 1))
        raise RuntimeError(f"could not append to the audit trail after {APPEND_TRIES} tries: the database is "
                           "busy with other appends; try the change again")

    def events(self, kind: str | None = None, actor: str | None = None, limit: int | None = None,
               newest_first: bool = True) -> list[AuditEvent]:
        q = select(AuditEvent)
        if kind:
            q = q.where(AuditEvent.kind.like(kind.rstrip("*") + "%") if kind.endswith("*") else AuditEvent.kind == kind)
        if actor:
            q = q.where(AuditEvent.actor == actor)
        q = q.order_by(AuditEvent.id.desc() if newest_first else AuditEvent.id)
        if limit:
            q = q.limit(limit)
        with self.engine.connect() as c:
            return [AuditEvent(**dict(r._mapping)) for r in c.execute(q)]

    def count(self) -> int:
        with self.engine.connect() as c:
            return int(c.execute(select(func.count()).select_from(AuditEvent)).scalar() or 0)

    def head(self) -> tuple[int, str]:
        """(rows, the newest row's hash): what a box publishes (metrics, its journal) so that a copy of the chain's
        end lives outside the database: a trail cut short shows as fewer rows than Prometheus saw before."""
        with self.engine.connect() as c:
            rows = int(c.execute(select(func.count()).select_from(AuditEvent)).scalar() or 0)
            sha = c.execute(select(AuditEvent.sha256).order_by(AuditEvent.id.desc()).limit(1)).scalar()
        return rows, sha or GENESIS

    def _walk(self, chunk: int = 5000) -> Iterator[AuditEvent]:
        last = 0
        while True:
            with self.engine.connect() as c:
                rows = list(c.execute(select(AuditEvent).where(AuditEvent.id > last).order_by(AuditEvent.id)
                                      .limit(chunk)))
            if not rows:
                return
            for r in rows:
                yield AuditEvent(**dict(r._mapping))
            last = rows[-1].id

    def verify(self) -> Verdict:
        """Walk the chain from the first row: each row's hash over its fields, each link to the row before."""
        prev, rows, broken = GENESIS, 0, []
        for e in self._walk():
            rows += 1
            fields = {k: getattr(e, k) for k in FIELDS}
            if e.prev_sha256 != prev:
                broken.append(Broken(e.id, "links to a row that is not the one before it (a row was deleted or "
                                           "inserted here)"))
            if row_hash(e.prev_sha256, fields) != e.sha256:
                broken.append(Broken(e.id, "its fields do not match its hash (the row was edited)"))
            prev = e.sha256
        return Verdict(rows, prev, tuple(broken))

    def export_csv(self, out: IO[str]) -> int:
        w = csv.writer(out)
        w.writerow(["id", *FIELDS, "prev_sha256", "sha256"])
        n = 0
        for e in self._walk():
            w.writerow([e.id, _stamp(e.at), *(getattr(e, k) for k in FIELDS[1:]), e.prev_sha256, e.sha256])
            n += 1
        return n
