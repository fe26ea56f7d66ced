"""CSV export: one row per component result, with its board's fields, for a spreadsheet."""
from __future__ import annotations

import csv
from typing import TextIO

from .store import Filters, ResultStore

COLUMNS = ("board_serial", "started_at", "line", "station", "recipe", "ruleset_version", "board_verdict", "ref",
           "component_type", "verdict", "defect_class", "score", "expert", "weights_sha256",
           "box_x0", "box_y0", "box_x1", "box_y1", "crop_path", "error")


def export_csv(store: ResultStore, out: TextIO, filters: Filters | None = None) -> int:
    """Write the header and one row per component result; returns the rows written."""
    filters = filters or Filters()
    w = csv.writer(out)
    w.writerow(COLUMNS)
    n = 0
    for insp, part in store.component_rows(filters):
        w.writerow((insp.board_serial, insp.started_at.isoformat(), insp.line, insp.station, insp.recipe,
                    insp.ruleset_version, insp.verdict, part.ref, part.component_type, part.verdict,
                    part.defect_class, "" if part.score is None else f"{part.score:.4f}", part.expert,
                    part.weights_sha256 or "", *("" if v is None else f"{v:.1f}" for v in
                                                 (part.box_x0, part.box_y0, part.box_x1, part.box_y1)),
                    part.crop_path or "", part.error or ""))
        n += 1
    return n
