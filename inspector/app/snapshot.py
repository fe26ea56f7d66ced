"""The live state of a running line as plain data: what /status serves, what metrics and the GUI read.

One function reads every counter once, so the kiosk's endpoints, the
Prometheus collector and the dashboard (attached or local) agree.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any

from ..camera.correction import CorrectedSource
from ..coserve.online.engine import Engine
from .rules_watch import RulesWatcher
from .service import LineService


def snapshot(service: LineService, rules: RulesWatcher | None = None, publisher: Any = None) -> dict[str, Any]:
    line, engine = service.line, service.line.engine
    st = line.engine_stats()
    boards_s, parts_s = line.throughput()
    w = service.writer.status()
    q = service.queue.counters
    src = service.source.counters
    last = line.last_finished
    out: dict[str, Any] = {
        "time": datetime.now(timezone.utc).isoformat(),
        "state": _state(service),
        "uptime_s": time.perf_counter() - line.started,
        "backend": {"name": engine.backend.name, **(engine.backend.counters() if hasattr(engine.backend, "counters")
                                                     else {})},
        "line": {"line": line.config.line, "station": line.config.station, "policy": line.config.policy,
                 "recipe": line.rules.recipe, "ruleset_version": line.rules.version, "rules_source": line.rules.source},
        "boards": line.stats.boards, "parts": line.stats.parts, "rejected_boards": line.stats.rejected_boards,
        "board_changes": line.board_changes,  # live changeovers to another board with its own zoo
        "verdicts": dict(line.stats.board_verdicts), "defects": dict(line.stats.defects),
        "panel_boards": dict(line.stats.panel_board_verdicts),  # a panel's boards by their own verdicts; {}: none
        "bad_marks": line.stats.bad_marks,  # x-outs read on their bad-mark pads: not inspected
        # a panel's boards' own codes: read, and NOREAD (not read, read twice, contradicting the machine before)
        "unit_serials": {"read": line.stats.unit_serials_read, "noreads": line.stats.unit_noreads},
        "registration": {"enabled": line.config.register and line.rules.fiducials is not None,
                         "registered": line.stats.registered, "failed": line.stats.registration_failed,
                         "residual_px_mean": line.stats.residual_px_mean,
                         "residual_px_max": line.stats.residual_px_max if line.stats.registered else None,
                         "hint": line.transform_watch.hint.sentence() if line.transform_watch.hint else None},
        **camera_state(service),
        "in_flight": line.boards_in_flight,
        "last_board_age_s": None if last is None else time.monotonic() - last,
        "last_board_at": line.last_finished_at,  # unix time, for the metrics' timestamp
        "throughput": {"boards_per_s": boards_s, "parts_per_s": parts_s},
        "latency_ms": line.latency_ms(),
        "latency_histograms": line.latency_histograms(),
        "engine": {
            "accepted": st.accepted, "completed": st.completed, "failed": st.failed, "failures": st.failures,
            "sched_overhead_s": st.sched_overhead_s, "switches": st.experts.switches, "hits": st.experts.hits,
            "evictions": st.experts.evictions, "prefetches": st.experts.prefetches,
            "loads_by_tier": st.experts.loads_by_tier,
            "executors": [{"name": ex.name, "device": ex.device.key, "queue_depth": len(ex.queue),
                           "running": ex.queue.running, "threads": ex.threads, "batch_bytes": ex.batch_bytes}
                          for ex in engine.executors],
            "devices": [{"device": d.device_key, "total_bytes": d.total, "allocated_bytes": d.allocated}
                        for d in engine.budgets.values()],
            "pools": [{"name": m.ledger.name, "device": m.device.key, "used_bytes": m.ledger.used,
                       "capacity_bytes": m.ledger.capacity, "resident": len(m.resident())}
                      for m in engine.managers.values()],
        },
        "ingest": {"capacity": service.queue.capacity, "overflow": service.queue.overflow,
                   "depth": len(service.queue), **asdict(q),
                   "source": {"name": getattr(service.source, "name", "?"), "frames": src.frames,
                              "unreadable": src.unreadable, "reconnects": src.reconnects,
                              "last_error": src.last_error,
                              "last_error_age_s": None if src.last_error_at is None
                              else time.monotonic() - src.last_error_at,
                              "last_frame_age_s": time.monotonic() - (src.last_frame_at or service.started_at)}},
        "results": {"written": w.written, "pending": w.pending, "spooled": w.spooled, "last_error": w.last_error,
                    "duplicates": w.duplicates, "dead_letters": w.dead_letters, "disk_full": w.disk_full,
                    "writer_alive": w.alive, "database": service.store.safe_url, "crops_kept": service.crops.kept,
                    "crops_failed": service.crops.failed, "crops_error": service.crops.last_error,
                    "crops_skipped_low_disk": service.crops.skipped_low_disk, "low_disk": service.crops.low_disk},
        "allocation": {"device_mb": line.config.device_mb, "expert_pool_mb": line.config.pool_mb,
                       "executors": line.config.executors, "policy": line.config.policy},
        "experts": expert_rows(engine),
        "failed_experts": engine.failed_experts(),
        "mqtt": None,
        "rules": None,
    }
    if publisher is not None:
        m = publisher.status()
        out["mqtt"] = {"broker": f"{publisher.host}:{publisher.port}", **asdict(m)}
    if rules is not None:
        out["rules"] = {"applied": rules.state.applied, "refused": rules.state.refused, "watcher_alive": rules.alive,
                        "last_error": rules.state.last_error, "watching": str(rules.path) if rules.path else None,
                        "history": [{"version": h.rules.version, "recipe": h.rules.recipe, "at": h.at.isoformat()}
                                    for h in rules.state.history]}
    return out


def camera_state(service: LineService) -> dict[str, Any]:
    """The camera's state and settings, the board gate's counters, the serials read (None where there is none)."""
    line, camera = service.line, service.source.origin
    gate = getattr(service.source, "gate", None)
    fix = _corrected(service.source)
    return {"camera": camera.status() if hasattr(camera, "status") else None,
            "correction": fix.correction.describe() if fix is not None else None,
            "exposure": fix.exposure if fix is not None else None,
            "gate": gate.counters.to_json() if gate is not None else None,
            "sets": service.camera_sets.to_json(),  # the station's settings, and what the set in force asks for
            "identity": {"code": line.rules.serial_code is not None, "read": line.stats.serials_read,
                         "noreads": line.stats.noreads, "noread_refused": line.stats.noread_refused}}


def _corrected(source: object) -> CorrectedSource | None:
    """The corrected source in a chain of wrappers (a board gate over it), or None."""
    while source is not None:
        if isinstance(source, CorrectedSource):
            return source
        source = getattr(source, "inner", None)
    return None


def _state(service: LineService) -> str:
    if service.running:
        return "paused" if service.paused else "running"
    return "stopped" if service.stopped.is_set() else "starting"


def expert_rows(engine: Engine) -> list[dict[str, Any]]:
    """Every expert of the zoo with its tier, usage probability and counters, as plain rows."""
    now = time.time()
    entries = engine.zoo.entries
    return [{**asdict(v), "last_use_s": None if v.last_used is None else max(0.0, now - v.last_used),
             "weights_sha256": entries[v.expert].weights_sha256 if v.expert in entries else None}
            for v in engine.expert_views()]
