"""`inspector db bench`: a plant's shared PostgreSQL with millions of parts, and what one line's reads cost on it.

It fills an empty database (it refuses one that holds boards: never a plant's own) on the server itself with
generate_series: boards of many lines interleaved as they arrive, parts with a few defects, some reviewed, one board
in PANEL_EVERY a panel of PANEL_BOARDS with its boards' own serials (schema 0010's search index). Then
it times the reads a dashboard and a kiosk make for one line, through the store's own methods (the product's
SQL, not a copy), and prints each statement's plan from EXPLAIN ANALYZE, so a DBA sees index scans, not a guess.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import event, func, select, text

from .activity import activity
from .reviews import review_rates
from .schema import Inspection, UnitSerial
from .scope import Scope
from .store import COUNT_CAP, Filters, ResultStore

IDLE_LINE, IDLE_BOARDS = "line-idle", 50  # a line that ran first and stopped 90 days ago
PANEL_EVERY, PANEL_BOARDS = 4, 4  # one board in 4 a panel of 4 boards, each with its own serial
TYPES = ("R0402", "R0603", "C0402", "C0603", "D-SOD123", "U-SOIC8", "Q-SOT23", "L0805")


@dataclass(frozen=True)
class FillPlan:
    parts: int = 10_000_000
    lines: int = 20
    parts_per_board: int = 96
    fail_every: int = 400  # one part in this many is flagged
    review_every: int = 4  # one flagged part in this many is reviewed

    @property
    def boards(self) -> int:
        return max(1, self.parts // self.parts_per_board)


@dataclass
class QueryTiming:
    name: str
    wall_ms: list[float] = field(default_factory=list)
    plans: list[str] = field(default_factory=list)  # one per statement: EXPLAIN ANALYZE's text
    executed_ms: list[float] = field(default_factory=list)  # per statement, as EXPLAIN ANALYZE reports

    @property
    def median_ms(self) -> float:
        return statistics.median(self.wall_ms)


def fill(store: ResultStore, plan: FillPlan, say: Callable[[str], None]) -> float:
    """Generate the plan's rows on the server; seconds it took. Refuses a database that holds boards."""
    if store.engine.dialect.name != "postgresql":
        raise ValueError("db bench runs on PostgreSQL, the plant's shared server (a box's SQLite file holds one line)")
    store.ready()
    boards, _ = store.count()
    if boards:
        raise ValueError(f"{store.safe_url} holds {boards} boards: db bench fills only an empty database (create "
                         "one for it: createdb inspection_bench), never a plant's own")
    started = time.perf_counter()
    types = "ARRAY[" + ",".join(f"'{t}'" for t in TYPES) + "]"
    with store.engine.begin() as c:
        # a line that ran first and then stopped: its boards have the oldest row ids, so "its newest board" is
        # the read a planner walking row ids newest first would take longest to find
        c.execute(text(
            "INSERT INTO inspections (uuid, started_at, finished_at, line, station, board_serial, serial_source, "
            "recipe, ruleset_version, verdict, source) "
            "SELECT md5('idle' || g)::uuid::text, now() - interval '90 days' + g * interval '2 seconds', "
            "now() - interval '90 days' + g * interval '2 seconds', :idle, 'aoi-1', 'IDLE' || g, 'code', "
            "'board_a', 'v1', 'pass', '' FROM generate_series(1, :n) g"), {"idle": IDLE_LINE, "n": IDLE_BOARDS})
        say(f"generating {plan.boards} boards of {plan.lines} lines ...")
        c.execute(text(
            "INSERT INTO inspections (uuid, started_at, finished_at, line, station, board_serial, serial_source, "
            "recipe, ruleset_version, verdict, source) "
            "SELECT md5(g::text)::uuid::text, now() - (:n - g) * interval '2 seconds', "
            "now() - (:n - g) * interval '2 seconds' + interval '1 second', 'line-' || (g % :lines + 1), 'aoi-1', "
            "'SN' || g, 'code', 'board_a', 'v1', CASE WHEN g % :board_fail = 0 THEN 'fail' ELSE 'pass' END, '' "
            "FROM generate_series(1, :n) g"),
            {"n": plan.boards, "lines": plan.lines, "board_fail": max(1, plan.fail_every // plan.parts_per_board)})
        say(f"generating {plan.boards * plan.parts_per_board} parts ...")
        c.execute(text(
            "INSERT INTO component_results (inspection_id, ref, component_type, expert, weights_sha256, verdict, "
            "defect_class, score) "
            f"SELECT i.id, 'P' || p, ({types})[p % {len(TYPES)} + 1], 'cls-' || ({types})[p % {len(TYPES)} + 1], "
            "md5(p::text) || md5(p::text), "
            "CASE WHEN (i.id * 7919 + p) % :fail = 0 THEN 'fail' ELSE 'pass' END, "
            "CASE WHEN (i.id * 7919 + p) % :fail = 0 THEN 'missing' ELSE 'ok' END, 0.9 "
            "FROM inspections i CROSS JOIN generate_series(1, :per) p"),
            {"per": plan.parts_per_board, "fail": plan.fail_every})
        say("giving the panels' boards their own serials ...")
        c.execute(text(
            "UPDATE inspections SET panel_boards = :k, panel_serials = (SELECT json_object_agg(p, board_serial || '-' "
            "|| p)::text FROM generate_series(1, :k) p) WHERE abs(hashtext(id::text)) % :every = 0 AND line <> :idle"),
            {"k": PANEL_BOARDS, "every": PANEL_EVERY, "idle": IDLE_LINE})
        c.execute(text(
            "INSERT INTO unit_serials (inspection_id, position, serial) SELECT i.id, p, i.board_serial || '-' || p "
            "FROM inspections i CROSS JOIN generate_series(1, :k) p WHERE i.panel_boards IS NOT NULL"),
            {"k": PANEL_BOARDS})
        say("reviewing some flagged parts ...")
        c.execute(text(
            "INSERT INTO reviews (component_result_id, inspection_uuid, ref, component_type, expert, weights_sha256, "
            "call, reviewer, at) "
            "SELECT r.id, i.uuid, r.ref, r.component_type, r.expert, r.weights_sha256, "
            "CASE WHEN r.id % 3 = 0 THEN 'confirmed' ELSE 'false_call' END, 'bench', i.finished_at "
            "FROM component_results r JOIN inspections i ON i.id = r.inspection_id "
            "WHERE r.verdict = 'fail' AND abs(hashtext(r.id::text)) % :every = 0"), {"every": plan.review_every})
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(text("VACUUM ANALYZE"))
    return time.perf_counter() - started


def reads(scope: Scope, serials: tuple[str, str]) -> list[tuple[str, Callable[[ResultStore], Any]]]:
    """The reads one line's dashboard and kiosk make, as the product makes them; `serials`: a board's serial of the
    line and one of a panel's boards' own, to search by."""
    line = Filters(scope=scope)
    idle = Scope(IDLE_LINE, "aoi-1")
    board, unit = serials
    return [
        ("latest board of a line stopped 90 days ago", lambda s: s.latest(idle)),
        ("latest board of the line (line view)", lambda s: s.latest(scope)),
        ("history page: newest 200 parts", lambda s: list(s.component_rows(line, newest=200))),
        (f"history count (capped at {COUNT_CAP})", lambda s: s.count_components(line, cap=COUNT_CAP)),
        ("history search by a board's serial", lambda s: list(s.component_rows(Filters(scope=scope, board=board),
                                                                               newest=200))),
        ("history search by a panel board's own serial",
         lambda s: list(s.component_rows(Filters(scope=scope, board=unit), newest=200))),
        ("recent defects (line view)", lambda s: s.recent_parts(scope)),
        ("review rates (kiosk, last 1000 boards)", lambda s: review_rates(s, scope)),
        ("plant status: every line's last hour and last board", lambda s: activity(s, timedelta(hours=1))),
    ]


def measure(store: ResultStore, scope: Scope, repeats: int = 7) -> list[QueryTiming]:
    """Each read `repeats` times (the first warms the cache and is not counted), then its statements once more
    under EXPLAIN ANALYZE."""
    out = []
    for name, read in reads(scope, searched(store, scope)):
        timing = QueryTiming(name)
        read(store)
        for _ in range(repeats):
            t0 = time.perf_counter()
            read(store)
            timing.wall_ms.append((time.perf_counter() - t0) * 1e3)
        for statement, params in _statements(store, read):
            with store.engine.connect() as c:
                rows = c.exec_driver_sql("EXPLAIN (ANALYZE, BUFFERS) " + statement, params).all()
            plan = "\n".join(r[0] for r in rows)
            timing.plans.append(plan)
            timing.executed_ms.append(_execution_ms(plan))
        out.append(timing)
    return out


def _statements(store: ResultStore, read: Callable[[ResultStore], Any]) -> list[tuple[str, Any]]:
    """The SQL a read sends (captured from the engine as it runs)."""
    seen: list[tuple[str, Any]] = []

    def grab(_conn, _cursor, statement, parameters, _context, _many) -> None:  # noqa: ANN001
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", grab)
    try:
        read(store)
    finally:
        event.remove(store.engine, "before_cursor_execute", grab)
    return seen


def _execution_ms(plan: str) -> float:
    for line in plan.splitlines():
        if line.strip().startswith("Execution Time:"):
            return float(line.split(":")[1].split()[0])
    return float("nan")


def searched(store: ResultStore, scope: Scope) -> tuple[str, str]:
    """A serial of the line's boards from the middle of its history, and a panel board's own serial near it."""
    with store.engine.connect() as c:
        boards = store.count_boards(scope)
        serial = c.execute(scope.where(select(Inspection.board_serial)).order_by(Inspection.id)
                           .offset(boards // 2).limit(1)).scalar()
        unit = c.execute(select(UnitSerial.serial).join(Inspection, Inspection.id == UnitSerial.inspection_id)
                         .where(Inspection.line == scope.line, Inspection.station == scope.station)
                         .order_by(UnitSerial.id).offset(boards // 2 // PANEL_EVERY).limit(1)).scalar()
    if serial is None or unit is None:
        raise ValueError(f"{scope.label()} holds no board or no panel to search by: fill the database again")
    return serial, unit


def busiest_scope(store: ResultStore) -> Scope:
    """A line of the database (the one with the most boards: the worst case)."""
    with store.engine.connect() as c:
        row = c.execute(select(Inspection.line, Inspection.station, func.count()).group_by(
            Inspection.line, Inspection.station).order_by(func.count().desc()).limit(1)).first()
    if row is None:
        raise ValueError("the database holds no boards: fill it first (db bench without --reuse)")
    return Scope(row[0], row[1])


def table(timings: list[QueryTiming], repeats: int) -> str:
    rows = [f"| read | wall ms (median of {repeats}) | server ms per statement (EXPLAIN ANALYZE) | index scans |",
            "| --- | --- | --- | --- |"]
    for t in timings:
        scans = sorted({_index_of(line) for plan in t.plans for line in plan.splitlines() if " using " in line})
        ms = t.executed_ms
        server = " + ".join(f"{m:.2f}" for m in ms) if len(ms) <= 3 else \
            f"{len(ms)} statements: {sum(ms):.2f} in all, at most {max(ms):.2f}"
        rows.append(f"| {t.name} | {t.median_ms:.1f} | {server} | {', '.join(scans) or 'none'} |")
    return "\n".join(rows)


def _index_of(line: str) -> str:
    return line.split(" using ")[1].split()[0]
