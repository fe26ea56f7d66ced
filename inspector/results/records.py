"""Board and part results as the line hands them to the results room."""
from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime
from typing import Any

import numpy as np

from ..routing.identity import is_noread
from .units import failed_positions, unit_serial, verdict_of


def new_inspection_id() -> str:
    """A fresh inspection id (UUID4), for a board that has no id of its own content."""
    return str(uuid.uuid4())


@dataclass
class PartRecord:
    ref: str
    component_type: str
    expert: str  # the expert whose answer decided the verdict
    weights_sha256: str | None
    verdict: str  # pass | fail | error
    defect_class: str  # ok, a defect class, "unverified" (no confident detection), or "error"
    score: float | None
    box: tuple[float, float, float, float] | None = None  # x0, y0, x1, y1 in crop pixels
    crop_path: str | None = None
    error: str | None = None
    # the approved make's window the part was compared with (its file's name under the rule set's `alternates:`,
    # routing/alternates.py), None: the golden board's (or a part not compared). Stored from schema revision 0011
    alternate: str | None = None
    # in memory only (not stored): a bare board's difference, its box on the board (x0, y0, x1, y1, image px),
    # a taught classifier's log-odds of good with its likeliest defect class, whatever it called (they rank a
    # benchmark's precision-recall curve)
    at: tuple[float, float, float, float] | None = None
    good_logodds: float | None = None
    likeliest: str | None = None
    # the presence check's measure (board/presence.py: the share of its golden body's contrast kept), whatever the
    # verdict: a part the experts failed may be one the presence check would call missing too
    body_share: float | None = None
    # the BOM's part number for its place (the rule set's `part_numbers:`), in memory: the factory message names it
    part_number: str | None = None


@dataclass
class BoardRecord:
    board_serial: str
    recipe: str
    ruleset_version: str
    started_at: datetime
    finished_at: datetime
    line: str = "line-1"
    station: str = "aoi-1"
    source: str = ""
    parts: list[PartRecord] = field(default_factory=list)
    error: str | None = None  # a board-level failure (registration failed: ...); such a board has no part verdicts
    transform: tuple[float, ...] | None = None  # registration, 2x3 row-major: recipe px -> image px
    residual_px: float | None = None  # how far the fiducials lie from the fitted transform, at most
    fiducials: dict[str, tuple[float, float]] = field(default_factory=dict)  # fiducials found, image px
    # given at ingest and unique in the database: what makes a replayed spool or a re-sent commit store it once
    inspection_id: str = field(default_factory=new_inspection_id)
    # where board_serial came from: code (read from the board's own code), noread (NOREAD-<id>: the code was not
    # read), sidecar / filename (the source said), file (an image's name), synthetic, none (no identity at all)
    serial_source: str | None = None
    board_id: str | None = None  # the Hermes BoardId (a GUID that follows the board down an SMT line), if any
    # a panel's boards (its rule set's `panel: {boards: N}`): its parts k-REF are board k's (routing/panel.py), each
    # board with its own result (units.py); None: one board. Stored from schema revision 0009
    panel_boards: int | None = None
    # a panel's boards the machine before marked skip or missing, or whose bad mark was read (x-outs): not
    # inspected, none of their parts here. Stored from schema revision 0009
    panel_skipped: list[int] = field(default_factory=list)
    # a panel's boards' own serials (position -> serial; NOREAD-<id>-<k> for one whose code did not read), where the
    # rule set gives them codes or the machine before handed them on; a board not named goes by board_serial.
    # Stored from schema revision 0010
    panel_serials: dict[int, str] = field(default_factory=dict)
    # crop images of parts whose crops may be kept (ref -> HxWx3 BGR); in memory only, until the crop keeper
    # has written them and set the parts' crop_path
    crops: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    @property
    def verdict(self) -> str:
        return verdict_of(self.parts, self.error)

    def failed_boards(self) -> list[int]:
        """A panel's positions that did not pass (units.py; its x-outs left out); [] off a panel."""
        if not self.panel_boards:
            return []
        return failed_positions(self.panel_boards, self.parts, self.error, self.panel_skipped)

    def unit_serial(self, position: int) -> str:
        """The serial a unit goes by: a panel's board its own where it has one, else the board's (the panel's)."""
        return unit_serial(self.panel_serials, position, self.board_serial)

    def unread_boards(self) -> list[int]:
        """A panel's boards whose own code did not read (their serial is NOREAD-...)."""
        return [k for k, s in self.panel_serials.items() if is_noread(s)]

    @property
    def alternates(self) -> dict[str, str]:
        """REF -> the approved make's window, of each part compared with one (PartRecord.alternate)."""
        return {p.ref: p.alternate for p in self.parts if p.alternate}

    def to_json(self) -> dict[str, Any]:
        out = asdict(replace(self, crops={}))
        del out["crops"]
        out["verdict"] = self.verdict
        out["started_at"] = self.started_at.isoformat()
        out["finished_at"] = self.finished_at.isoformat()
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BoardRecord:
        # fields a later release added (a spool written by it, read after a rollback) are dropped, not fatal
        mine, its = {f.name for f in fields(cls)}, {f.name for f in fields(PartRecord)}
        parts = [PartRecord(**{**{k: v for k, v in p.items() if k in its}, "box": tuple(p["box"]) if p.get("box")
                               else None, "at": tuple(p["at"]) if p.get("at") else None}) for p in data["parts"]]
        data = {k: v for k, v in data.items() if k in mine and k != "parts"}
        if data.get("transform") is not None:
            data["transform"] = tuple(data["transform"])
        data["fiducials"] = {k: tuple(v) for k, v in (data.get("fiducials") or {}).items()}
        data["panel_serials"] = {int(k): v for k, v in (data.get("panel_serials") or {}).items()}  # JSON keys: text
        return cls(**{**data, "started_at": datetime.fromisoformat(data["started_at"]),
                      "finished_at": datetime.fromisoformat(data["finished_at"])}, parts=parts)
