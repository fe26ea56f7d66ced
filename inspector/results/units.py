"""A board's units: the boards of a panel, each with its parts and its own verdict, or the one board it is.

One rule for every reader of a result, so the factory message (cfx.py), the database's `panel_failed`, the CSV,
the dashboard and the PLC's reject positions never disagree on which boards of a panel failed. It reads parts by
their `ref` and `verdict` alone: a part as the line hands it over (records.PartRecord) or as the database holds it
(schema.ComponentResult) alike. Positions are routing/panel.py's: 1..N the panel's boards, FRAME (0) its own frame.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from ..routing.panel import FRAME, PanelRules


class Judged(Protocol):
    ref: str
    verdict: str


P = TypeVar("P", bound=Judged)


def verdict_of(parts: Iterable[Judged], error: str | None = None) -> str:
    """A board's verdict from its parts' (or a panel board's from its own): error before fail before pass."""
    verdicts = {p.verdict for p in parts}
    if error is not None or "error" in verdicts:
        return "error"
    return "fail" if "fail" in verdicts else "pass"


def units(panel_boards: int | None, parts: Sequence[P], skipped: Iterable[int] = ()) -> list[tuple[int, list[P]]]:
    """(position, its parts) of each unit: one at position 1, or a panel's boards that have parts (every board but
    the x-outs in `skipped`, where a board-level error left no parts) and, where it has parts, the panel's frame at
    FRAME."""
    if not panel_boards:
        return [(1, list(parts))]
    if not parts:
        gone = set(skipped)
        return [(k, []) for k in range(1, panel_boards + 1) if k not in gone]
    panel = PanelRules(panel_boards)
    found: dict[int, list[P]] = {}
    for p in parts:
        found.setdefault(panel.position_of(p.ref), []).append(p)
    return sorted(found.items())


def failed_positions(panel_boards: int | None, parts: Sequence[Judged], error: str | None = None,
                     skipped: Iterable[int] = ()) -> list[int]:
    """The positions whose unit did not pass (fail or error), in order; [] for a board that passed."""
    return [k for k, own in units(panel_boards, parts, skipped) if verdict_of(own, error) != "pass"]


def board_verdicts(panel_boards: int, parts: Sequence[Judged], error: str | None = None,
                   skipped: Iterable[int] = ()) -> dict[int, str]:
    """Each board of a panel (1..N; its frame is no board, an x-out in `skipped` was not inspected) with its own
    verdict: what a line's per-board yield counts."""
    own = dict(units(panel_boards, parts, skipped))
    gone = set(skipped)
    return {k: verdict_of(own.get(k, []), error) for k in range(1, panel_boards + 1) if k not in gone}


def positions_text(positions: Iterable[int]) -> str:
    """Positions as the database and the CSV keep them: `2;5` (`0` is the frame), empty for none."""
    return ";".join(str(k) for k in positions)


def parse_positions(text: str | None) -> list[int]:
    """`positions_text` read back; empty or None: none."""
    return [int(k) for k in text.split(";")] if text else []


def unit_serial(serials: Mapping[int, str], position: int, board_serial: str) -> str:
    """The serial a unit goes by, one rule for every reader: a panel's board its own where it has one (`serials`:
    position -> serial), else the board's (the panel's)."""
    return serials.get(position) or board_serial


def serials_text(serials: dict[int, str]) -> str | None:
    """A panel's boards' own serials as the database keeps them: JSON `{"1": "SN-1", ...}` (a serial is any text a
    code holds, so no separator of ours would do); None for none."""
    return json.dumps({str(k): s for k, s in sorted(serials.items())}) if serials else None


def parse_serials(text: str | None) -> dict[int, str]:
    """`serials_text` read back; empty or None: none."""
    return {int(k): s for k, s in json.loads(text).items()} if text else {}


@dataclass(frozen=True)
class PanelResult:
    """A stored panel's result as readers show it: its boards, the positions that did not pass, its x-outs."""

    boards: int
    failed: list[int]
    skipped: list[int] = field(default_factory=list)  # x-outs: not inspected
    serials: dict[int, str] = field(default_factory=dict)  # the boards' own serials, where they have them

    @classmethod
    def stored(cls, boards: int | None, failed: str | None, skipped: str | None,
               serials: str | None = None) -> PanelResult | None:
        """From the database's columns (or a kiosk's answer of them): None off a panel."""
        if not boards:
            return None
        return cls(boards, parse_positions(failed), parse_positions(skipped), parse_serials(serials))

    def describe(self) -> str:
        """For an operator: `boards 2, 5 of 6 failed` (`and its frame` where a frame part failed), the x-outs
        after it; empty where every board passed and none was skipped."""
        said = []
        boards = [str(k) for k in self.failed if k != FRAME]
        if boards:
            said.append(f"board{'s' if len(boards) > 1 else ''} {', '.join(boards)} of {self.boards} failed"
                        + (" and its frame" if FRAME in self.failed else ""))
        elif self.failed:
            said.append("the panel's frame failed")
        if self.skipped:
            said.append(f"x-out{'s' if len(self.skipped) > 1 else ''} {', '.join(map(str, self.skipped))} not "
                        "inspected")
        return "; ".join(said)

    def position_of(self, ref: str) -> int:
        return PanelRules(self.boards).position_of(ref)

    def unit_serial(self, position: int, board_serial: str) -> str:
        """The serial the unit at `position` goes by: its board's own, else the panel's (`board_serial`)."""
        return unit_serial(self.serials, position, board_serial)
