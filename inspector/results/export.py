"""CSV export: one row per component result, with its board's fields, for a spreadsheet.

A board stored without part results (a board-level error: registration failed) is one row with the part
columns empty and the reason in `board_error`, so no inspected board is missing from an export. Times are
UTC with their offset. An operator's review of a part (results/reviews.py) rides on its row. A text cell
that a spreadsheet would run as a formula (it starts with = + - @, a tab or a carriage return: a board
serial from a hostile barcode) is written with a leading apostrophe. After the review come the Hermes BoardId the
SMT line gave the board (empty off a Hermes lane, and on a database before schema revision 0008) and, for a panel
(results/units.py), its boards, the part's position among them (0: the panel's frame), the positions that did not
pass, `2;5`, and its x-outs, not inspected (all four empty off a panel, and on a database before 0009). Then the
serial of the unit the part is on: its panel board's own (schema revision 0010, where the board has a code of its
own), else the board's. Last, the approved make a part was compared with, its window's file (`inspector board
approve`; empty where it was compared with its golden board, or not compared, and on a database before 0011).
After it, the boxes the reviewer drew where the defects are, `x0 y0 x1 y1` in crop pixels, a box's own class after
it where it names one, boxes parted by `; ` (`2.0 3.0 10.0 12.0; 20.0 4.0 31.0 9.0 spur`; empty without one, and on
a database before 0012; one box without its class before 0013). Last, the part number the BOM gives the part's place,
read from the rule set the board was inspected under (its `part_numbers:`, kept by its version: rule_texts.py; empty
where that rule set names none).
"""
from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import Any, Protocol, TextIO

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from .filters import Filters
from .schema import Review
from .units import positions_text


class ResultRows(Protocol):
    """What the export reads of a results store (store.ResultStore is one; this module never imports it)."""

    engine: Engine

    def component_rows(self, filters: Filters, bare_boards: bool = False) -> Iterable[tuple[Any, Any]]: ...

    def reading_reviews(self, q: Any) -> Any: ...  # noqa: ANN401 - a Select of reviews, reading what the schema has

    def part_numbers(self, version: str) -> dict[str, str]: ...  # REF -> part number under a rule-set version

COLUMNS = ("inspection_id", "board_serial", "serial_source", "started_at", "line", "station", "recipe",
           "ruleset_version", "board_verdict", "ref", "component_type", "verdict", "defect_class", "score", "expert",
           "weights_sha256",
           "box_x0", "box_y0", "box_x1", "box_y1", "crop_path", "error", "registration_residual_px", "board_error",
           "review_call", "review_class", "reviewer", "reviewed_at", "board_id",
           "panel_boards", "panel_position", "panel_failed", "panel_skipped", "unit_serial", "alternate", "review_box",
           "part_number")
# new columns go last: a plant's sheets and scripts that read columns by position keep working


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def cell(text: str) -> str:
    """A text value as a spreadsheet will not evaluate it (OWASP's CSV injection advice)."""
    return "'" + text if text.startswith(FORMULA_START) else text


BOARD_COLUMNS = COLUMNS[:9]  # what every row of a board says of it, here and in the unit export (unit_export.py)


def board_cells(insp: Any) -> tuple[str, ...]:  # noqa: ANN401 - a stored board (schema.Inspection or a kiosk's view)
    """The BOARD_COLUMNS of a stored board, each text cell safe from a spreadsheet's formulas."""
    return (insp.uuid, cell(insp.board_serial), insp.serial_source or "", insp.started_at.isoformat(),
            cell(insp.line), cell(insp.station), cell(insp.recipe), cell(insp.ruleset_version), insp.verdict)


def export_csv(store: ResultRows, out: TextIO, filters: Filters | None = None) -> int:
    """Write the header and one row per component result; returns the rows written."""
    filters = filters or Filters()
    w = csv.writer(out)
    w.writerow(COLUMNS)
    with Session(store.engine) as s:  # reviews are a person's work: few beside the parts, read once
        reviews = {r.component_result_id: r for r in s.scalars(store.reading_reviews(select(Review)))}
    n = 0
    for insp, part in store.component_rows(filters, bare_boards=True):
        board = board_cells(insp)
        tail = ("" if insp.reg_residual_px is None else f"{insp.reg_residual_px:.3f}", cell(insp.error or ""))
        board_id = cell(insp.hermes_board_id or "")
        panel = insp.panel
        boards, failed, skipped = ("", "", "") if panel is None else (
            str(panel.boards), positions_text(panel.failed), positions_text(panel.skipped))
        if part is None:
            w.writerow((*board, *[""] * 13, *tail, "", "", "", "", board_id, boards, "", failed, skipped,
                        cell(insp.board_serial), "", "", ""))
        else:
            position = None if panel is None else panel.position_of(part.ref)
            unit = insp.board_serial if panel is None else panel.unit_serial(position, insp.board_serial)
            w.writerow((*board, cell(part.ref), cell(part.component_type), part.verdict, cell(part.defect_class),
                        "" if part.score is None else f"{part.score:.4f}", cell(part.expert), part.weights_sha256 or "",
                        *("" if v is None else f"{v:.1f}"
                          for v in (part.box_x0, part.box_y0, part.box_x1, part.box_y1)),
                        cell(part.crop_path or ""), cell(part.error or ""), *tail, *_review(reviews.get(part.id)),
                        board_id, boards, "" if position is None else str(position), failed, skipped, cell(unit),
                        cell(part.approved_make or ""), _box(reviews.get(part.id)),
                        cell(store.part_numbers(insp.ruleset_version).get(part.ref, ""))))
        n += 1
    return n


def _box(r: Review | None) -> str:
    boxes = r.drawn_boxes if r is not None else ()
    return "; ".join(" ".join([*(f"{v:.1f}" for v in b.at), *([b.defect] if b.defect else [])]) for b in boxes)


def _review(r: Review | None) -> tuple[str, str, str, str]:
    if r is None:
        return "", "", "", ""
    return r.call, r.correct_class or "", cell(r.reviewer), r.at.isoformat()
