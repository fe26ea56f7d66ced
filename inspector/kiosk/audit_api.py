"""GET /audit/events and /audit/verify: the plant's audit trail for the dashboard attached to a kiosk (any
signed-in person may read it; nobody may change it over any API)."""
from __future__ import annotations

import urllib.parse
from typing import Any

from ..access.audit import AuditTrail
from .http import HttpError

LIMIT = 500


class AuditApi:
    def __init__(self, trail: AuditTrail) -> None:
        self.trail = trail

    def get(self, path: str, query: str) -> dict[str, Any]:
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(query).items()}
        if path == "events":
            try:
                limit = min(int(q.get("limit", LIMIT)), LIMIT)
            except ValueError:
                raise ValueError(f"limit must be a whole number up to {LIMIT}") from None
            events = self.trail.events(q.get("kind") or None, q.get("actor") or None, limit)
            return {"events": [event_json(e) for e in events]}
        if path == "verify":
            v = self.trail.verify()
            return {"rows": v.rows, "head": v.head, "intact": v.intact,
                    "broken": [{"id": b.row_id, "why": b.why} for b in v.broken]}
        raise HttpError(404, "audit routes: /audit/events?kind=&actor=&limit=, /audit/verify")


def event_json(e: Any) -> dict[str, Any]:  # noqa: ANN401 - an AuditEvent
    return {"id": e.id, "at": e.at.isoformat(), "actor": e.actor, "role": e.role, "origin": e.origin,
            "line": e.line, "station": e.station, "kind": e.kind, "subject": e.subject, "before": e.before,
            "after": e.after, "reason": e.reason, "sha256": e.sha256}
