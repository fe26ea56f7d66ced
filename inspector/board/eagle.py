"""Eagle boards (`.brd`, the XML format of Eagle 6 to 9), read with the standard library's XML parser.

Eagle's frame: millimetres, y up. An element's `rot` is `R<deg>` counter-clockwise seen from the top, `M` in front
when it is mirrored to the bottom (`MR90`: the package turned by 90, then mirrored about the y axis, which seen from
the top is the package mirrored and turned by -90, as the design gives it), `S` when spun (text only: ignored).
Each element's package lives in the file's own libraries: its SMD pads (`smd`: centre, dx, dy, own turn),
through-hole pads (`pad`: a drill and a diameter), and its drawings; the body is the documentation layer (51 tDocu,
52 bDocu), else the silkscreen (21 tPlace, 22 bPlace): its wires (a `curve`d one along its arc), rectangles,
circles and polygons. The outline is layer 20 (Dimension). Fiducials are packages or elements named FID*.

A pad's solder-mask opening (a fiducial's bare ring, which registration matches it with) is the union of what the
package draws on layer 29 (tStop) centred on it and, unless the pad says `stop="no"`, the stop frame the board's
design rules add to every pad: `mvStopFrame` times the pad's smaller side, held between `mlMinStopFrame` and
`mlMaxStopFrame` (Eagle's defaults: 4 mil each way).
"""
from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from .design import BoardDesign, CadError, Pad, PlacedPart, Rect, arc_points, bounding, mounted, parse_xml
from .flip import mirrored_pads, mirrored_rect
from .mounting import by_pads

DIMENSION = "20"
BODY_LAYERS = (("51", "52"), ("21", "22"))  # documentation first, then silkscreen
STOP_LAYER = "29"  # tStop, as a package draws it (an element mirrored to the bottom takes it to 30, bStop)
STOP_FRAME = {"mvStopFrame": 1.0, "mlMinStopFrame": 0.1016, "mlMaxStopFrame": 0.1016}  # Eagle's own defaults
LENGTH_UNITS = {"mil": 0.0254, "mm": 1.0, "in": 25.4, "inch": 25.4, "mic": 0.001, "um": 0.001}
CENTRED = 0.25  # of a pad's smaller side: a drawn stop shape centred within this of the pad's centre is its opening


@dataclass(frozen=True)
class StopFrame:
    """The design rules' automatic stop mask around a pad: a share of its smaller side, held between two lengths."""
    share: float = STOP_FRAME["mvStopFrame"]
    least: float = STOP_FRAME["mlMinStopFrame"]  # mm
    most: float = STOP_FRAME["mlMaxStopFrame"]  # mm

    def margin(self, w: float, h: float) -> float:
        return min(max(self.share * min(w, h), self.least), self.most)


def _f(node: ET.Element, key: str, default: float = 0.0) -> float:
    try:
        return float(node.get(key, default))
    except ValueError:
        raise CadError(f"<{node.tag}> has {key}={node.get(key)!r}, not a number") from None


def _turn(rot: str | None) -> tuple[float, bool]:
    """(degrees counter-clockwise, mirrored) from Eagle's `rot` (`R90`, `MR180`, `SR45`)."""
    m = re.fullmatch(r"(S?)(M?)(S?)R(-?\d+(?:\.\d+)?)", rot or "R0")
    if m is None:
        raise CadError(f"rot={rot!r} is not Eagle's [M]R<degrees>")
    return float(m.group(4)), bool(m.group(2))


def _curved(start: tuple[float, float], end: tuple[float, float], curve: float) -> list[tuple[float, float]]:
    """Points along a wire Eagle draws as an arc: `curve` degrees counter-clockwise from its start to its end, about
    the centre to the chord's left at half the chord over tan(curve / 2)."""
    (x1, y1), (x2, y2) = start, end
    chord = math.dist(start, end)
    if chord == 0 or abs(curve) < 1e-9:
        return [start, end]
    reach = (chord / 2) / math.tan(math.radians(curve) / 2)
    centre = ((x1 + x2) / 2 - (y2 - y1) / chord * reach, (y1 + y2) / 2 + (x2 - x1) / chord * reach)
    return arc_points(start, end, centre, clockwise=curve < 0)


def _drawn(parent: ET.Element, layers: tuple[str, ...]) -> list[tuple[float, float]]:
    """The points of the wires (along a curved one), rectangles, circles and polygons drawn on `layers` under
    `parent`."""
    pts: list[tuple[float, float]] = []
    for node in parent:
        if node.get("layer") not in layers:
            continue
        if node.tag == "wire" and node.get("curve"):
            pts += _curved((_f(node, "x1"), _f(node, "y1")), (_f(node, "x2"), _f(node, "y2")), _f(node, "curve"))
        elif node.tag in ("wire", "rectangle"):
            pts += [(_f(node, "x1"), _f(node, "y1")), (_f(node, "x2"), _f(node, "y2"))]
        elif node.tag == "polygon":
            pts += [(_f(v, "x"), _f(v, "y")) for v in node.iter("vertex")]
        elif node.tag == "circle":
            x, y, r = _f(node, "x"), _f(node, "y"), _f(node, "radius")
            pts += [(x - r, y - r), (x + r, y + r)]
    return pts


def _length(text: str, where: str) -> float:
    """Eagle's length with its unit (`4mil`, `0.1mm`, `0.004in`, `10mic`), mm."""
    m = re.fullmatch(r"\s*(-?\d+(?:\.\d*)?|-?\.\d+)\s*([a-z]*)\s*", text.lower())
    if m is None or m.group(2) not in LENGTH_UNITS:
        raise CadError(f"{where} is {text!r}; Eagle writes a length with its unit ({', '.join(LENGTH_UNITS)})")
    return float(m.group(1)) * LENGTH_UNITS[m.group(2)]


def _stop_frame(board: ET.Element) -> StopFrame:
    """The design rules' stop frame (`<designrules><param name=... value=...>`), Eagle's defaults where unsaid."""
    params = {p.get("name", ""): p.get("value", "") for p in board.findall("designrules/param")}
    try:
        share = float(params.get("mvStopFrame", STOP_FRAME["mvStopFrame"]))
    except ValueError:
        raise CadError(f"design rule mvStopFrame is {params['mvStopFrame']!r}, not a number") from None
    least, most = (_length(params[k], f"design rule {k}") if k in params else STOP_FRAME[k]
                   for k in ("mlMinStopFrame", "mlMaxStopFrame"))
    return StopFrame(share, least, max(least, most))


def _drawn_stops(pkg: ET.Element) -> list[tuple[float, float, float]]:
    """(x, y, smaller extent) of each opening the package draws on tStop: circles (a ring's outer edge), rectangles
    and polygons (their box)."""
    out = []
    for node in pkg:
        if node.get("layer") != STOP_LAYER:
            continue
        if node.tag == "circle":
            out.append((_f(node, "x"), _f(node, "y"), 2 * _f(node, "radius") + _f(node, "width")))
        elif node.tag == "rectangle":
            x0, y0, x1, y1 = (_f(node, k) for k in ("x1", "y1", "x2", "y2"))
            out.append(((x0 + x1) / 2, (y0 + y1) / 2, min(abs(x1 - x0), abs(y1 - y0))))
        elif node.tag == "polygon":
            box = bounding([(_f(v, "x"), _f(v, "y")) for v in node.findall("vertex")])
            if box is not None:
                out.append(((box[0] + box[2]) / 2, (box[1] + box[3]) / 2, min(box[2] - box[0], box[3] - box[1])))
    return out


def _mask_margin(node: ET.Element, x: float, y: float, w: float, h: float, drawn: list[tuple[float, float, float]],
                 frame: StopFrame) -> float | None:
    """How far the mask opens beyond the pad, mm: the widest of its drawn openings and its automatic stop frame."""
    side = min(w, h)
    margins = [(size - side) / 2 for cx, cy, size in drawn
               if size > side and math.hypot(cx - x, cy - y) <= CENTRED * side]
    if node.get("stop", "yes").lower() != "no":
        margins.append(frame.margin(w, h))
    return round(max(margins), 6) if margins else None


def _package(pkg: ET.Element, frame: StopFrame) -> tuple[tuple[Pad, ...], Rect | None]:
    pads = []
    drawn = _drawn_stops(pkg)
    for smd in pkg.findall("smd"):
        turn, _ = _turn(smd.get("rot"))
        w, h = _f(smd, "dx"), _f(smd, "dy")
        if round(turn / 90) % 2:
            w, h = h, w
        x, y = _f(smd, "x"), _f(smd, "y")
        pads.append(Pad(x, y, w, h, smd=True, mask_margin=_mask_margin(smd, x, y, w, h, drawn, frame)))
    for pad in pkg.findall("pad"):
        d = _f(pad, "diameter") or 2.0 * _f(pad, "drill")
        x, y = _f(pad, "x"), _f(pad, "y")
        pads.append(Pad(x, y, d, d, smd=False, mask_margin=_mask_margin(pad, x, y, d, d, drawn, frame),
                        hole=_f(pad, "drill") or None))
    body = None
    for layers in BODY_LAYERS:
        body = bounding(_drawn(pkg, layers))
        if body is not None:
            break
    return tuple(pads), body


def read_eagle(path: Path) -> BoardDesign:
    root = parse_xml(path, "Eagle", "save the board again from Eagle (a binary .brd of Eagle 5 or older must be "
                                    "opened and saved in Eagle 6+ first)")
    board = root.find("drawing/board")
    if root.tag != "eagle" or board is None:
        raise CadError(f"{path}: an Eagle board is <eagle><drawing><board>...; this is <{root.tag}> without a board "
                       "(a schematic or library file?)")
    try:
        frame = _stop_frame(board)
    except CadError as exc:
        raise CadError(f"{path}: {exc}") from None
    packages: dict[tuple[str, str], ET.Element] = {}
    for lib in board.findall("libraries/library"):
        for pkg in lib.findall("packages/package"):
            packages[(lib.get("name", ""), pkg.get("name", ""))] = pkg
    parts = []
    for el in board.findall("elements/element"):
        name, package = el.get("name", ""), el.get("package", "")
        try:
            turn, mirrored = _turn(el.get("rot"))
        except CadError as exc:
            raise CadError(f"{path}: element {name}: {exc}") from None
        pkg = packages.get((el.get("library", ""), package))
        pads, body = _package(pkg, frame) if pkg is not None else ((), None)
        if mirrored:  # on the bottom: seen from the top, the package mirrored, then turned the other way
            pads, body, turn = mirrored_pads(pads), mirrored_rect(body), -turn % 360.0
        fiducial = "fiducial" in package.lower() or name.upper().startswith("FID")
        through_hole, in_paste = by_pads(pads)
        parts.append(PlacedPart(name, el.get("value", ""), package, _f(el, "x"), _f(el, "y"), turn,
                                "bottom" if mirrored else "top", pads, body,
                                mount=mounted(through_hole, in_paste), fiducial=fiducial,
                                excluded=None if pads or body else "an element without pads or drawings"))
    plain = board.find("plain")
    outline = bounding(_drawn(plain, (DIMENSION,))) if plain is not None else None
    design = BoardDesign(str(path), f"Eagle board (version {root.get('version', '?')})", parts, y_up=True,
                         outline=outline)
    if outline is None:
        design.notes.append("no Dimension (layer 20) outline: the board's extent is taken from its parts")
    return design
