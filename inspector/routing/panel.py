"""A panel: several copies of one board that the line carries, registers and inspects as one, each copy with a
verdict of its own.

An SMT line moves and names panels; depanelling, the MES and a repair station deal with their boards one by one, so
a rule set covering a panel says so (`panel: {boards: N}`) and names each copy's parts `k-REF`, k the copy's
position 1..N, numbered as `board import` numbers them (board/odbpp_panel.py: the top row first, left to right). A
part named otherwise sits on the panel's own frame: position 0. The panel keeps its one verdict (the line's gate,
the PLC, Hermes); the factory messages carry one unit per position (results/cfx.py).

A panel may come with x-outs: boards the board maker found bad and marked on their bad-mark pad (ink on a light pad,
or a light sticker on a dark one), so no machine processes them. `bad_marks:` names each board's pad; a board whose
pad reads marked is not inspected (ingest/bad_marks.py), as one the machine before marked skip on a Hermes lane.

Each board of a panel may carry its own serial code beside the panel's (`codes:`), which an MES traces the board by
after depanelling: read per board (ingest/board_codes.py), each unit is stored, exported and handed on under its own.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..yamlio import Fields
from .identity import SerialCode, fits, parse_code_style

POSITION = re.compile(r"^([0-9]+)-(.+)$")
FRAME = 0  # the position of a part on the panel's frame, not on one of its boards


MARKS = ("dark", "light")  # what a bad mark looks like on its pad: ink on a light pad, a light sticker on a dark one


@dataclass(frozen=True)
class BadMarks:
    """Where each board of a panel has its bad-mark pad, and what a mark looks like there."""

    at: dict[int, tuple[int, int]]  # board position -> the pad's centre, recipe px
    size: tuple[int, int] = (8, 8)  # the window read at each pad, px
    mark: str = "dark"
    contrast: float = 0.4  # a pad this much darker (lighter) than a clean one, relative to it, is marked


@dataclass(frozen=True)
class PanelRules:
    boards: int  # copies of the board on the panel, positions 1..boards
    bad_marks: BadMarks | None = None  # x-outs the board maker marked: not inspected
    codes: dict[int, SerialCode] | None = None  # board position -> its own serial code (the rest: the panel's)

    def position_of(self, ref: str) -> int:
        """The copy `ref` belongs to (`3-R1`: 3), or FRAME for a part on the panel's own frame."""
        m = POSITION.match(ref)
        return int(m.group(1)) if m is not None and 1 <= int(m.group(1)) <= self.boards else FRAME


def parse_panel(f: Fields, board: tuple[int, int]) -> PanelRules:
    f.unknown({"boards", "bad_marks", "codes"})
    boards = f.number("boards", minimum=1, integer=True)
    return PanelRules(boards, _bad_marks(f.sub("bad_marks"), boards, board) if f.has("bad_marks") else None,
                      _codes(f.sub("codes"), boards, board) if f.has("codes") else None)


def _bad_marks(f: Fields, boards: int, board: tuple[int, int]) -> BadMarks:
    """`bad_marks: {at: {1: [x, y], ...}, size: [w, h], mark: dark|light, contrast: 0.4}`, every error at its line."""
    f.unknown({"at", "size", "mark", "contrast"})
    size = f.get("size", [8, 8])
    if not (isinstance(size, list) and len(size) == 2 and all(_whole(v) and 3 <= v <= 64 for v in size)):
        raise f.error("size", f"must be [w, h], the window read at each pad in whole px from 3 to 64, got {size!r}")
    mark = f.text("mark", "dark")
    if mark not in MARKS:
        raise f.error("mark", f"must be one of {', '.join(MARKS)} (what a mark looks like on its pad), got {mark!r}")
    contrast = f.number("contrast", 0.4, minimum=0.05, maximum=0.95)
    at = _positions(f, boards, "pad")
    pads = Fields(f.get("at"), f.source, f"{f.where}.at")
    half_w, half_h = size[0] // 2, size[1] // 2
    for key, (x, y) in at.items():
        if not (half_w <= x <= board[0] - 1 - half_w and half_h <= y <= board[1] - 1 - half_h):
            raise pads.error(key, f"the pad at ({x}, {y}) with its {size[0]}x{size[1]} window does not fit "
                                  f"on the {board[0]}x{board[1]} board; move it inwards")
    return BadMarks(at, (size[0], size[1]), mark, contrast)


def _codes(f: Fields, boards: int, board: tuple[int, int]) -> dict[int, SerialCode]:
    """`codes: {at: {1: [x, y], ...}, size, module_px, symbology, on_noread}`: each board's own code, alike but for
    where it lies; every error at its line."""
    f.unknown({"at", "size", "module_px", "symbology", "on_noread"})
    style = parse_code_style(f, None)
    codes = {k: SerialCode(style.symbology, xy, style.size, style.module_px, style.on_noread)
             for k, xy in _positions(f, boards, "code").items()}
    where = Fields(f.get("at"), f.source, f"{f.where}.at")
    for k, code in codes.items():
        if not fits(code, board):
            raise where.error(k, f"the code's region {code.size}x{code.size} px around {code.at} does not fit on the "
                                 f"{board[0]}x{board[1]} board; move it inwards or make size smaller")
    return codes


def _positions(f: Fields, boards: int, what: str) -> dict[int, tuple[int, int]]:
    """`at: {1: [x, y], ...}`: a point per board of the panel, each error at its line."""
    raw = f.get("at")
    if not isinstance(raw, dict) or not raw:
        raise f.error("at", f"must map board positions to their {what}'s centre: {{1: [x, y], 2: [x, y], ...}}")
    at: dict[int, tuple[int, int]] = {}
    points = Fields(raw, f.source, f"{f.where}.at")
    for key, xy in raw.items():
        if not _whole(key) or not 1 <= key <= boards:
            raise points.error(key, f"is no board of the panel: positions run from 1 to {boards}")
        if not (isinstance(xy, list) and len(xy) == 2 and all(_whole(v) for v in xy)):
            raise points.error(key, f"must be [x, y], the {what}'s centre in whole board pixels, got {xy!r}")
        at[key] = (xy[0], xy[1])
    return at


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def stray_refs(panel: PanelRules, refs: Iterable[str]) -> list[str]:
    """References written like a copy's (`k-REF`) whose k is no position of the panel: a typing slip or a rule set
    made for a larger panel. They would otherwise be counted on the frame without a word."""
    return [r for r in refs if POSITION.match(r) and panel.position_of(r) == FRAME]
