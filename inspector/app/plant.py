"""The plant at a glance: every line of the shared results database, and each kiosk's own word on itself.

The database says what each line did (boards per minute and yield over the last hour, its last board); each
kiosk's `/status` and `/health` say whether it runs, how healthy it is, its false-call rate and which expert
versions it serves. Kiosks are asked at once, each with a short timeout, so one box that is down costs the
view a fraction of a second and is shown as unreachable. `inspector plant status` prints it; the dashboard's
plant tab shows it.
"""
from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from ..endpoint import EndpointError
from ..results.activity import Activity, activity
from ..results.store import ResultStore
from .kiosk_client import KioskClient

KIOSK_TIMEOUT_S = 2.0


@dataclass
class LineRow:
    line: str
    station: str
    kiosk: str | None = None  # its URL, when one was named
    state: str = "no kiosk named"  # running / paused / stopping, unreachable, or no kiosk named
    health: str | None = None  # ok / degraded / stalled / critical (the kiosk's /health)
    boards_per_min: float | None = None  # over the window, from the database
    yield_percent: float | None = None  # boards passed of boards inspected, over the window
    false_call_rate: float | None = None  # the kiosk's, over its line's last boards
    experts: str | None = None  # a fingerprint of the expert versions served: equal on lines that serve the same
    last_board_age_s: float | None = None  # from the database
    detail: str | None = None  # why the kiosk could not be read, the health's first reason

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def ask_kiosk(url: str, timeout: float = KIOSK_TIMEOUT_S) -> dict[str, Any]:
    """The kiosk's /status and /health (read-only endpoints: no token); {"error": ...} when it cannot answer."""
    kiosk = KioskClient(url, timeout=timeout)
    try:
        return {"status": kiosk.status(), "health": kiosk.health()}
    except EndpointError as exc:
        return {"error": exc.message}


def expert_fingerprint(experts: list[dict[str, Any]]) -> str:
    """Eight hex digits over the (expert, weights) pairs a kiosk serves: lines serving the same versions match."""
    pairs = sorted(f"{e['expert']}={e.get('weights_sha256') or '-'}" for e in experts)
    return f"{len(pairs)}@{hashlib.sha256(';'.join(pairs).encode()).hexdigest()[:8]}"


def plant_status(store: ResultStore | None, kiosks: list[str], window: timedelta = timedelta(hours=1),
                 timeout: float = KIOSK_TIMEOUT_S) -> list[LineRow]:
    """One row per line and station known to the database or named as a kiosk, sorted by line."""
    with ThreadPoolExecutor(max_workers=max(1, min(32, len(kiosks)))) as pool:
        answers = dict(zip(kiosks, pool.map(lambda u: ask_kiosk(u, timeout), kiosks)))
    rows: dict[tuple[str, str], LineRow] = {}
    unplaced: list[LineRow] = []
    for url, answer in answers.items():
        if "error" in answer:
            unplaced.append(LineRow("?", "?", url, "unreachable", detail=answer["error"]))
            continue
        rows[_key(answer["status"])] = _from_kiosk(url, answer)
    db_error = None
    if store is not None:
        try:
            for key, act in activity(store, window).items():
                row = rows.setdefault(key, LineRow(*key))
                _from_database(row, act, window)
        except SQLAlchemyError as exc:
            db_error = f"the results database cannot be read: {type(exc).__name__}"
    out = sorted(rows.values(), key=lambda r: (r.line, r.station)) + unplaced
    if db_error:
        for row in out:
            row.detail = row.detail or db_error
    return out


def _key(status: dict[str, Any]) -> tuple[str, str]:
    line = status.get("line") or {}
    return str(line.get("line", "?")), str(line.get("station", "?"))


def _from_kiosk(url: str, answer: dict[str, Any]) -> LineRow:
    status, health = answer["status"], answer["health"]
    reviews = status.get("reviews") or {}
    parts = sum(r["parts"] for r in reviews.values())
    false_calls = sum(r["false_calls"] for r in reviews.values())
    reasons = health.get("reasons") or []
    return LineRow(*_key(status), kiosk=url, state=str(status.get("state", "?")), health=health.get("status"),
                   false_call_rate=false_calls / parts if parts else None,
                   experts=expert_fingerprint(status.get("experts") or []), detail=reasons[0] if reasons else None)


def _from_database(row: LineRow, act: Activity, window: timedelta) -> None:
    """Boards per minute since the window began, or since the line's first board in it when that is later (a line
    started ten minutes ago is not shown at a sixth of its pace)."""
    now = datetime.now(timezone.utc)
    since = max(now - window, act.first_at) if act.first_at is not None else now - window
    row.boards_per_min = act.boards / max((now - since).total_seconds() / 60, 1.0)
    row.yield_percent = 100.0 * act.passed / act.boards if act.boards else None
    if act.last_at is not None:
        row.last_board_age_s = max(0.0, (now - act.last_at).total_seconds())


def table_cells(r: LineRow) -> tuple[str, ...]:
    """A row as the table and the dashboard's plant tab show it."""
    return (r.line, r.station, r.state, r.health or "-", _num(r.boards_per_min, "{:.1f}"),
            _num(r.yield_percent, "{:.1f}"), _num(r.false_call_rate, "{:.2%}"), r.experts or "-",
            _age(r.last_board_age_s), r.kiosk or "-")


def table(rows: list[LineRow]) -> str:
    head = ("line", "station", "state", "health", "boards/min", "yield %", "false calls", "experts", "last board",
            "kiosk")
    body = [table_cells(r) for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(b, widths)).rstrip() for b in body]
    lines += [f"{where(r)}: {r.detail}" for r in rows if r.detail]
    return "\n".join(lines)


def where(r: LineRow) -> str:
    """A row's name in a note: its line and station, or its kiosk's URL when the kiosk did not say."""
    return f"{r.line}/{r.station}" if r.line != "?" else str(r.kiosk)


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"
