"""The golden board's window a reviewed part was compared with, cut again for the dataset export.

An expert that compares with the golden board (ingest/golden.py) learns from pairs: the live crop and the same
window of the golden board, or of the approved make the line chose for the part (its result names it). The export
writes that window beside every crop of a rule set with a golden board (`golden/` mirroring the crops' tree), so
reviews retrain such an expert too. It is cut from the rule set given to the export (its golden board and approved
makes): give the one the parts were inspected under. A crop that is not the rule set's window of its part (a bare
board's difference, cut around it and compared after an alignment of its own) has no window to cut again: said.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..ingest.alternates import AlternateMissing, alternate_windows
from ..ingest.crops import crop_part
from ..ingest.golden import GoldenMissing, golden_image
from ..routing.rules import ComponentRule, Placement, RuleSet
from .schema import ComponentResult


class GoldenWindows:
    """The windows of one export's parts: each rule set's placements looked up once, not once a part."""

    def __init__(self) -> None:
        self._places: dict[int, dict[str, Placement]] = {}  # a rule set (by id: alive through the export) -> REF

    def cut(self, part: ComponentResult, comp: ComponentRule, rules: RuleSet, live: np.ndarray) -> np.ndarray | str:
        """The window the line compared `part` with (HxWx3 BGR, the live crop's size), or why it cannot be cut."""
        if id(rules) not in self._places:
            self._places[id(rules)] = {p.ref: p for _c, p in rules.placements()}
        return golden_window(part, comp, rules, live, self._places[id(rules)].get(part.ref))


def golden_window(part: ComponentResult, comp: ComponentRule, rules: RuleSet, live: np.ndarray,
                  place: Placement | None) -> np.ndarray | str:
    """The window the line compared `part` (at `place` in `rules`) with, or why it cannot be cut."""
    try:
        if part.approved_make:
            files = rules.alternates.get(part.ref, ())
            names = [Path(f).name for f in files]
            if part.approved_make not in names:
                return (f"it was compared with the approved make {part.approved_make}, which the rule set "
                        f"{rules.recipe} given no longer approves for {part.ref}: export with the rule set it was "
                        "inspected under")
            window = alternate_windows(rules)[part.ref][names.index(part.approved_make)]
        elif place is None:
            return f"{part.ref} is not a part of the rule set {rules.recipe} given: no golden window to cut"
        else:
            window = crop_part(golden_image(rules), comp, place, rules.crop_margin)
    except (GoldenMissing, AlternateMissing) as exc:
        return str(exc)
    if window.shape != live.shape:
        return (f"its crop ({live.shape[1]}x{live.shape[0]} px) is not the rule set's window of {part.ref} "
                f"({window.shape[1]}x{window.shape[0]}): a bare board's difference, compared after an alignment of "
                "its own, or a rule set changed since")
    return window
