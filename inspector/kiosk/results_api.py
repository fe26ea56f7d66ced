"""The kiosk's results over its API, for a dashboard on another machine: its line's stored boards, parts,
reviews, a CSV export and the crops it kept, behind the API token (they are the plant's product images). A part
says the BOM's part number of its place (`part_number`, from the rule set its board was inspected under; None where
that names none), and /results/part-numbers/<version> answers a rule-set version's whole table.

Every answer is of this kiosk's own line and station (a plant's shared database holds other lines too), and a
crop is served only from the kiosk's crop folder. The dashboard reads these through app/kiosk_results.py in the
shape it reads the database (results/reader.py), so it needs the kiosk's URL and token and no database URL.
"""
from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

from ..results.filters import reviewed_of, reviewed_text
from ..results.review_boxes import boxes_json
from ..results.schema import ComponentResult, Inspection, Review
from ..results.scope import Scope
from ..results.store import Filters, ResultStore, parse_when
from ..results.units import positions_text
from .http import HttpError

BOARD_FIELDS = ("id", "uuid", "started_at", "finished_at", "line", "station", "board_serial", "serial_source",
                "recipe", "ruleset_version", "verdict", "source", "error", "reg_transform", "reg_residual_px",
                "reg_fiducials")
PART_FIELDS = ("id", "ref", "component_type", "expert", "weights_sha256", "verdict", "defect_class", "score",
               "box_x0", "box_y0", "box_x1", "box_y1", "crop_path", "error")
REVIEW_FIELDS = ("inspection_uuid", "ref", "component_type", "call", "correct_class", "reviewer", "note", "at")
MAX_ROWS = 5000
Answer = tuple[str, bytes] | dict[str, Any]


Numbers = Callable[[str], dict[str, str]]  # a rule-set version -> REF -> part number (ResultStore.part_numbers)


def board_json(b: Inspection, numbers: Numbers | None = None) -> dict[str, Any]:
    """A board; with its parts where `numbers` is given (each part's number read under the board's version)."""
    out = {k: getattr(b, k) for k in BOARD_FIELDS}
    out["board_id"] = b.hermes_board_id  # the Hermes BoardId, None off a Hermes lane or before schema 0008
    panel = b.panel  # a panel's boards and those that did not pass; None off a panel or before schema 0009
    out["panel_boards"] = None if panel is None else panel.boards
    out["panel_failed"] = None if panel is None else positions_text(panel.failed)
    out["panel_skipped"] = None if panel is None else positions_text(panel.skipped)
    # its boards' own serials, {"2": "SN-2"} (JSON keys are text); None off a panel, {} where none has its own
    out["panel_serials"] = None if panel is None else {str(k): s for k, s in panel.serials.items()}
    out["started_at"], out["finished_at"] = b.started_at.isoformat(), b.finished_at.isoformat()
    if numbers is not None:
        bought = numbers(b.ruleset_version)
        out["parts"] = [part_json(p, bought.get(p.ref)) for p in b.parts]
    return out


def part_json(p: ComponentResult, part_number: str | None = None) -> dict[str, Any]:
    # the approved make it was compared with (its window's file), None where not, and before schema 0011
    return {**{k: getattr(p, k) for k in PART_FIELDS}, "alternate": p.approved_make, "part_number": part_number}


def review_json(r: Review) -> dict[str, Any]:
    """A review with its boxes (where the schema has them and a reviewer drew some): "boxes" all of them,
    "box" the first, as a dashboard before several boxes reads it."""
    boxes = r.drawn_boxes
    return {**{k: getattr(r, k) for k in REVIEW_FIELDS}, "at": r.at.isoformat(),
            "box": list(boxes[0].at) if boxes else None, "boxes": boxes_json(boxes)}


class ResultsApi:
    """GET /results/... routes of one kiosk's line."""

    def __init__(self, store: ResultStore, scope: Scope, crops: Path) -> None:
        self.store, self.scope, self.crops = store, scope, crops.resolve()
        self.routes: dict[str, Callable[[list[str], dict[str, list[str]]], Answer]] = {
            "latest": self._latest, "boards": self._board, "rows": self._rows, "count": self._count,
            "types": self._types, "last-id": self._last_id, "defects": self._defects, "reviews": self._reviews,
            "export.csv": self._export, "crops": self._crop,
            "part-numbers": self._part_numbers}

    def get(self, path: str, query: str) -> Answer:
        """`path` below /results/ ('latest', 'crops/<id>/<ref>', ...)."""
        parts = [unquote(p) for p in path.strip("/").split("/") if p]
        if not parts or parts[0] not in self.routes:
            raise HttpError(404, f"no results route /results/{path}; routes: "
                                 + " ".join(f"/results/{r}" for r in self.routes))
        return self.routes[parts[0]](parts[1:], parse_qs(query))

    def filters(self, q: dict[str, list[str]]) -> Filters:
        one = {k: v[-1] for k, v in q.items() if v}
        try:
            return Filters(since=parse_when(one["since"]) if one.get("since") else None,
                           until=parse_when(one["until"]) if one.get("until") else None,
                           board=one.get("board") or None, board_id=one.get("board_id") or None,
                           verdict=one.get("verdict") or None,
                           component=one.get("component") or None,
                           stored_upto=int(one["upto"]) if one.get("upto") else None, scope=self.scope,
                           reviewed=reviewed_of(one.get("reviewed")))
        except ValueError as exc:
            raise ValueError(f"a results filter is off: {exc}") from None

    def _latest(self, _rest: list[str], _q: dict[str, list[str]]) -> Answer:
        b = self.store.latest(self.scope)
        return {"board": None if b is None else board_json(b, self.store.part_numbers)}

    def _board(self, rest: list[str], _q: dict[str, list[str]]) -> Answer:
        if len(rest) != 1:
            raise HttpError(404, "ask for /results/boards/<inspection id>")
        with_parts = self.store.inspections(Filters(scope=self.scope, uuid=rest[0]))
        if not with_parts:
            raise HttpError(404, f"no board {rest[0]} of {self.scope.label()} is stored")
        return {"board": board_json(with_parts[0], self.store.part_numbers)}

    def _rows(self, _rest: list[str], q: dict[str, list[str]]) -> Answer:
        newest = min(_int(q, "newest", 200), MAX_ROWS)
        f = self.filters(q)
        rows = self.store.component_rows(f, newest=newest)
        return {"rows": self._parts(rows), "reviewed": reviewed_text(f.reviewed)}

    def _count(self, _rest: list[str], q: dict[str, list[str]]) -> Answer:
        cap = _int(q, "cap", 0) or None
        f = self.filters(q)
        return {"count": self.store.count_components(f, cap=cap), "reviewed": reviewed_text(f.reviewed)}

    def _types(self, _rest: list[str], _q: dict[str, list[str]]) -> Answer:
        return {"types": self.store.component_types(self.scope)}

    def _last_id(self, _rest: list[str], _q: dict[str, list[str]]) -> Answer:
        return {"last_id": self.store.last_id(self.scope)}

    def _defects(self, _rest: list[str], q: dict[str, list[str]]) -> Answer:
        verdicts = tuple((q.get("verdicts") or ["fail,error"])[-1].split(","))
        rows = self.store.recent_parts(self.scope, verdicts, min(_int(q, "limit", 20), MAX_ROWS))
        return {"rows": self._parts(rows)}

    def _parts(self, rows: Iterable[tuple[Inspection, ComponentResult]]) -> list[list[dict[str, Any]]]:
        return [[board_json(b), part_json(p, self.store.part_numbers(b.ruleset_version).get(p.ref))] for b, p in rows]

    def _part_numbers(self, rest: list[str], _q: dict[str, list[str]]) -> Answer:
        if len(rest) != 1:
            raise HttpError(404, "ask for /results/part-numbers/<rule-set version>")
        numbers, stored = self.store.part_numbers_stored(rest[0])
        return {"version": rest[0], "part_numbers": numbers, "stored": stored}

    def _reviews(self, _rest: list[str], q: dict[str, list[str]]) -> Answer:
        uuids = (q.get("uuid") or [])[:MAX_ROWS]
        return {"reviews": [review_json(r) for r in self.store.reviews_of(uuids).values()]}

    def _export(self, _rest: list[str], q: dict[str, list[str]]) -> Answer:
        out = io.StringIO()
        self.store.export_csv(out, self.filters(q))
        return "text/csv; charset=utf-8", out.getvalue().encode("utf-8")

    def _crop(self, rest: list[str], _q: dict[str, list[str]]) -> Answer:
        if len(rest) != 2:
            raise HttpError(404, "ask for /results/crops/<inspection id>/<ref>")
        return "image/png", kept_crop(self.store, self.scope, self.crops, rest[0], rest[1]).read_bytes()


def kept_crop(store: ResultStore, scope: Scope, crops: Path, uuid: str, ref: str) -> Path:
    """The file of the crop this kiosk kept of part `ref` on board `uuid` (HttpError 404 where none was kept)."""
    rows = store.component_rows(Filters(scope=scope, uuid=uuid))
    part = next((p for _b, p in rows if p is not None and p.ref == ref), None)
    if part is None or not part.crop_path:
        raise HttpError(404, f"no crop of {ref} on board {uuid} was kept")
    path = Path(part.crop_path).resolve()
    if not path.is_relative_to(crops.resolve()) or not path.is_file():
        raise HttpError(404, f"the crop of {ref} on board {uuid} is not in this kiosk's crop folder")
    return path


def _int(q: dict[str, list[str]], key: str, default: int) -> int:
    try:
        return int((q.get(key) or [default])[-1])
    except ValueError:
        raise ValueError(f"{key} must be a whole number") from None
