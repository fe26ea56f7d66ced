"""Eagle boards (`.brd`, the XML format of Eagle 6 to 9), read with the standard library's XML parser.

Eagle's frame: millimetres, y up. An element's `rot` is `R<deg>` counter-clockwise seen from the top, `M` in front
when it is mirrored to the bottom (`MR90`), `S` when spun (text only: ignored). Each element's package lives in the
file's own libraries: its SMD pads (`smd`: centre, dx, dy, own turn), through-hole pads (`pad`: a drill and a
diameter), and its drawings; the body is the documentation layer (51 tDocu, 52 bDocu), else the silkscreen (21
tPlace, 22 bPlace). The outline is layer 20 (Dimension). Fiducials are packages or elements named FID*.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from .design import BoardDesign, CadError, Pad, PlacedPart, Rect, bounding, parse_xml

DIMENSION = "20"
BODY_LAYERS = (("51", "52"), ("21", "22"))  # documentation first, then silkscreen


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


def _drawn(parent: ET.Element, layers: tuple[str, ...]) -> list[tuple[float, float]]:
    """The corner points of the wires, rectangles and circles drawn on `layers` under `parent`."""
    pts: list[tuple[float, float]] = []
    for node in parent:
        if node.get("layer") not in layers:
            continue
        if node.tag in ("wire", "rectangle"):
            pts += [(_f(node, "x1"), _f(node, "y1")), (_f(node, "x2"), _f(node, "y2"))]
        elif node.tag == "circle":
            x, y, r = _f(node, "x"), _f(node, "y"), _f(node, "radius")
            pts += [(x - r, y - r), (x + r, y + r)]
    return pts


def _package(pkg: ET.Element) -> tuple[tuple[Pad, ...], Rect | None]:
    pads = []
    for smd in pkg.findall("smd"):
        turn, _ = _turn(smd.get("rot"))
        w, h = _f(smd, "dx"), _f(smd, "dy")
        if round(turn / 90) % 2:
            w, h = h, w
        pads.append(Pad(_f(smd, "x"), _f(smd, "y"), w, h, smd=True))
    for pad in pkg.findall("pad"):
        d = _f(pad, "diameter") or 2.0 * _f(pad, "drill")
        pads.append(Pad(_f(pad, "x"), _f(pad, "y"), d, d, smd=False))
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
        pads, body = _package(pkg) if pkg is not None else ((), None)
        fiducial = "fiducial" in package.lower() or name.upper().startswith("FID")
        parts.append(PlacedPart(name, el.get("value", ""), package, _f(el, "x"), _f(el, "y"), turn,
                                "bottom" if mirrored else "top", pads, body,
                                through_hole=any(not p.smd for p in pads), fiducial=fiducial,
                                excluded=None if pads or body else "an element without pads or drawings"))
    plain = board.find("plain")
    outline = bounding(_drawn(plain, (DIMENSION,))) if plain is not None else None
    design = BoardDesign(str(path), f"Eagle board (version {root.get('version', '?')})", parts, y_up=True,
                         outline=outline)
    if outline is None:
        design.notes.append("no Dimension (layer 20) outline: the board's extent is taken from its parts")
    return design
