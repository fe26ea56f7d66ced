"""CSV export by unit: one row per board a line produced, for an MES or a traceability sheet.

A board that is no panel is one unit (position 1). A panel is one row per board of it, each with its own verdict
(units.py: the rule the database, the PLC and the factory messages read), its parts and how many were flagged; a
board the panel's x-outs name is a row too, its verdict `x-out` and no parts; parts on the panel's own frame are a
row at position 0 where there are any. Every row carries the panel's serial and Hermes BoardId, and last the unit's
own serial: a panel's board's where it has a code of its own (routing/panel.py `codes:`), else the panel's. A board
stored without parts (a board-level error) gives one row per unit with the error. Rows stream in the order the
boards were stored, one board's parts in memory at a time. Part filters (a component type, a part verdict) do not
apply: a unit's verdict is of all its parts.
"""
from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import Any, TextIO

from .export import BOARD_COLUMNS, ResultRows, board_cells, cell
from .filters import Filters
from .units import unit_serial, units, verdict_of

UNIT_COLUMNS = (*BOARD_COLUMNS, "panel_boards", "position", "unit_verdict", "parts", "parts_flagged", "board_error",
                "board_id", "unit_serial")
X_OUT = "x-out"


def export_units_csv(store: ResultRows, out: TextIO, filters: Filters | None = None) -> int:
    """Write the header and one row per unit of each matching board; returns the rows written. ValueError for a
    part filter (it would judge a unit by some of its parts)."""
    filters = filters or Filters()
    if filters.component or filters.verdict:
        raise ValueError("a unit export judges each board by all its parts: --component and --verdict select parts "
                         "and do not apply (filter by time, board, BoardId or line instead)")
    w = csv.writer(out)
    w.writerow(UNIT_COLUMNS)
    n = 0
    for insp, parts in _boards(store, filters):
        panel = insp.panel
        board = (*board_cells(insp), "" if panel is None else str(panel.boards))
        tail = (cell(insp.error or ""), cell(insp.hermes_board_id or ""))
        serials = {} if panel is None else panel.serials
        skipped = [] if panel is None else panel.skipped
        rows = {k: (verdict_of(own, insp.error), len(own), sum(p.verdict != "pass" for p in own))
                for k, own in units(None if panel is None else panel.boards, parts, skipped)}
        rows.update({k: (X_OUT, 0, 0) for k in skipped})
        for position in sorted(rows):
            own = unit_serial(serials, position, insp.board_serial)
            w.writerow((*board, position, *rows[position], *tail, cell(own)))
            n += 1
    return n


def _boards(store: ResultRows, filters: Filters) -> Iterator[tuple[Any, list[Any]]]:
    """Each matching board with its parts, as the store streams its part rows (grouped by board, in order)."""
    current, parts = None, []
    for insp, part in store.component_rows(filters, bare_boards=True):
        if current is not None and insp.id != current.id:
            yield current, parts
            parts = []
        current = insp
        if part is not None:
            parts.append(part)
    if current is not None:
        yield current, parts
