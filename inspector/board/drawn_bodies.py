"""A part's body from its file's assembly (fabrication) drawing, where the package's outline is not its body.

KiCad writes an ODB++ or IPC-2581 package's outline from its courtyard (results/boards.md): the body and the
clearance around its pads, larger than what the camera must see, and overlapping its neighbours' where courtyards
touch, which the rule validator refuses. Both formats also carry the drawing of the body as the footprint draws it,
on layers of their own (odbpp_drawings.py, ipc2581_drawings.py). IPC-2581 ties each drawing to its part (an
ASSEMBLY layer's `Set componentRef=`); ODB++ does not, so there a drawing is given to the part it lies on: strokes
that meet end to end are one drawing, and a drawing belongs to the part whose outline covers most of it (at least
half), the smallest where several cover it alike. A part's body is then the box of its drawings in its own frame;
a part given none (or only a line) keeps the file's outline. Text is never a drawing here (each reader leaves it
out).
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace

from .design import PlacedPart, Rect, arc_points, bounding, in_frame, is_body, turned

Point = tuple[float, float]

MOSTLY = 0.5  # of a drawing's box: it lies over a part's outline at least this much to be the part's (a body drawn
#              past its outline: an overhanging connector, a SOIC's plastic past the pads' hull where the outline is
#              that hull)
JOIN_MM = 0.01  # strokes whose ends lie this close meet: the exports' rounding (KiCad writes 0.01 mm)
SAME_MM = 0.05  # a drawn body within this of the file's outline on every side is the outline drawn again


@dataclass(frozen=True)
class Drawing:
    """One feature of an assembly drawing layer, board frame mm (y up)."""

    points: tuple[Point, ...]  # its vertices, arcs and circles as points along them
    ref: str | None = None  # the part the file ties it to, where it does
    stroke: bool = False  # an open line or arc, which meets others end to end into one drawing


def circle_points(centre: Point, diameter: float) -> list[Point]:
    """Points around a circle (a round feature's outline)."""
    r = diameter / 2
    return arc_points((centre[0] + r, centre[1]), (centre[0] + r, centre[1]), centre, False)


def box_points(centre: Point, w: float, h: float, degrees: float = 0.0) -> list[Point]:
    """The corners of a w x h box about `centre`, turned counter-clockwise by `degrees`."""
    return [(centre[0] + dx, centre[1] + dy) for dx, dy in
            (turned(sx * w / 2, sy * h / 2, degrees) for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1)))]


def joined(drawings: list[Drawing]) -> list[Drawing]:
    """The drawings with strokes that meet end to end (and are tied to the same part, or to none) made one."""
    parent = list(range(len(drawings)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    ends: dict[tuple[str | None, int, int], int] = {}
    for i, d in enumerate(drawings):
        if not d.stroke or not d.points:
            continue
        for p in (d.points[0], d.points[-1]):
            key = (d.ref, round(p[0] / JOIN_MM), round(p[1] / JOIN_MM))
            if key in ends:
                parent[root(i)] = root(ends[key])
            else:
                ends[key] = i
    groups: dict[int, list[Drawing]] = defaultdict(list)
    for i, d in enumerate(drawings):
        groups[root(i)].append(d)
    return [Drawing(tuple(p for d in g for p in d.points), g[0].ref) for g in groups.values()]


def _area(box: Rect) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def _grown(box: Rect, by: float) -> Rect:
    return box[0] - by, box[1] - by, box[2] + by, box[3] + by


def _overlap(a: Rect, b: Rect) -> float:
    return _area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))


class _Index:
    """The parts by where they are on the board, to find those a drawing may lie on without trying every one."""

    CELL_MM = 10.0

    def __init__(self, parts: list[PlacedPart]) -> None:
        self.cells: dict[tuple[int, int], list[tuple[PlacedPart, Rect]]] = defaultdict(list)
        for part in parts:
            extent = part.extent()
            if extent is None:
                continue
            corners = [(part.x_mm + dx, part.y_mm + dy) for dx, dy in
                       (turned(x, y, part.rotation) for x in (extent[0], extent[2]) for y in (extent[1], extent[3]))]
            b = bounding(corners)
            assert b is not None
            for cell in self._cells(b):
                self.cells[cell].append((part, _grown(extent, JOIN_MM)))

    def _cells(self, b: Rect) -> list[tuple[int, int]]:
        c = self.CELL_MM
        return [(x, y) for x in range(math.floor(b[0] / c), math.floor(b[2] / c) + 1)
                for y in range(math.floor(b[1] / c), math.floor(b[3] / c) + 1)]

    def owner(self, drawing: Drawing) -> PlacedPart | None:
        """The part whose outline the drawing lies over most (MOSTLY of its box at least); of parts it lies over
        alike (a small part's drawing inside a large neighbour's courtyard), the smallest."""
        b = bounding(list(drawing.points))
        if b is None:
            return None
        best = None
        seen = set()
        for cell in self._cells(b):
            for part, extent in self.cells.get(cell, ()):
                if id(part) in seen:
                    continue
                seen.add(id(part))
                own = bounding([in_frame(part, p) for p in drawing.points])
                assert own is not None
                own = _grown(own, JOIN_MM)  # a straight line's box has an area
                share = _overlap(own, extent) / _area(own)
                if share < MOSTLY:
                    continue
                key = (round(share, 6), -_area(extent))
                if best is None or key > best[0]:
                    best = (key, part)
        return best[1] if best else None


def drawn_boxes(parts: list[PlacedPart], drawings: list[Drawing]) -> tuple[dict[str, Rect], int, int]:
    """(reference -> the box of the part's drawings in its own frame, how many drawings went to `parts`, how many
    there were once joined): drawings the file ties to a part by name are its own; the others (joined end to end
    first) go to the part they lie on."""
    by_ref = {p.ref: p for p in parts}
    points: dict[str, list[Point]] = defaultdict(list)
    loose = []
    drawn = joined(drawings)
    held = 0
    for d in drawn:
        if d.ref is not None:
            if d.ref in by_ref:
                held += 1
                points[d.ref].extend(in_frame(by_ref[d.ref], p) for p in d.points)
        else:
            loose.append(d)
    if loose:
        index = _Index(parts)
        for d in loose:
            part = index.owner(d)
            if part is not None:
                held += 1
                points[part.ref].extend(in_frame(part, p) for p in d.points)
    out = {}
    for ref, pts in points.items():
        box = bounding(pts)
        if is_body(box):
            out[ref] = box
    return out, held, len(drawn)


def is_outline(part: PlacedPart, box: Rect) -> bool:
    """The drawn box is the file's own outline of the part again (a courtyard layer's drawing, not a body)."""
    return part.body is not None and all(abs(a - b) <= SAME_MM for a, b in zip(box, part.body))


def with_drawn_bodies(parts: list[PlacedPart], boxes: dict[str, Rect]) -> tuple[list[PlacedPart], int]:
    """`parts` with each part that has a drawn box wearing it as its body, and how many do."""
    out = [replace(p, body=boxes[p.ref]) if p.ref in boxes else p for p in parts]
    return out, sum(1 for p in parts if p.ref in boxes)


def told(where: str, side: str, given: int, of: int, source: str | None) -> str:
    """The import's note on one side's bodies: how many its assembly drawing (`source`) gave, or that none did."""
    if source is None:
        return (f"{where}: nothing in the file draws the {side} parts' bodies apart from their packages' outlines, "
                "which some exporters write from the courtyard (KiCad does): their windows may be larger than the "
                "parts and neighbours' may overlap; check them in the preview")
    kept = f"; the other {of - given} keep their package's outline" if given < of else ""
    return f"{where}: the {side} parts' bodies are their assembly drawing ({source}): {given} of {of}{kept}"


def dressed(parts: list[PlacedPart], chosen: dict[str, tuple[str, dict[str, Rect]]], where: str
            ) -> tuple[list[PlacedPart], list[str]]:
    """`parts` wearing the drawn boxes (`chosen`: side -> (what drew them, reference -> box)), and a note for each
    side that has parts to wear them."""
    notes = []
    for side in ("top", "bottom"):
        of = sum(1 for p in parts if p.side == side and p.extent() is not None)
        if of:
            source, boxes = chosen.get(side, ("", {}))
            parts, given = with_drawn_bodies(parts, boxes)
            notes.append(told(where, side, given, of, source if given else None))
    return parts, notes


def by_side(parts: list[PlacedPart], drawings: dict[str, list[Drawing]], where: str, source: dict[str, str]
            ) -> tuple[list[PlacedPart], list[str]]:
    """`parts` wearing the bodies each side's drawings give them, and the notes on it (`source`: side -> what drew
    them, for the note)."""
    chosen = {}
    for side in ("top", "bottom"):
        mine = [p for p in parts if p.side == side and p.extent() is not None]
        if mine:
            chosen[side] = (source.get(side, ""), drawn_boxes(mine, drawings.get(side, []))[0])
    return dressed(parts, chosen, where)
