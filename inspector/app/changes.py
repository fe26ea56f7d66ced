"""Recording a change to the line in the audit trail, the same way from the kiosk's API, the dashboard and the
watchers (a rule file edited on disk, a recipe changeover from the PLC).

A change is made only when the trail can take it (the database answers before the change is applied); if the
record still fails after the change went through, the failure is said loudly (the journal, the answer) instead
of being lost, and the change stays: undoing a rule set the line already runs would be a second, unasked change.
"""
from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from ..access.audit import AuditTrail, Change
from ..access.identity import Identity
from ..results.rule_texts import store_texts
from ..results.store import ResultStore, StoreUnavailable
from ..routing.rules import RuleSet

HOST = socket.gethostname()


class ChangeLog:
    """One line's audit trail, with the line's rule texts kept beside it (a rules change resolves to its text)."""

    def __init__(self, store: ResultStore, line: str, station: str,
                 say: Callable[[str], None] = lambda _m: None) -> None:
        self.store, self.say = store, say
        self.trail = AuditTrail(store.engine, line, station)

    def ready(self) -> None:
        """Before a change: StoreUnavailable when the trail cannot be written (the change is then refused)."""
        self.store.ready()
        try:
            with self.store.engine.connect() as c:
                c.exec_driver_sql("SELECT 1")
        except Exception as exc:  # noqa: BLE001 - any failure here means: no record possible now
            raise StoreUnavailable(f"the audit trail in {self.store.safe_url} cannot be written now ({exc}); "
                                   "nothing was changed, try again when the database is back") from None

    def record(self, who: Identity, change: Change) -> dict[str, Any]:
        """Append; what the answer says about it ({"audit": id} or {"audit_error": why})."""
        try:
            event = self.trail.record(who, change)
        except Exception as exc:  # noqa: BLE001 - the change is made; its record must not be lost silently
            why = f"{type(exc).__name__}: {exc}"
            self.say(f"error: AUDIT NOT RECORDED: {who.name} {change.kind} {change.subject}: {why}")
            return {"audit_error": why}
        self.say(f"audit {event.id}: {who.name} ({who.role}) {change.kind} {change.subject} from {who.origin}; "
                 f"head {event.sha256[:16]}")
        return {"audit": event.id}

    def rules_change(self, who: Identity, kind: str, running: Callable[[], RuleSet | None],
                     change: Callable[[], RuleSet], reason: str | None = None) -> tuple[RuleSet, dict[str, Any]]:
        """A rules change made by a person: refused before anything when the trail cannot be written (StoreUnavailable),
        then made, then recorded with the set that ran before it."""
        self.ready()
        old = running()
        new = change()
        return new, (self.rules(who, kind, old, new, reason) if old is not None else {})

    def rules(self, who: Identity, kind: str, old: RuleSet, new: RuleSet, reason: str | None = None) -> dict[str, Any]:
        """A rule-set change: both texts kept by their versions, the versions in the row."""
        texts = {r.version: (r.recipe, r.text) for r in (old, new) if r.text}
        try:
            with self.store.engine.begin() as c:
                store_texts(c, set(texts), texts.get)
        except Exception as exc:  # noqa: BLE001 - the row still names both versions
            self.say(f"warning: rule texts not stored with the change: {exc}")
        return self.record(who, Change(kind, new.recipe, {"recipe": old.recipe, "version": old.version},
                                       {"recipe": new.recipe, "version": new.version}, reason))


def local(name: str, role: str, way: str = "dashboard") -> Identity:
    """An identity acting on this machine (the dashboard's signed-in person, the CLI's user)."""
    return Identity(name, role, f"{way} on {HOST}")
