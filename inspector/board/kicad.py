"""KiCad boards (`.kicad_pcb`): KiCad 5's `module` to KiCad 9's `footprint`, read with sexpdata.

KiCad's frame: millimetres, y down (the screen's), a footprint's `(at x y angle)` its origin and its rotation in
degrees counter-clockwise as seen from the top. Pads and drawings sit in the footprint's own frame, unrotated; a
pad's own angle in the file includes the footprint's, so its turn relative to the footprint is the difference. The
body is the footprint's fabrication drawing (F.Fab / B.Fab), else its courtyard (a drawing that is a lone line is
no body; an arc is measured along it). Fiducials are footprints of the `Fiducial` libraries (or references FID*);
parts the file keeps out of assembly (`dnp`, `board_only`, `virtual`, `exclude_from_pos_files` without pads to
solder) are marked with the reason. A pad's solder-mask margin (a fiducial's bare ring) is its own
`solder_mask_margin`, else its footprint's, else the board's
`(setup (pad_to_mask_clearance ...))` where that is above 0 (KiCad 5 boards often set one for every pad).
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import sexpdata

from .design import BoardDesign, CadError, Pad, PlacedPart, arc_points, bounding, is_body, mounted
from .mounting import by_pads

EDGE = "Edge.Cuts"


def _sym(x: Any) -> str:  # noqa: ANN401
    return x.value() if isinstance(x, sexpdata.Symbol) else str(x)


def _head(node: Any) -> str | None:  # noqa: ANN401
    return _sym(node[0]) if isinstance(node, list) and node else None


def _child(node: list, name: str) -> list | None:
    return next((c for c in node[1:] if _head(c) == name), None)


def _children(node: list, name: str) -> list[list]:
    return [c for c in node[1:] if _head(c) == name]


def _floats(node: list | None, n: int) -> list[float]:
    if node is None:
        return []
    return [float(v) for v in node[1:1 + n] if isinstance(v, (int, float))]


def _line_of(text: str, message: str) -> int | None:
    m = re.search(r"(?:position|at|pos)\D*(\d+)", message)
    return text.count("\n", 0, int(m.group(1))) + 1 if m and int(m.group(1)) <= len(text) else None


_UNOPENED_FILTER = re.compile(r"\)(\s*)filter_ratio(\s+[-+0-9.eE]+)\)")


def repaired(text: str) -> tuple[str, int]:
    """The text with the one glitch a KiCad release is known to write mended, and how many times: a teardrop's
    `(curved_edges no)filter_ratio 0.9)`, its `filter_ratio` without the opening bracket (in the RoyalBlue54L
    demo that KiCad 9.0.8 ships), which KiCad itself reads as `(filter_ratio 0.9)`. Nothing else is touched: a file
    otherwise malformed is still refused by its line."""
    return _UNOPENED_FILTER.subn(r")\1(filter_ratio\2)", text)


def parse(text: str, source: str) -> list:
    try:
        tree = sexpdata.loads(text, nil=None, true=None, false=None)
    except Exception as exc:  # sexpdata raises its own and assorted builtins on malformed input
        line = _line_of(text, str(exc))
        where = f"{source}:{line}" if line else source
        raise CadError(f"{where}: not a well-formed KiCad s-expression ({type(exc).__name__}: {exc}); export the "
                       "board again from KiCad or check the file was not cut short") from None
    if _head(tree) != "kicad_pcb":
        raise CadError(f"{source}: a KiCad board starts with (kicad_pcb ...), this starts with "
                       f"({_head(tree) or '?'} ...); a schematic or footprint file is not a board")
    return tree


def _text(fp: list, kind: str) -> str:
    """A footprint's reference or value: KiCad 6+'s (property "Reference" ...), KiCad 5's (fp_text reference ...)."""
    want = {"reference": "Reference", "value": "Value"}[kind]
    for p in _children(fp, "property"):
        if len(p) > 2 and _sym(p[1]) == want:
            return _sym(p[2])
    for t in _children(fp, "fp_text"):
        if len(t) > 2 and _sym(t[1]) == kind:
            return _sym(t[2])
    return ""


def _arc(node: list) -> list[tuple[float, float]]:
    """Points along an arc, so its box is the arc's and not its three named points': KiCad 6+ names (start, mid,
    end); KiCad 5 names its centre `start`, its first point `end` and its sweep `angle` (degrees, clockwise on the
    screen, which in the file's y-down frame turns x towards y)."""
    start, mid, end, angle = (_floats(_child(node, k), 2 if k != "angle" else 1) if _child(node, k) is not None else []
                              for k in ("start", "mid", "end", "angle"))
    if len(start) == 2 and len(mid) == 2 and len(end) == 2:
        (ax, ay), (bx, by), (cx, cy) = start, mid, end
        d = 2 * (ax * (by - cy) + bx * (cy - ay) + cx * (ay - by))
        if abs(d) < 1e-12:  # three points in a line: no arc
            return []
        ux = ((ax * ax + ay * ay) * (by - cy) + (bx * bx + by * by) * (cy - ay) + (cx * cx + cy * cy) * (ay - by)) / d
        uy = ((ax * ax + ay * ay) * (cx - bx) + (bx * bx + by * by) * (ax - cx) + (cx * cx + cy * cy) * (bx - ax)) / d
        turning = (bx - ax) * (cy - ay) - (by - ay) * (cx - ax)
        return arc_points((ax, ay), (cx, cy), (ux, uy), clockwise=turning < 0)
    if len(start) == 2 and len(end) == 2 and angle:
        a = math.radians(angle[0])
        dx, dy = end[0] - start[0], end[1] - start[1]
        last = (start[0] + dx * math.cos(a) - dy * math.sin(a), start[1] + dx * math.sin(a) + dy * math.cos(a))
        return arc_points((end[0], end[1]), last, (start[0], start[1]), clockwise=angle[0] < 0)
    return []


def _points(node: list) -> list[tuple[float, float]]:
    """Every coordinate pair a drawing names (start, end, mid, center, pts/xy); an arc's points along it."""
    if _head(node) in ("gr_arc", "fp_arc") and (along := _arc(node)):
        return along
    out = []
    for key in ("start", "end", "mid", "center"):
        c = _child(node, key)
        if c is not None and len(_floats(c, 2)) == 2:
            out.append(tuple(_floats(c, 2)))
    pts = _child(node, "pts")
    for xy in _children(pts, "xy") if pts is not None else ():
        out.append(tuple(_floats(xy, 2)))
    if _head(node) in ("gr_circle", "fp_circle"):
        centre, end = _child(node, "center"), _child(node, "end")
        if centre is not None and end is not None:
            (cx, cy), (ex, ey) = _floats(centre, 2), _floats(end, 2)
            r = ((ex - cx) ** 2 + (ey - cy) ** 2) ** 0.5
            out += [(cx - r, cy - r), (cx + r, cy + r)]
    return out  # type: ignore[return-value]


def _layer(node: list) -> str:
    c = _child(node, "layer")
    return _sym(c[1]) if c is not None and len(c) > 1 else ""


def _pad(node: list, fp_angle: float, fp_margin: float | None = None) -> Pad | None:
    if len(node) < 3:
        return None
    kind = _sym(node[2])
    if kind == "np_thru_hole":  # a hole, nothing soldered
        return None
    at, size = _floats(_child(node, "at"), 3), _floats(_child(node, "size"), 2)
    if len(at) < 2 or len(size) < 2:
        return None
    own = (at[2] if len(at) > 2 else 0.0) - fp_angle  # the pad's turn in its footprint
    turn = own % 180
    w, h = size if min(turn, 180 - turn) < 45 else size[::-1]
    margin = _floats(_child(node, "solder_mask_margin"), 1)  # the pad's own, else its footprint's
    x, y = _shape_at(node, at[0], at[1], own)
    return Pad(x, y, w, h, smd=kind in ("smd", "connect"), mask_margin=margin[0] if margin else fp_margin,
               hole=_drill(node) if kind == "thru_hole" else None)


def _shape_at(pad: list, x: float, y: float, own: float) -> tuple[float, float]:
    """Where the pad's copper is: its position, or, for a shape offset from its hole (`(drill 0.75 (offset 0 0.4))`,
    KiCad's TO-92 hand-solder pads), the position moved by the offset turned with the pad (y down, as the file)."""
    drill = _child(pad, "drill")
    offset = _floats(_child(drill, "offset"), 2) if drill is not None else []
    if len(offset) < 2 or offset == [0.0, 0.0]:
        return x, y
    t = math.radians(own)
    dx, dy = offset
    return x + dx * math.cos(t) + dy * math.sin(t), y - dx * math.sin(t) + dy * math.cos(t)


def _drill(pad: list) -> float | None:
    """A plated pad's drill, mm: `(drill 0.8)`, or an oval's narrower side `(drill oval 0.6 1.2)`."""
    node = _child(pad, "drill")
    widths = [float(v) for v in (node or [])[1:] if isinstance(v, (int, float))][:2]
    return min(widths) if widths else None


def _part(fp: list, board_margin: float | None = None) -> PlacedPart:
    name = _sym(fp[1]) if len(fp) > 1 and not isinstance(fp[1], list) else ""
    package = name.split(":", 1)[-1]
    at = _floats(_child(fp, "at"), 3)
    angle = at[2] if len(at) > 2 else 0.0
    side = "bottom" if _layer(fp).startswith("B.") else "top"
    flags = _flags(fp)
    margin = _floats(_child(fp, "solder_mask_margin"), 1)  # the footprint's own, else the board's
    pads = tuple(p for p in (_pad(n, angle, margin[0] if margin else board_margin) for n in _children(fp, "pad"))
                 if p is not None)
    drawn = [n for n in fp[1:] if _head(n) in ("fp_line", "fp_rect", "fp_poly", "fp_circle", "fp_arc")]
    body = None
    for layer in ("Fab", "CrtYd"):
        body = bounding([pt for n in drawn if _layer(n).endswith(layer) for pt in _points(n)])
        if is_body(body):
            break
        body = None
    ref = _text(fp, "reference")
    excluded = None
    if "dnp" in flags:
        excluded = "not placed (dnp)"
    elif "board_only" in flags or "virtual" in flags:
        excluded = "board only (not a placed part)"
    elif "exclude_from_pos_files" in flags and not any(p.smd for p in pads) and "through_hole" not in flags:
        excluded = "kept out of the placement files and nothing to solder"
    fiducial = "fiducial" in name.lower() or ref.upper().startswith("FID")
    through_hole, in_paste = by_pads(pads) if pads else ("through_hole" in flags, False)
    return PlacedPart(ref, _text(fp, "value"), package, at[0] if at else 0.0, at[1] if len(at) > 1 else 0.0, angle,
                      side, pads, body, mount=mounted(through_hole, in_paste), fiducial=fiducial,
                      excluded=excluded)


def _flags(fp: list) -> set[str]:
    """A footprint's `attr` flags (`smd`, `through_hole`, `dnp`, `board_only`, `exclude_from_pos_files`, ...)."""
    attr = _child(fp, "attr")
    return {_sym(a) for a in attr[1:]} if attr is not None else set()


def _said_otherwise(fp: list, part: PlacedPart) -> str | None:
    """Where the footprint's fabrication attribute (`smd`, `through_hole`) says other than its pads, what the pads
    say (they are what the board is made with: a USB-C socket's legs beside its pins, a pad drawn smd in a
    footprint left `through_hole`)."""
    flags = _flags(fp)
    said = "through_hole" if "through_hole" in flags else "smd" if "smd" in flags else None
    if said is None or not part.pads or part.excluded or said == ("through_hole" if part.through_hole else "smd"):
        return None
    return f"{part.ref} ({'through-hole pads beside surface pins' if part.through_hole else 'no plated hole'})"


def read_kicad(path: Path) -> BoardDesign:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CadError(f"{path}: cannot be read as a KiCad board ({exc})") from None
    text, mended = repaired(text)
    tree = parse(text, str(path))
    version = _floats(_child(tree, "version"), 1)
    setup = _child(tree, "setup")
    clearance = _floats(_child(setup, "pad_to_mask_clearance"), 1) if setup is not None else []
    board_margin = clearance[0] if clearance and clearance[0] > 0 else None  # the board's mask margin for every pad
    footprints = [n for n in tree[1:] if _head(n) in ("footprint", "module")]
    parts = [_part(n, board_margin) for n in footprints]
    otherwise = [w for w in (_said_otherwise(n, p) for n, p in zip(footprints, parts)) if w]
    edges = [pt for n in tree[1:] if _head(n) in ("gr_line", "gr_rect", "gr_arc", "gr_circle", "gr_poly")
             and _layer(n) == EDGE for pt in _points(n)]
    design = BoardDesign(str(path), f"KiCad board (file version {int(version[0]) if version else '?'})", parts,
                         y_up=False, outline=bounding(edges))
    if mended:
        design.notes.append(f"{mended} teardrop setting(s) written `(curved_edges no)filter_ratio 0.9)`, without the "
                            "opening bracket, as a KiCad 9 release wrote them: read as KiCad reads them")
    if design.outline is None:
        design.notes.append("no Edge.Cuts outline: the board's extent is taken from its parts")
    if otherwise:
        design.notes.append(f"{len(otherwise)} footprints' attribute (smd / through_hole) says other than their pads, "
                            f"taken as their pads say: {', '.join(otherwise)}")
    return design
