"""A panel: several copies of one board that the line carries, registers and inspects as one, each copy with a
verdict of its own.

An SMT line moves and names panels; depanelling, the MES and a repair station deal with their boards one by one, so
a rule set covering a panel says so (`panel: {boards: N}`) and names each copy's parts `k-REF`, k the copy's
position 1..N, numbered as `board import` numbers them (board/odbpp_panel.py: the top row first, left to right). A
part named otherwise sits on the panel's own frame: position 0. The panel keeps its one verdict (the line's gate,
the PLC, Hermes); the factory messages carry one unit per position (results/cfx.py).
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..yamlio import Fields

POSITION = re.compile(r"^([0-9]+)-(.+)$")
FRAME = 0  # the position of a part on the panel's frame, not on one of its boards


@dataclass(frozen=True)
class PanelRules:
    boards: int  # copies of the board on the panel, positions 1..boards

    def position_of(self, ref: str) -> int:
        """The copy `ref` belongs to (`3-R1`: 3), or FRAME for a part on the panel's own frame."""
        m = POSITION.match(ref)
        return int(m.group(1)) if m is not None and 1 <= int(m.group(1)) <= self.boards else FRAME


def parse_panel(f: Fields) -> PanelRules:
    f.unknown({"boards"})
    return PanelRules(f.number("boards", minimum=1, integer=True))


def stray_refs(panel: PanelRules, refs: Iterable[str]) -> list[str]:
    """References written like a copy's (`k-REF`) whose k is no position of the panel: a typing slip or a rule set
    made for a larger panel. They would otherwise be counted on the frame without a word."""
    return [r for r in refs if POSITION.match(r) and panel.position_of(r) == FRAME]
