"""What the dashboard reads of a line's results, whoever holds them: the results database itself
(store.ResultStore), or a kiosk over its API (app/kiosk_results.KioskResults) for a dashboard on another machine
that has no database URL. Rows come back with the attribute names of the tables (schema.py)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol, TextIO

from .scope import Scope
from .store import Filters


class ResultsReader(Protocol):
    def latest(self, scope: Scope) -> Any: ...  # noqa: ANN401 - a board row with .parts, or None

    def recent_parts(self, scope: Scope, verdicts: tuple[str, ...] = ("fail", "error"),
                     limit: int = 20) -> list[tuple[Any, Any]]: ...

    def component_types(self, scope: Scope) -> list[str]: ...

    def last_id(self, scope: Scope) -> int: ...

    def count_components(self, filters: Filters | None = None, cap: int | None = None) -> int: ...

    def component_rows(self, filters: Filters | None = None, newest: int | None = None,
                       bare_boards: bool = False) -> Iterator[tuple[Any, Any]]: ...

    def reviews_of(self, uuids: list[str]) -> dict[tuple[str, str], Any]: ...

    def part_numbers(self, version: str) -> dict[str, str]: ...  # REF -> part number under a rule-set version

    def export_csv(self, out: TextIO, filters: Filters | None = None) -> int: ...
