"""A kiosk's stored results over its API (kiosk/results_api.py), read the way the dashboard reads the results
database (results/reader.py): a dashboard on another machine needs the kiosk's URL and token, no database URL.

Rows come back as plain objects with the tables' attribute names; every answer is of the kiosk's own line (the
scope a caller passes is the kiosk's anyway). Crops are fetched as PNG bytes.
"""
from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, TextIO
from urllib.parse import quote, urlencode

from ..endpoint import EndpointError, open_url, request_json
from ..results.filters import reviewed_text
from ..results.review_boxes import ReviewBox, box_of, review_box_of
from ..results.scope import Scope
from ..results.store import Filters
from ..results.units import PanelResult


@dataclass
class PartView:
    id: int
    ref: str
    component_type: str
    expert: str
    weights_sha256: str | None
    verdict: str
    defect_class: str
    score: float | None
    box_x0: float | None = None
    box_y0: float | None = None
    box_x1: float | None = None
    box_y1: float | None = None
    crop_path: str | None = None
    error: str | None = None
    alternate: str | None = None  # the approved make it was compared with (a kiosk before 0011's release sends none)

    @property
    def approved_make(self) -> str | None:
        """As a stored part's (`ComponentResult.approved_make`)."""
        return self.alternate


@dataclass
class BoardView:
    id: int
    uuid: str
    started_at: datetime
    finished_at: datetime
    line: str
    station: str
    board_serial: str
    serial_source: str | None
    recipe: str
    ruleset_version: str
    verdict: str
    source: str
    error: str | None
    reg_transform: str | None
    reg_residual_px: float | None
    reg_fiducials: str | None
    parts: list[PartView] = field(default_factory=list)
    board_id: str | None = None  # the Hermes BoardId (a kiosk of an earlier release sends none)
    panel_boards: int | None = None  # a panel's boards and those that did not pass (an earlier kiosk sends neither)
    panel_failed: str | None = None
    panel_skipped: str | None = None
    panel_serials: dict[str, str] | None = None  # its boards' own serials (a kiosk before 0010's release sends none)

    @property
    def hermes_board_id(self) -> str | None:
        """As a stored board's (`Inspection.hermes_board_id`): views read either alike."""
        return self.board_id

    @property
    def panel(self) -> PanelResult | None:
        """As a stored board's (`Inspection.panel`)."""
        panel = PanelResult.stored(self.panel_boards, self.panel_failed, self.panel_skipped)
        if panel is not None and self.panel_serials:
            panel.serials.update({int(k): s for k, s in self.panel_serials.items()})
        return panel


@dataclass
class ReviewView:
    inspection_uuid: str
    ref: str
    component_type: str
    call: str
    correct_class: str | None
    reviewer: str
    note: str | None
    at: datetime
    box: list[float] | None = None  # the reviewer's first box on the kept crop (a kiosk before 0012's sends none)
    boxes: list[Any] | None = None  # all of them (review_boxes.py JSON; a kiosk before 0013's sends only `box`)

    @property
    def drawn_boxes(self) -> tuple[ReviewBox, ...]:
        """As a stored review's (`Review.drawn_boxes`)."""
        if self.boxes is not None:
            return tuple(review_box_of(b) for b in self.boxes)
        return (ReviewBox(box_of(self.box)),) if self.box else ()


def _view(cls: type, doc: dict[str, Any]) -> Any:  # noqa: ANN401 - an instance of cls
    """A row from the kiosk's JSON; fields a newer kiosk sends that this release does not know are left out (the
    plant upgrades its boxes one at a time)."""
    known = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in doc.items() if k in known})


def _board(doc: dict[str, Any]) -> BoardView:
    parts = [_view(PartView, p) for p in doc.pop("parts", [])]
    doc["started_at"], doc["finished_at"] = (datetime.fromisoformat(doc[k]) for k in ("started_at", "finished_at"))
    return _view(BoardView, {**doc, "parts": parts})


class KioskResults:
    def __init__(self, url: str, token: str, timeout: float = 10.0) -> None:
        self.url, self.token, self.timeout = url.rstrip("/") + "/results", token, timeout
        self._part_numbers: dict[str, dict[str, str]] = {}  # by rule-set version: its text's hash, never changes

    def _get(self, path: str, query: dict[str, Any] | list[tuple[str, Any]] | None = None) -> dict[str, Any]:
        return request_json(self._url(path, query), None, self.token, self.timeout)

    def _url(self, path: str, query: dict[str, Any] | list[tuple[str, Any]] | None) -> str:
        return f"{self.url}/{path}" + (f"?{urlencode(query)}" if query else "")

    @staticmethod
    def _query(f: Filters | None) -> dict[str, Any]:
        f = f or Filters()
        q = {"since": f.since.isoformat() if f.since else None, "until": f.until.isoformat() if f.until else None,
             "board": f.board, "board_id": f.board_id, "verdict": f.verdict, "component": f.component,
             "upto": f.stored_upto, "reviewed": reviewed_text(f.reviewed)}
        return {k: v for k, v in q.items() if v is not None}

    def latest(self, scope: Scope | None = None) -> BoardView | None:
        doc = self._get("latest")["board"]
        return None if doc is None else _board(doc)

    def recent_parts(self, scope: Scope | None = None, verdicts: tuple[str, ...] = ("fail", "error"),
                     limit: int = 20) -> list[tuple[BoardView, PartView]]:
        rows = self._get("defects", {"verdicts": ",".join(verdicts), "limit": limit})["rows"]
        return [(_board(b), _view(PartView, p)) for b, p in rows]

    def component_types(self, scope: Scope | None = None) -> list[str]:
        return list(self._get("types")["types"])

    def last_id(self, scope: Scope | None = None) -> int:
        return int(self._get("last-id")["last_id"])

    def count_components(self, filters: Filters | None = None, cap: int | None = None) -> int:
        doc = self._filtered("count", filters, {"cap": cap} if cap else {})
        return int(doc["count"])

    def component_rows(self, filters: Filters | None = None, newest: int | None = None,
                       bare_boards: bool = False) -> Iterator[tuple[BoardView, PartView]]:
        rows = self._filtered("rows", filters, {"newest": newest or 200})["rows"]
        for b, p in rows:
            yield _board(b), _view(PartView, p)

    def _filtered(self, path: str, filters: Filters | None, more: dict[str, Any]) -> dict[str, Any]:
        """A search's answer; ValueError where the search asked for a review filter and the kiosk did not read it (a
        release before it answers every row: shown as the filter's, they would mislead)."""
        doc = self._get(path, {**self._query(filters), **more})
        if filters is not None and filters.reviewed is not None and "reviewed" not in doc:
            raise ValueError(f"the kiosk at {self.url.removesuffix('/results')} runs a release that cannot search by "
                             "review (it answers every row): upgrade it, or search with 'reviewed or not'")
        return doc

    def reviews_of(self, uuids: list[str]) -> dict[tuple[str, str], ReviewView]:
        if not uuids:
            return {}
        docs = self._get("reviews", [("uuid", u) for u in uuids])["reviews"]
        out = {}
        for d in docs:
            d["at"] = datetime.fromisoformat(d["at"])
            out[(d["inspection_uuid"], d["ref"])] = _view(ReviewView, d)
        return out

    def part_numbers(self, version: str) -> dict[str, str]:
        """REF -> part number under a rule-set version, as the kiosk reads its stored text, asked once per version
        whose text the kiosk keeps (the answer then never changes; a spooled board's version is asked again until
        its text is stored); {} from a kiosk of a release before part numbers (no such route), asked once."""
        if version not in self._part_numbers:
            try:
                doc = self._get(f"part-numbers/{quote(version)}")
            except EndpointError as exc:
                if exc.status != 404:
                    raise
                doc = {"part_numbers": {}, "stored": True}
            if not doc["stored"]:
                return dict(doc["part_numbers"])
            self._part_numbers[version] = dict(doc["part_numbers"])
        return self._part_numbers[version]

    def export_csv(self, out: TextIO, filters: Filters | None = None) -> int:
        """The kiosk's CSV of the matching results, written to `out`; the rows written. A search by review asks the
        kiosk's count first: a CSV cannot say which filters its kiosk read, and a release before the review filter
        writes every row."""
        if filters is not None and filters.reviewed is not None:
            self._filtered("count", filters, {"cap": 1})
        with open_url(self._url("export.csv", self._query(filters)), None, self.token, 120.0) as r:
            text = r.read().decode("utf-8")
        out.write(text)
        return max(0, sum(1 for _ in csv.reader(io.StringIO(text))) - 1)

    def crop(self, uuid: str, ref: str) -> bytes | None:
        """The PNG of a kept crop (None when none was kept)."""
        try:
            with open_url(f"{self.url}/crops/{quote(uuid)}/{quote(ref)}", None, self.token, self.timeout) as r:
                return r.read()
        except EndpointError as exc:
            if exc.status == 404:
                return None
            raise
