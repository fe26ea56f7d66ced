"""Which line (and station) a read, an export, a prune or a rate is about.

A plant's lines share one database. Every read names its scope: by default the box's own line and station
(what the command-line flags `--line/--station` say), plant-wide only when asked (`--all-lines`). A scope with
`line=None` is the whole plant; `station=None` is every station of its line.
"""
from __future__ import annotations

from dataclasses import dataclass

from .schema import Inspection


@dataclass(frozen=True)
class Scope:
    line: str | None = None
    station: str | None = None

    @classmethod
    def plant(cls) -> Scope:
        return cls()

    @property
    def is_plant(self) -> bool:
        return self.line is None and self.station is None

    def where(self, q):  # noqa: ANN001, ANN201 - a Select touching inspections
        """`q` narrowed to this scope's boards (the query must select from or join `inspections`)."""
        if self.line is not None:
            q = q.where(Inspection.line == self.line)
        if self.station is not None:
            q = q.where(Inspection.station == self.station)
        return q

    def newest_first(self) -> list:
        """ORDER BY for the scope's boards, newest first, in the order of the index that serves it: one line and
        station walk (line, station, id) backwards, so a line idle for months is found as fast as a busy one (by
        the row id alone the planner may walk every newer board of the other lines)."""
        if self.line is not None and self.station is not None:
            return [Inspection.line.desc(), Inspection.station.desc(), Inspection.id.desc()]
        return [Inspection.id.desc()]

    def label(self) -> str:
        if self.is_plant:
            return "every line"
        if self.station is None:
            return f"line {self.line}"
        return f"line {self.line}, station {self.station}" if self.line is not None else f"station {self.station}"


PLANT = Scope()


def scope_of(line: str | None, station: str | None, all_lines: bool = False) -> Scope:
    """The scope the command-line flags name: the box's line and station, or the plant with `--all-lines`."""
    return PLANT if all_lines else Scope(line, station)
