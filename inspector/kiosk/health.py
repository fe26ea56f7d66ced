"""Health from a snapshot: what a probe, the watchdog and an operator need to know.

- stopping: shutting down (503)
- stalled:  boards are inside and none finished for `stall_s` (503; the watchdog stops pinging)
- degraded: serving, but something needs attention: results spooled because the database
            is unreachable, crops not written, the broker away, the source failing, a rule file refused (200)
- ok
"""
from __future__ import annotations

from typing import Any

RECENT_S = 60.0  # a source error this fresh still counts against health


def health(snap: dict[str, Any], stalled_s: float, stall_limit_s: float) -> dict[str, Any]:
    reasons: list[str] = []
    if snap["state"] != "running":
        return {"status": "stopping", "reasons": [f"line is {snap['state']}"]}
    if stalled_s > stall_limit_s:
        return {"status": "stalled", "reasons": [
            f"{snap['in_flight']} board(s) inside and none finished for {stalled_s:.0f} s"]}
    res = snap["results"]
    if res["spooled"]:
        reasons.append(f"{res['spooled']} board result(s) spooled on disk, database not reachable: {res['last_error']}")
    elif res["last_error"]:
        reasons.append(f"results: {res['last_error']}")
    if res["crops_failed"]:
        reasons.append(f"{res['crops_failed']} crop(s) not kept: {res['crops_error']}")
    ingest = snap["ingest"]
    if ingest["source_error"]:
        reasons.append(f"source stopped: {ingest['source_error']}")
    src = ingest["source"]
    if src["last_error"] and src["last_error_age_s"] is not None and src["last_error_age_s"] < RECENT_S:
        reasons.append(f"source: {src['last_error']}")
    mqtt = snap.get("mqtt")
    if mqtt and not mqtt["connected"]:
        reasons.append(f"MQTT broker {mqtt['broker']} not connected ({mqtt['queued']} queued): {mqtt['last_error']}")
    rules = snap.get("rules")
    if rules and rules["last_error"]:
        reasons.append(f"rule file refused, running set kept: {rules['last_error']}")
    return {"status": "degraded" if reasons else "ok", "reasons": reasons}
