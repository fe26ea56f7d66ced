"""An IPC-2581 file's assembly drawings: what its ASSEMBLY layers draw, each drawing tied to its part by name.

The standard gives a layer its function (`Layer@layerFunction="ASSEMBLY"`, `@side` TOP or BOTTOM), and the step's
`LayerFeature` for that layer holds `Set`s, each `Set@componentRef` the part it belongs to and
`@geometryUsage="TEXT"` where it is lettering (not a body, so passed over). A set's `Features` place a shape at
their `Location`, turned by their `Xform` where they have one: a `Line`, an `Arc` (start, end, centre,
`clockwise`), a `Polyline` or an `Outline`'s `Polygon` (`PolyBegin`, `PolyStepSegment`, `PolyStepCurve`), a
`Circle` (diameter), a box (`RectCenter`, `RectRound`, `RectCham`, `Oval`, `Ellipse`: width and height), or a
reference (`UserPrimitiveRef`, `StandardPrimitiveRef`) to such shapes in the file's dictionaries. A set without a
componentRef is given to the part it lies on (drawn_bodies.py).
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from .design import arc_points, turned
from .drawn_bodies import Drawing, Point, box_points, circle_points
from .ipc2581_xml import units_scale, value

BOXES = ("RectCenter", "RectRound", "RectCham", "Oval", "Ellipse")


def _poly(node: ET.Element, s: float) -> list[Point]:
    """A Polyline's or Polygon's points, its curved steps as arcs."""
    pts: list[Point] = []
    for step in node:
        at = (value(step, "x") * s, value(step, "y") * s)
        if step.tag == "PolyStepCurve" and pts:
            centre = (value(step, "centerX") * s, value(step, "centerY") * s)
            pts.extend(arc_points(pts[-1], at, centre, step.get("clockwise", "false").lower() == "true")[1:])
        elif step.tag in ("PolyBegin", "PolyStepSegment", "PolyStepCurve"):
            pts.append(at)
    return pts


class _Shapes:
    """The shapes a feature may draw, its dictionaries' entries resolved, each as points about its own origin."""

    def __init__(self, root: ET.Element, scale: float) -> None:
        self.scale = scale
        self.entries: dict[str, tuple[list[ET.Element], float]] = {}
        for kind, entry in (("DictionaryUser", "EntryUser"), ("DictionaryStandard", "EntryStandard")):
            for d in root.iter(kind):
                s = units_scale(d, scale, f"<{kind}>")
                for e in d.iter(entry):
                    self.entries[e.get("id", "")] = (list(e), s)

    def points(self, node: ET.Element, s: float) -> list[tuple[list[Point], bool]]:
        """(points, an open stroke) of each shape `node` draws, in its own frame."""
        tag = node.tag
        if tag == "Line":
            return [([(value(node, "startX") * s, value(node, "startY") * s),
                      (value(node, "endX") * s, value(node, "endY") * s)], True)]
        if tag == "Arc":
            return [(arc_points((value(node, "startX") * s, value(node, "startY") * s),
                                (value(node, "endX") * s, value(node, "endY") * s),
                                (value(node, "centerX") * s, value(node, "centerY") * s),
                                node.get("clockwise", "false").lower() == "true"), True)]
        if tag == "Polyline":
            return [(_poly(node, s), True)]
        if tag == "Polygon":
            return [(_poly(node, s), False)]
        if tag == "Circle":
            return [(circle_points((0.0, 0.0), value(node, "diameter") * s), False)]
        if tag in BOXES:
            return [(box_points((0.0, 0.0), value(node, "width") * s, value(node, "height") * s), False)]
        if tag in ("UserPrimitiveRef", "StandardPrimitiveRef") and node.get("id", "") in self.entries:
            shapes, own = self.entries[node.get("id", "")]
            return [found for shape in shapes for found in self.points(shape, own)]
        if tag in ("UserSpecial", "Outline", "Contour"):  # shapes gathered (a Contour's Cutouts lie inside it)
            return [found for child in node for found in self.points(child, s)]
        return []


def _placed(points: list[Point], at: Point, turn: float, mirror: bool) -> tuple[Point, ...]:
    return tuple((at[0] + x, at[1] + y) for x, y in (turned(-p[0] if mirror else p[0], p[1], turn) for p in points))


def assembly_drawings(root: ET.Element, step: ET.Element, scale: float) -> dict[str, list[Drawing]]:
    """Side (top | bottom) -> the drawings the step's ASSEMBLY layers hold for it, board frame mm."""
    sides = {layer.get("name", ""): layer.get("side", "").upper() for layer in root.iter("Layer")
             if layer.get("layerFunction", "").upper() == "ASSEMBLY"}
    shapes = _Shapes(root, scale)
    out: dict[str, list[Drawing]] = {}
    for feature in step.iter("LayerFeature"):
        side = {"TOP": "top", "BOTTOM": "bottom"}.get(sides.get(feature.get("layerRef", ""), ""))
        if side is None:
            continue
        for drawn in feature.iter("Set"):
            if drawn.get("geometryUsage", "").upper() == "TEXT":
                continue
            ref = drawn.get("componentRef") or None
            for features in drawn.iter("Features"):
                loc, xform = features.find("Location"), features.find("Xform")
                at = (value(loc, "x") * scale, value(loc, "y") * scale) if loc is not None else (0.0, 0.0)
                turn = value(xform, "rotation") if xform is not None else 0.0
                mirror = xform is not None and xform.get("mirror", "false").lower() == "true"
                for node in features:
                    for pts, stroke in shapes.points(node, scale):
                        if pts:
                            out.setdefault(side, []).append(Drawing(_placed(pts, at, turn, mirror), ref, stroke))
    return out
