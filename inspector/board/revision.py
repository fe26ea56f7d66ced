"""What a new revision of a board changes against the rule set taught on the line (an engineering change order).

A BOM revision fits a part that was not fitted, leaves one off, buys another make for a place; a CAD revision moves
or turns a part. Teaching the board again for each of them costs minutes and, taught from one golden board, moves
every figure a little (another seed, another expert). What a revision needs instead is known part by part: the
taught experts serve its component types as before, and only the places whose golden window no longer shows what the
new revision fits need a window from a board built to it. This module compares the taught rule set with the new
revision's import (`board import`) place by place and says which; app/board_revise.py makes the revised set.

What it cannot carry: a new layout (another outline, another scale, other fiducials: the golden board is another
board) and a component type no taught expert serves (its expert was never taught): both are refused, saying to
teach the revision again.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..routing.rules import ComponentRule, Placement, RuleSet, body_box

ADDED = "fitted now"  # inspected in the revision, not in the taught set (it was not fitted, or is new)
REMOVED = "no longer inspected"  # inspected in the taught set, not in the revision (not fitted now, or gone)
MOVED = "moved"  # its place or turn changed
PACKAGE = "package"  # another component type, or its type's footprint changed
PART_NUMBER = "part number"  # the BOM buys another part for the place
NEEDS_WINDOW = (ADDED, MOVED, PACKAGE, PART_NUMBER)  # the golden board does not show what the revision fits there
MARK_TOLERANCE_MM = 0.5  # a fiducial within this of where it was is the same mark (the taught set keeps the golden
# board's place of each, up to a few px off the CAD's)


@dataclass(frozen=True)
class Change:
    ref: str
    kind: str
    was: str  # what the taught set had at the place ("-": nothing inspected)
    now: str  # what the revision has ("-": nothing inspected)


@dataclass
class Revision:
    """The taught set against the revision, place by place."""
    changes: list[Change]
    kept: list[str]  # inspected alike in both
    new_types: dict[str, list[str]] = field(default_factory=dict)  # a type no taught expert serves -> its parts
    layout: list[str] = field(default_factory=list)  # how the layout differs (empty: the same board)

    def needing_window(self, looks_alike: frozenset[str] = frozenset()) -> list[str]:
        """The parts whose golden window must come from a board of the revision; a part number changed on a part
        named in `looks_alike` (a value change of an unmarked chip) keeps its window."""
        return sorted({c.ref for c in self.changes if c.kind in NEEDS_WINDOW
                       and not (c.kind == PART_NUMBER and c.ref in looks_alike)})

    def of_kind(self, kind: str) -> list[str]:
        return sorted({c.ref for c in self.changes if c.kind == kind})


def compare(taught: RuleSet, revision: RuleSet, px_per_mm: float) -> Revision:
    """The revision's parts against the taught set's (`px_per_mm`: the recipe's scale, for the marks' tolerance)."""
    old, new = _placed(taught), _placed(revision)
    old_types = {c.name: c for c in taught.components}
    changes: list[Change] = []
    kept: list[str] = []
    new_types: dict[str, list[str]] = {}
    for ref in sorted(set(old) | set(new)):
        if ref not in new:
            changes.append(Change(ref, REMOVED, old[ref][0].name, "-"))
            continue
        comp, place = new[ref]
        if comp.name not in old_types:
            new_types.setdefault(comp.name, []).append(ref)
        if ref not in old:
            changes.append(Change(ref, ADDED, "-", comp.name))
            continue
        was_comp, was_place = old[ref]
        said = len(changes)
        if was_comp.name != comp.name:
            changes.append(Change(ref, PACKAGE, was_comp.name, comp.name))
        elif _footprint(was_comp) != _footprint(comp):
            changes.append(Change(ref, PACKAGE, f"{was_comp.name} (its footprint as taught)",
                                  f"{comp.name} (another footprint)"))
        if (was_place.x, was_place.y, was_place.rotation) != (place.x, place.y, place.rotation):
            changes.append(Change(ref, MOVED, _where(was_place), _where(place)))
        was_pn, pn = taught.part_numbers.get(ref), revision.part_numbers.get(ref)
        if was_pn and pn and was_pn != pn:
            changes.append(Change(ref, PART_NUMBER, was_pn, pn))
        if len(changes) == said:
            kept.append(ref)
    return Revision(changes, kept, new_types, layout_changes(taught, revision, px_per_mm))


def layout_changes(taught: RuleSet, revision: RuleSet, px_per_mm: float) -> list[str]:
    """How the revision's layout differs from the taught board's: what makes its golden board another board."""
    out = []
    if taught.board_size != revision.board_size:
        out.append(f"the board is {revision.board_size[0]}x{revision.board_size[1]} px where the taught one is "
                   f"{taught.board_size[0]}x{taught.board_size[1]} (another outline, or another scale)")
    if taught.crop_margin != revision.crop_margin:
        out.append(f"crop_margin {revision.crop_margin} where the taught set's is {taught.crop_margin}")
    marks = {m.name: m for m in taught.fiducials.marks} if taught.fiducials is not None else {}
    now = {m.name: m for m in revision.fiducials.marks} if revision.fiducials is not None else {}
    gone = sorted(set(marks) - set(now))
    if gone:
        out.append(f"fiducial(s) {', '.join(gone)} no longer on the board")
    tolerance = MARK_TOLERANCE_MM * px_per_mm
    moved = sorted(n for n in set(marks) & set(now)
                   if max(abs(marks[n].x - now[n].x), abs(marks[n].y - now[n].y)) > tolerance)
    if moved:
        out.append(f"fiducial(s) {', '.join(moved)} moved more than {MARK_TOLERANCE_MM:g} mm")
    return out


def neighbours(taught: RuleSet, revision: RuleSet, removed: list[str]) -> dict[str, list[str]]:
    """Each removed part -> the revision's parts whose window holds some of its body: their golden windows still show
    the part the revision leaves off."""
    old = _placed(taught)
    out: dict[str, list[str]] = {}
    windows = {p.ref: body_box(c, p, revision.crop_margin) for c, p in revision.placements()}
    for ref in removed:
        comp, place = old[ref]
        body = body_box(comp, place)
        near = sorted(r for r, w in windows.items() if r != ref and _overlap(body, w))
        if near:
            out[ref] = near
    return out


def format_revision(revision: Revision) -> str:
    """The changes as a table, one row a change, and the parts kept as taught."""
    rows = [f"{'part':<10} {'change':<20} {'was':<36} now"]
    rows += [f"{c.ref:<10} {c.kind:<20} {c.was:<36} {c.now}" for c in revision.changes]
    if not revision.changes:
        rows.append("(no part changed)")
    rows.append(f"kept as taught: {len(revision.kept)} part(s)")
    return "\n".join(rows)


def _placed(rules: RuleSet) -> dict[str, tuple[ComponentRule, Placement]]:
    return {p.ref: (c, p) for c, p in rules.placements()}


def _footprint(comp: ComponentRule) -> tuple:
    return comp.shape, comp.size, comp.pads, comp.body


def _where(p: Placement) -> str:
    return f"({p.x}, {p.y}) px, {p.rotation} deg"


def _overlap(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
