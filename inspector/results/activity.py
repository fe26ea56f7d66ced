"""What each line of a plant's shared database did lately: boards and passes over a window, and its last board.
Reads over the indexes only (boards by time, boards by line), so the answer costs the same whatever the database's
size."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import Connection, case, func, select, tuple_

from .schema import Inspection
from .store import ResultStore


@dataclass(frozen=True)
class Activity:
    boards: int  # in the window
    passed: int
    first_at: datetime | None  # the first board in the window
    last_at: datetime | None  # the last board ever


def activity(store: ResultStore, window: timedelta) -> dict[tuple[str, str], Activity]:
    """Per (line, station): boards and passes in the window (a range of the time index), and its last board ever."""
    since = datetime.now(timezone.utc) - window
    out: dict[tuple[str, str], Activity] = {}
    with store.engine.connect() as c:
        recent = c.execute(select(Inspection.line, Inspection.station, func.count(),
                                  func.sum(case((Inspection.verdict == "pass", 1), else_=0)),
                                  func.min(Inspection.started_at))
                           .where(Inspection.started_at >= since).group_by(Inspection.line, Inspection.station))
        counts = {(line, station): (int(n), int(p or 0), _utc(first)) for line, station, n, p, first in recent}
        for line, station in _lines(c):
            last = c.scalar(select(Inspection.started_at).where(Inspection.line == line, Inspection.station == station)
                            .order_by(Inspection.started_at.desc()).limit(1))
            n, p, first = counts.get((line, station), (0, 0, None))
            out[(line, station)] = Activity(n, p, first, _utc(last))
    return out


def _lines(c: Connection) -> list[tuple[str, str]]:
    """Every (line, station) the database holds, one index probe each (a skip scan: years of boards cost no more
    than a day's)."""
    found: list[tuple[str, str]] = []
    while True:
        q = select(Inspection.line, Inspection.station).order_by(Inspection.line, Inspection.station).limit(1)
        if found:
            q = q.where(tuple_(Inspection.line, Inspection.station) > tuple_(*found[-1]))
        row = c.execute(q).first()
        if row is None:
            return found
        found.append((row[0], row[1]))


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
