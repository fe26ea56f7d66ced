"""A placement file's parts given their pads and the board's edge from the fabrication Gerbers beside it.

Where the Gerbers name each pad's part (X2 component attributes), a part takes the pads that name it. A pad they
name no part for (all of them in plain RS-274X; in X2 a custom pad, whose region gerbonara reads without its
attributes) goes to the part it lies nearest: the distance to the part's named pads' box, else to where its
package's name says its lands lie (pad_fields.py: an IPC-7351 name's span about its centre, a KiCad through-hole
name's pins from pin 1, the way the board's pads say), else to its body as the library sizes it, turned with the
part (0 inside it), within a quarter of the box's larger side of it (at least NEAR_MM, at most REACH_MM: an 0402's
lands hug its body, a gull-wing's toes reach past its plastic); what is left, within BODILESS_REACH_MM of the
placement point of a part with none. A pad nothing reaches (a test pad no line of the file lists, an
untented via) is nobody's. Pads go into each part's footprint frame (design.in_frame); the body stays the
library's, about the placement point, or about the pads where that point is a pad (a part placed by its pin 1), a
two-terminal part's laid along its terminals where the placement file's zero is a quarter from the library's.

The two files must share an origin. Where they do not (a placement file written relative to the drill/auxiliary
origin beside Gerbers in absolute coordinates, the usual slip), the named pads say by how much and the Gerbers are
moved onto the placement file, noted; without names the board's lower-left corner, the usual other origin, is
tried; otherwise the import stops and says so.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import replace

from .design import BoardDesign, CadError, Pad, PlacedPart, Rect, bounding, in_frame, mounted, named_refs, on_board
from .gerber import BoxGrid, GerberBoard, GerberPad
from .klc_names import stated_size
from .library import Library
from .mounting import by_pads
from .pad_fields import WAYS, PadField, pad_field, placings, way_box

REACH_MM = 1.5  # a pad may lie this far outside its part's body (a gull-wing's toe, a J-lead's land)
NEAR_MM, FAR_SHARE = 0.5, 0.25  # ... less for a small part: a quarter of its larger side, at least NEAR_MM
BODILESS_REACH_MM = 5.0  # ... or this far from the placement point of a part whose body the library does not size
AGREE_MM = 0.5  # parts whose pads' centre is this near one offset agree on it
PIN_ONE_MM = 0.05  # a pad this near the placement point is the point: the part is placed by its pin 1
FIELD_SLACK_MM = 0.5  # a pad's centre this far outside the field its package's name states is still in it
PIN_SLACK_MM = 0.25  # ... and this far from where a through-hole part's name puts a pin, that pin's
ENOUGH = 0.5  # the share of parts that must find pads for an origin to be the files' shared one


def _corners(pads: list) -> list[tuple[float, float]]:
    """Every pad's corners (GerberPads on the board, or a footprint's Pads), in their own frame."""
    return [(q.x + sx * q.w / 2, q.y + sy * q.h / 2) for q in pads for sx in (-1, 1) for sy in (-1, 1)]


def _pads_box(pads: list) -> Rect:
    """The box holding every pad, in their own frame."""
    return bounding(_corners(pads))


def _seeds(parts: list[PlacedPart], library: Library, named: dict[str, list[GerberPad]],
           pads: list[GerberPad]) -> dict[str, Rect]:
    """Each part's box in its own frame saying where its pads lie: its pads the Gerbers name (X2), else where its
    package's name says its lands lie (pad_fields.py: the placing of the field that holds most of `pads`, the board's
    pads in the placement's frame), else the library's body, else a size its name states (a gull-wing's plastic:
    its toes lie within REACH_MM of it). A part with none is absent: it is placed by its point."""
    seeds: dict[str, Rect] = {}
    grid = BoxGrid([(q.x, q.y, q.x, q.y) for q in pads])
    for p in parts:
        own = [q for q in named.get(p.ref, ()) if q.side == p.side]
        if own:
            seeds[p.ref] = bounding([in_frame(p, c) for c in _corners(own)])
            continue
        field = pad_field(p.package)
        placed = _placing(p, field, grid, pads) if field is not None else None
        if placed is not None:
            seeds[p.ref] = placed
            continue
        size = library.part_body(p) or stated_size(p.package)
        if size is not None:
            seeds[p.ref] = (-size[0] / 2, -size[1] / 2, size[0] / 2, size[1] / 2)
    return seeds


def _placing(part: PlacedPart, field: PadField, grid: BoxGrid, pads: list[GerberPad]) -> Rect | None:
    """Where `field` lies about `part` (in its frame), read off its side's pads: a centred field's placing holding
    the most pads' centres (within FIELD_SLACK_MM), a field from pin 1 the way from it whose pins find the most pads
    (within PIN_SLACK_MM of each), the first of the best on a tie; None where none finds a pad."""
    reach = math.hypot(field.w, field.h) + FIELD_SLACK_MM
    near = [in_frame(part, (q.x, q.y)) for q in (pads[i] for i in grid.near(part.x_mm, part.y_mm, reach))
            if q.side == part.side]
    if field.from_pin_one:
        scored = [(sum(1 for x, y in field.pins(sx, sy) if any(math.hypot(u - x, v - y) <= PIN_SLACK_MM
                                                               for u, v in near)), way_box(field, sx, sy))
                  for sx, sy in WAYS]
    else:
        scored = [(sum(1 for u, v in near if x0 - FIELD_SLACK_MM <= u <= x1 + FIELD_SLACK_MM
                       and y0 - FIELD_SLACK_MM <= v <= y1 + FIELD_SLACK_MM), (x0, y0, x1, y1))
                  for x0, y0, x1, y1 in placings(field)]
    best, most = None, 0
    for held, box in scored:
        if held > most:
            best, most = box, held
    return best


def _distance(part: PlacedPart, box: Rect, x: float, y: float) -> float:
    """How far the board point (x, y) lies outside `box`, measured in the part's own frame (a part turned 45
    degrees is not its box's box)."""
    u, v = in_frame(part, (x, y))
    return math.hypot(max(box[0] - u, 0.0, u - box[2]), max(box[1] - v, 0.0, v - box[3]))


def _reach(part: PlacedPart, box: Rect, far: float) -> Rect:
    """The board-frame box within which a pad can be `far` from the part's `box`: where to look for its pads."""
    corners = [on_board(part, u, v) for u in (box[0] - far, box[2] + far) for v in (box[1] - far, box[3] + far)]
    return bounding(corners)


def _far(box: Rect) -> float:
    """How far outside its box a sized part's pad may lie: a small part's lands hug its body (an 0402's are under
    its ends), a gull-wing's toes reach past its plastic by a share of it; at most REACH_MM."""
    return min(REACH_MM, max(NEAR_MM, FAR_SHARE * max(box[2] - box[0], box[3] - box[1])))


def _by_place(parts: list[PlacedPart], pads: list[GerberPad], seeds: dict[str, Rect]) -> dict[str, list[GerberPad]]:
    """Each pad (in the placement's frame) given to the part it lies nearest (see the module's rule): first to
    the parts with a seed box (the distance to it), then what is left to the others (the distance to their
    placement point), so a part of unknown size beside a large one does not take the large one's toes."""
    point = (0.0, 0.0, 0.0, 0.0)
    sized = [(p, seeds[p.ref]) for p in parts if p.ref in seeds]
    unsized = [(p, point) for p in parts if p.ref not in seeds]
    mine: dict[str, list[GerberPad]] = {}
    left = list(pads)
    for reach, fars in ((sized, [_far(box) for _p, box in sized]), (unsized, [BODILESS_REACH_MM] * len(unsized))):
        grid = BoxGrid([_reach(p, box, far) for (p, box), far in zip(reach, fars)])
        rest = []
        for pad in left:
            best = None
            for i in grid.holding(pad.x, pad.y):
                p, box = reach[i]
                if p.side != pad.side and not pad.through_hole:  # a plated hole's pads are one part's, both sides
                    continue
                d = _distance(p, box, pad.x, pad.y)
                if d <= fars[i]:
                    # a part on the pad's own side first: two surface parts stacked on the two faces read as
                    # through-hole where no drill file says otherwise
                    key = (d, p.side != pad.side, math.hypot(pad.x - p.x_mm, pad.y - p.y_mm))
                    if best is None or key < best[0]:
                        best = (key, p.ref)
            if best is None:
                rest.append(pad)
            else:
                mine.setdefault(best[1], []).append(pad)
        left = rest
    return mine


def _named_shift(parts: list[PlacedPart], pads: list[GerberPad]) -> tuple[tuple[float, float], int, int]:
    """(the offset from the Gerbers' frame to the placement file's, the parts agreeing on it, the parts asked).

    A part's placement point lies among its own pads whatever its footprint's origin (its centre, or pin 1 of a
    header or a DIP), so the offset is the one that puts the most placement points inside their pads' box; it is
    then read precisely off the parts whose pads centre on their point (most SMD parts)."""
    groups: dict[str, list[GerberPad]] = {}
    for pad in pads:
        if pad.ref is not None:
            groups.setdefault(pad.ref, []).append(pad)
    boxes = []
    for p in parts:
        g = [q for q in groups.get(p.ref, ()) if q.side == p.side]
        if g:
            boxes.append((p, _pads_box(g)))
    if not boxes:
        return (0.0, 0.0), 0, 0

    def inside(offset: tuple[float, float]) -> list[tuple[float, float]]:
        """The centring offsets of the parts whose point, moved by `offset`, lies inside their pads' box."""
        out = []
        for p, (x0, y0, x1, y1) in boxes:
            x, y = p.x_mm - offset[0], p.y_mm - offset[1]
            if x0 - AGREE_MM <= x <= x1 + AGREE_MM and y0 - AGREE_MM <= y <= y1 + AGREE_MM:
                out.append((p.x_mm - (x0 + x1) / 2, p.y_mm - (y0 + y1) / 2))
        return out

    candidates = [(0.0, 0.0)] + [(p.x_mm - (b[0] + b[2]) / 2, p.y_mm - (b[1] + b[3]) / 2) for p, b in boxes]
    best = max(candidates, key=lambda o: len(inside(o)))  # the first of the best: no offset where none is needed
    agree = inside(best)
    if best != (0.0, 0.0):  # read precisely off the parts centred on their point
        near = [o for o in agree if math.hypot(o[0] - best[0], o[1] - best[1]) <= AGREE_MM] or [best]
        best = (statistics.median(o[0] for o in near), statistics.median(o[1] for o in near))
    return best, len(agree), len(boxes)


def _frame(part: PlacedPart, pads: list[GerberPad], library: Library) -> PlacedPart:
    """`part` wearing `pads` (board frame) in its footprint frame, with the library's body: about the placement point,
    or, where the point is one of its pads (a header, a DIP placed by pin 1), about its pads; a two-terminal part's
    laid along its terminals where the placement file's zero turns them across the library's."""
    quarter = round(part.rotation / 90) % 2 == 1
    own = []
    for q in pads:
        x, y = in_frame(part, (q.x, q.y))
        w, h = (q.h, q.w) if quarter else (q.w, q.h)
        own.append(Pad(x, y, w, h, smd=not q.through_hole, mask_margin=q.mask_margin))
    body = library.part_body(part)
    box = None
    if body is not None:
        bw, bh = body
        if len(own) == 2 and (bw - bh) * (abs(own[0].x - own[1].x) - abs(own[0].y - own[1].y)) < 0:
            bw, bh = bh, bw  # a chip's body lies along its two terminals: the file's zero is a quarter off
        cx = cy = 0.0
        if len(own) >= 3 and any(math.hypot(q.x, q.y) <= PIN_ONE_MM for q in own):
            x0, y0, x1, y1 = _pads_box(own)
            cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        box = (cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2)
    through_hole, in_paste = by_pads(own)  # its pads say it, whatever the placement's mount column said
    return replace(part, pads=tuple(own), body=box, mount=mounted(through_hole, part.pin_in_paste or in_paste))


def _named(design: BoardDesign, placed: list[PlacedPart], owners: list[PlacedPart], board: GerberBoard,
           library: Library) -> tuple[tuple[float, float], dict[str, list[GerberPad]]]:
    """(the Gerbers' offset onto the placement, each part's pads) where the Gerbers name their parts; `owners`:
    the parts whose lands are on the board (`placed` and those left off), among which loose pads go by place."""
    shift, agree, asked = _named_shift(placed, board.pads)
    if asked and agree < ENOUGH * asked:
        raise CadError(f"{board.source}: the parts' pads named in the Gerbers lie at no one offset from where "
                       f"{design.source} places them ({agree} of {asked} agree within {AGREE_MM} mm): check that "
                       "both files are of the same board and revision")
    mine: dict[str, list[GerberPad]] = {}
    for pad in board.pads:
        if pad.ref is not None:
            mine.setdefault(pad.ref, []).append(replace(pad, x=pad.x + shift[0], y=pad.y + shift[1]))
    # pads the file names no part for (a custom pad's region, which gerbonara keeps without its attributes) go
    # by place, to a part by its named pads' box where it has some
    loose = [q for q in board.pads if q.ref is None]
    moved = [replace(q, x=q.x + shift[0], y=q.y + shift[1]) for q in loose]
    for ref, got in _by_place(owners, moved, _seeds(owners, library, mine, moved)).items():
        mine.setdefault(ref, []).extend(got)
    return shift, mine


def _placed(design: BoardDesign, placed: list[PlacedPart], owners: list[PlacedPart], board: GerberBoard,
            library: Library) -> tuple[tuple[float, float], dict[str, list[GerberPad]]]:
    """(the Gerbers' offset onto the placement, each part's pads) where the Gerbers name no part: by place among
    `owners` (the parts whose lands are on the board), from the shared origin or the board's lower-left corner,
    whichever gives more of the `placed` parts pads."""
    tried = []
    corners = [(0.0, 0.0)] + ([(board.outline[0], board.outline[1])] if board.outline is not None else [])
    for corner in corners:
        # the placement file relative to the board's lower-left corner: the Gerbers moved by minus that corner
        s = (-corner[0], -corner[1]) if corner != (0.0, 0.0) else corner
        moved = [replace(q, x=q.x + s[0], y=q.y + s[1]) for q in board.pads]
        got = _by_place(owners, moved, _seeds(owners, library, {}, moved))
        tried.append((sum(p.ref in got for p in placed), s, got))
    found, shift, mine = max(tried, key=lambda t: t[0])
    if placed and found < ENOUGH * len(placed):
        raise CadError(f"{board.source}: only {found} of {len(placed)} parts of {design.source} have a pad of the "
                       f"Gerbers within {REACH_MM} mm of their body: the two files do not share an origin (a "
                       "placement file relative to the drill origin beside absolute Gerbers, say) or are not of "
                       "one board; export both from the same origin")
    return shift, mine


def with_gerbers(design: BoardDesign, board: GerberBoard, library: Library) -> BoardDesign:
    """`design` (a placement file's) with every part's pads from `board` and the board's edge, noted. A part left
    off the assembly (DNP, not on the BOM) wears none, but its lands are on the board still and are its own: they
    go to it, not to a neighbour."""
    placed = [p for p in design.parts if p.excluded is None]
    owners = [p for p in design.parts if p.excluded is None or p.not_placed()]
    if board.attributed:
        shift, mine = _named(design, placed, owners, board, library)
        how = "by the parts the Gerbers name (X2 component attributes)"
    else:
        shift, mine = _placed(design, placed, owners, board, library)
        how = "by place (the Gerbers do not name their parts)"
    notes = []
    if math.hypot(*shift) > 1e-6:
        notes.append(f"the Gerbers' origin is {-shift[0]:.3f}, {-shift[1]:.3f} mm from the placement file's: moved "
                     "onto it")
    parts, bare = [], []
    for p in design.parts:
        got = mine.get(p.ref) if p.excluded is None else None
        if got:
            parts.append(_frame(p, [q for q in got if q.side == p.side] or got, library))
        else:
            parts.append(p)
            if p.excluded is None:
                bare.append(p.ref)
    notes.append(f"pads from the Gerbers {how}: {len(placed) - len(bare)} of {len(placed)} parts")
    unsized = [p.ref for p in parts if p.pads and p.body is None and p.excluded is None]
    if unsized:
        notes.append(f"{len(unsized)} part(s) whose windows are their pads alone (the library sizes no body for "
                     f"their packages; a body reaching past its pads, an electrolytic's can, is cut: give it in the "
                     f"plant library, `packages: NAME: {{class: ..., body: [w, h]}}`): {named_refs(unsized)}")
    if bare:
        notes.append(f"{len(bare)} part(s) with no pad in the Gerbers: their windows are the library's bodies: "
                     f"{named_refs(bare)}")
    outline = board.outline
    if outline is not None:
        outline = (outline[0] + shift[0], outline[1] + shift[1], outline[2] + shift[0], outline[3] + shift[1])
    return replace(design, parts=parts, outline=outline, format=f"{design.format} with Gerbers",
                   notes=design.notes + board.notes + notes)
