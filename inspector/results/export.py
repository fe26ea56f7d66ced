"""CSV export: one row per component result, with its board's fields, for a spreadsheet.

A board stored without part results (a board-level error: registration failed) is one row with the part
columns empty and the reason in `board_error`, so no inspected board is missing from an export.
"""
from __future__ import annotations

import csv
from typing import TextIO

from .store import Filters, ResultStore

COLUMNS = ("board_serial", "started_at", "line", "station", "recipe", "ruleset_version", "board_verdict", "ref",
           "component_type", "verdict", "defect_class", "score", "expert", "weights_sha256",
           "box_x0", "box_y0", "box_x1", "box_y1", "crop_path", "error", "registration_residual_px", "board_error")


def export_csv(store: ResultStore, out: TextIO, filters: Filters | None = None) -> int:
    """Write the header and one row per component result; returns the rows written."""
    filters = filters or Filters()
    w = csv.writer(out)
    w.writerow(COLUMNS)
    n = 0
    for insp, part in store.component_rows(filters, bare_boards=True):
        board = (insp.board_serial, insp.started_at.isoformat(), insp.line, insp.station, insp.recipe,
                 insp.ruleset_version, insp.verdict)
        tail = ("" if insp.reg_residual_px is None else f"{insp.reg_residual_px:.3f}", insp.error or "")
        if part is None:
            w.writerow((*board, *[""] * 13, *tail))
        else:
            w.writerow((*board, part.ref, part.component_type, part.verdict, part.defect_class,
                        "" if part.score is None else f"{part.score:.4f}", part.expert, part.weights_sha256 or "",
                        *("" if v is None else f"{v:.1f}"
                          for v in (part.box_x0, part.box_y0, part.box_x1, part.box_y1)),
                        part.crop_path or "", part.error or "", *tail))
        n += 1
    return n
