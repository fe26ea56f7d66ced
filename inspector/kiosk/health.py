"""Health from a snapshot: what a probe, the watchdog and an operator need to know.

- stopping: shutting down (503)
- critical: results are at risk: the writer thread is dead, or a full disk holds results in memory while
            ingest waits (503)
- stalled:  boards are inside and none finished for `stall_s` (503; the watchdog stops pinging)
- degraded: serving, but something needs attention: results spooled because the database is unreachable,
            boards set aside as dead letters, experts that failed to load, crops not written or not kept
            (low disk), the broker away, the source failing or silent, the camera's frames over- or
            under-exposed, the rule watcher refusing a file or dead, the boards' fiducials saying the camera is
            tilted against the rule set's transform (200)
- ok
"""
from __future__ import annotations

from typing import Any

RECENT_S = 60.0  # a source error this fresh still counts against health


def health(snap: dict[str, Any], stalled_s: float, stall_limit_s: float,
           silent_limit_s: float | None = None) -> dict[str, Any]:
    if snap["state"] not in ("running", "paused"):
        return {"status": "stopping", "reasons": [f"line is {snap['state']}"]}
    res = snap["results"]
    critical = []
    if not res.get("writer_alive", True):
        critical.append(f"the result writer has stopped: results are spooled by the line itself; restart the "
                        f"service (last error: {res['last_error']})")
    if res.get("disk_full"):
        critical.append(f"disk full: {res['pending']} board result(s) held in memory and ingest waits; free space "
                        f"(inspector db prune): {res['last_error']}")
    if critical:
        return {"status": "critical", "reasons": critical}
    if stalled_s > stall_limit_s:
        return {"status": "stalled", "reasons": [
            f"{snap['in_flight']} board(s) inside and none finished for {stalled_s:.0f} s"]}
    reasons = _degraded(snap, silent_limit_s)
    return {"status": "degraded" if reasons else "ok", "reasons": reasons}


def _degraded(snap: dict[str, Any], silent_limit_s: float | None) -> list[str]:
    reasons: list[str] = []
    res = snap["results"]
    if res["spooled"]:
        reasons.append(f"{res['spooled']} board result(s) spooled on disk, database not reachable: {res['last_error']}")
    elif res["last_error"]:
        reasons.append(f"results: {res['last_error']}")
    if res.get("dead_letters"):
        reasons.append(f"{res['dead_letters']} board result(s) refused by the database and set aside (dead_letters "
                       "table or dead-letter.jsonl in the data directory)")
    if res["crops_failed"]:
        reasons.append(f"{res['crops_failed']} crop(s) not kept: {res['crops_error']}")
    if res.get("low_disk"):
        reasons.append(res["low_disk"])
    for expert, why in sorted((snap.get("failed_experts") or {}).items()):
        reasons.append(f"expert {expert} failed, its parts get `error`: {why}")
    ingest = snap["ingest"]
    if ingest["source_error"]:
        reasons.append(f"source stopped: {ingest['source_error']}")
    src = ingest["source"]
    if src["last_error"] and src["last_error_age_s"] is not None and src["last_error_age_s"] < RECENT_S:
        reasons.append(f"source: {src['last_error']}")
    silent = src.get("last_frame_age_s")
    if silent_limit_s and silent is not None and silent > silent_limit_s:
        reasons.append(f"source {src['name']} silent: no image for {silent:.0f} s (limit {silent_limit_s:.0f} s)")
    hint = (snap.get("registration") or {}).get("hint")
    if hint:
        reasons.append(f"registration: {hint}")
    if snap.get("exposure"):
        reasons.append(f"camera exposure: {snap['exposure']}")
    mqtt = snap.get("mqtt")
    if mqtt and not mqtt["connected"]:
        reasons.append(f"MQTT broker {mqtt['broker']} not connected ({mqtt['queued']} queued): {mqtt['last_error']}")
    rules = snap.get("rules")
    if rules and not rules.get("watcher_alive", True):
        reasons.append("the rule watcher has stopped: edits to the rule file are not applied; restart the service")
    if rules and rules["last_error"]:
        reasons.append(f"rule file refused, running set kept: {rules['last_error']}")
    return reasons
