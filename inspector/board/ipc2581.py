"""IPC-2581 (revisions B and C, the XML every major CAD tool exports), read with the standard library's XML parser.

What an import needs of it, and where the standard keeps it:
- units: `Ecad/CadHeader@units` (MILLIMETER, MICRON or INCH); a `DictionaryStandard@units` of its own wins there.
- the board: the step `Content/StepRef` names (else the first `Step`); its outline is `Step/Profile/Polygon`.
- parts: `Step/Component` (`refDes`, `packageRef`, `part`, `layerRef`, `mountType`), placed by `Location@x,y` and
  `Xform@rotation` (degrees counter-clockwise, the standard's direction), on the bottom when `Xform@mirror` is
  true or its layer's `side` is BOTTOM: a bottom part's package turned, then mirrored, as Valor and Cadence read
  it, unless the step's own pads (tied to their pins by `PinRef`) land where another reading puts them
  (bottom_fit.py).
- footprints: `Step/Package` (or `Ecad/CadData/Package`): each `Pin` at `Location`, its shape a
  `StandardPrimitiveRef` into `DictionaryStandard` (`RectCenter`, `RectRound`, `RectCham`, `Oval`: width and
  height; `Circle`: diameter; a custom `Contour`: its outline's box, where its copper is), turned by its own
  `Xform`; the body is the package's `Outline` polygon, else its `AssemblyDrawing`, else its `SilkScreen`, unless
  the ASSEMBLY layers draw it (ipc2581_drawings.py); a pin number the package lists once but the copper flashes
  more often gets its other pads there (ipc2581_copper.py); a MECHANICAL through pin no copper layer flashes is a
  bare hole, not a pad.
- not placed: a `Bom/BomItem/RefDes@populate="false"`.
- references: a `X_<n>` that stands for X, renamed by its exporter because another name in the file is X (a pin,
  a layer: KiCad 9), is read as X.
- a fiducial's mask opening: a `Pad` (or `Features`) flashed on a layer whose `layerFunction` is SOLDERMASK, in
  `Step/LayerFeature`: tied to the mark by its `PinRef@componentRef`, else by lying centred on it; its shape is its
  own `StandardPrimitiveRef`, else its `padstackDefRef`'s `PadstackPadDef` on that layer (mask_openings.py).
Frame: y up (like Eagle). Element names are read with or without the standard's namespace.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace
from pathlib import Path

from .bottom_fit import TURNED_THEN_MIRRORED, Point, bottom_footprints
from .design import BARE_HOLES, BoardDesign, CadError, Pad, PlacedPart, Rect, bounding, mounted, parse_xml, turned
from .drawn_bodies import by_side
from .ipc2581_copper import Flash, flashed_note, pin_pads, with_every_flash
from .ipc2581_drawings import assembly_drawings
from .ipc2581_xml import local as _local
from .ipc2581_xml import units_scale as _scale
from .ipc2581_xml import value as _f
from .mask_openings import Opening, with_openings

SIZED = ("RectCenter", "RectRound", "RectCham", "Oval")


def _polygon_points(parent: ET.Element | None, scale: float) -> list[tuple[float, float]]:
    """The vertices (and arc centres' extents) of every Polygon under `parent`, mm."""
    pts: list[tuple[float, float]] = []
    if parent is None:
        return pts
    for poly in parent.iter("Polygon"):
        for step in poly:
            if step.tag in ("PolyBegin", "PolyStepSegment", "PolyStepCurve"):
                pts.append((_f(step, "x") * scale, _f(step, "y") * scale))
    return pts


def _primitives(root: ET.Element, scale: float) -> tuple[dict[str, tuple[float, float]], dict[str, Point]]:
    """DictionaryStandard: primitive id -> (width, height), mm (a circle: its diameter both ways; a custom shape, a
    `Contour`, its outline's box), and a custom shape's id -> its box's centre about the place it is flashed at (a
    pad drawn from one end, KiCad's custom pads)."""
    sizes, centres = {}, {}
    for d in root.iter("DictionaryStandard"):
        s = _scale(d, scale, "<DictionaryStandard>")
        for entry in d.iter("EntryStandard"):
            for shape in entry:
                if shape.tag in SIZED:
                    sizes[entry.get("id", "")] = (_f(shape, "width") * s, _f(shape, "height") * s)
                elif shape.tag == "Circle":
                    sizes[entry.get("id", "")] = (_f(shape, "diameter") * s,) * 2
                elif shape.tag == "Contour" and (box := bounding(_polygon_points(shape, s))) is not None:
                    sizes[entry.get("id", "")] = (box[2] - box[0], box[3] - box[1])
                    centres[entry.get("id", "")] = ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)
    return sizes, centres


def _turn(node: ET.Element) -> tuple[float, bool]:
    xf = node.find("Xform")
    if xf is None:
        return 0.0, False
    return _f(xf, "rotation"), xf.get("mirror", "false").lower() == "true"


@dataclass(frozen=True)
class _Package:
    """What one package gives each part placed with it, read once."""

    pads: tuple[Pad, ...] = ()
    body: Rect | None = None
    places: dict[str, Point] = field(default_factory=dict)  # each pin's place by its number (for bottom_fit.py)
    numbers: tuple[str, ...] = ()  # each pad's pin number (for ipc2581_copper.py)
    holes: frozenset[str] = frozenset()  # pin numbers that are MECHANICAL through pins: bare holes, unless flashed


def _package(pkg: ET.Element, primitives: dict[str, tuple[float, float]], scale: float,
             centres: dict[str, Point]) -> _Package:
    """The package's pads and body in its own frame, its pins' places and numbers, and its possible bare holes."""
    pads, numbers, holes = [], [], set()
    places: dict[str, Point] = {}
    for pin in pkg.iter("Pin"):
        if (pin.get("electricalType", "").upper(), pin.get("type", "").upper()) == ("MECHANICAL", "THRU"):
            holes.add(pin.get("number", ""))
        loc = pin.find("Location")
        ref = pin.find("StandardPrimitiveRef")
        w, h = primitives.get(ref.get("id", "") if ref is not None else "", (0.0, 0.0))
        turn, _ = _turn(pin)
        if round(turn / 90) % 2:
            w, h = h, w
        x, y = (_f(loc, "x") * scale, _f(loc, "y") * scale) if loc is not None else (0.0, 0.0)
        if loc is not None and pin.get("number"):
            places[pin.get("number", "")] = (x, y)
        if w > 0 and h > 0:
            shifted = centres.get(ref.get("id", "") if ref is not None else "")
            if shifted is not None:  # a custom shape drawn off its anchor: the pad is where its copper is
                dx, dy = turned(shifted[0], shifted[1], turn)
                x, y = x + dx, y + dy
            pads.append(Pad(x, y, w, h, smd=pin.get("type", "SURFACE").upper() != "THRU"))
            numbers.append(pin.get("number", ""))
    body = None
    for name in ("Outline", "AssemblyDrawing", "SilkScreen"):
        body = bounding(_polygon_points(pkg.find(name), scale))
        if body is not None:
            break
    return _Package(tuple(pads), body, places, tuple(numbers), frozenset(holes))


def _without_bare_holes(pkg: _Package, ref: str, flashes: dict[tuple[str, str], list[Flash]]
                        ) -> tuple[tuple[Pad, ...], tuple[str, ...]]:
    """The part's pads and their numbers less its unplated holes: a through pin the package calls MECHANICAL that no
    copper layer flashes for the part (KiCad 9 lists a connector's locating pegs as pins NPTH0, NPTH1) is a bare
    hole, no land the camera sees, and not a reason to call the part through-hole."""
    keep = [i for i, n in enumerate(pkg.numbers) if n not in pkg.holes or (ref, n) in flashes]
    return tuple(pkg.pads[i] for i in keep), tuple(pkg.numbers[i] for i in keep)


def _mask_openings(step: ET.Element, root: ET.Element, primitives: dict[str, tuple[float, float]], scale: float
                   ) -> tuple[dict[str, list[Opening]], dict[str, float]]:
    """The flashes on the step's solder mask layers: by side, and (where a PinRef ties one to a part) by reference."""
    masks = {layer.get("name", ""): "bottom" if layer.get("side", "").upper() == "BOTTOM" else "top"
             for layer in root.iter("Layer") if layer.get("layerFunction", "").upper() == "SOLDERMASK"}
    stacks: dict[tuple[str, str], float] = {}  # (padstack, mask layer) -> the opening's smaller extent, mm
    for stack in root.iter("PadStackDef"):
        for pad_def in stack.iter("PadstackPadDef"):
            ref = pad_def.find("StandardPrimitiveRef")
            if pad_def.get("layerRef", "") in masks and ref is not None and ref.get("id", "") in primitives:
                stacks[(stack.get("name", ""), pad_def.get("layerRef", ""))] = min(primitives[ref.get("id", "")])
    by_side: dict[str, list[Opening]] = {}
    by_ref: dict[str, float] = {}
    for feature in step.iter("LayerFeature"):
        layer = feature.get("layerRef", "")
        if layer not in masks:
            continue
        for flash in (n for n in feature.iter() if n.tag in ("Pad", "Features")):
            loc, ref, pin = flash.find("Location"), flash.find("StandardPrimitiveRef"), flash.find("PinRef")
            size = (min(primitives[ref.get("id", "")]) if ref is not None and ref.get("id", "") in primitives
                    else stacks.get((flash.get("padstackDefRef", ""), layer)))
            if size is None:
                continue
            if loc is not None:
                by_side.setdefault(masks[layer], []).append(Opening(_f(loc, "x") * scale, _f(loc, "y") * scale, size))
            if pin is not None and pin.get("componentRef"):
                name = pin.get("componentRef", "")
                by_ref[name] = max(size, by_ref.get(name, 0.0))
    return by_side, by_ref


def _numbered_by_exporter(names: list[str]) -> dict[str, str]:
    """Package name -> the footprint's own name, where the exporter numbered every package (KiCad 9 writes
    `SOT-23_2`, `R_0603_1608Metric_17`: each package `_1` to `_N`, one footprint's variants several numbers), so one
    footprint stays one component type and its library name is found; {} for a file whose names are its own."""
    found = [re.fullmatch(r"(.*\S)_(\d+)", n) for n in names]
    if len(names) < 2 or None in found or sorted(int(m.group(2)) for m in found) != list(range(1, len(names) + 1)):
        return {}
    return {m.group(0): m.group(1) for m in found}


def _renamed_by_exporter(refs: list[str], root: ET.Element) -> dict[str, str]:
    """Reference as written -> the part's own, where the exporter added `_<n>` to keep it apart from another name in
    its file (KiCad 9 writes C8 as `C8_1` on a board whose BGA has a pin C8, L3 as `L3_3` beside a layer L3): a
    `X_<n>` whose X is no part's reference but a name the file gives to something else (a pin, a layer, a net),
    and the only reference standing for X. {} where none is."""
    taken = set(refs)
    others = {value for node in root.iter() if node.tag != "RefDes" for key, value in node.attrib.items()
              if key in ("name", "pin", "number", "net")} - taken
    bases: dict[str, list[str]] = {}
    for ref in refs:
        m = re.fullmatch(r"(.+)_(\d+)", ref)
        if m:
            bases.setdefault(m.group(1), []).append(ref)
    return {found[0]: base for base, found in bases.items() if len(found) == 1 and base not in taken and base in others}


def _unpopulated(root: ET.Element) -> set[str]:
    return {r.get("name", "") for r in root.iter("RefDes") if r.get("populate", "true").lower() == "false"}


def read_ipc2581(path: Path) -> BoardDesign:
    root = parse_xml(path, "IPC-2581", "export it again from the CAD tool")
    _local(root)
    if root.tag != "IPC-2581":
        raise CadError(f"{path}: an IPC-2581 file's root is <IPC-2581>; this is <{root.tag}>")
    header = root.find("Ecad/CadHeader")
    scale = _scale(header, 1.0, f"{path}: <CadHeader>") if header is not None else 1.0
    if header is None or header.get("units") is None:
        raise CadError(f"{path}: no <Ecad><CadHeader units=...>: its lengths have no unit; export it again with "
                       "the Ecad section")
    steps = list(root.iter("Step"))
    if not steps:
        raise CadError(f"{path}: no <Step>: the file holds no board (a BOM-only or stackup-only export?)")
    wanted = root.find("Content/StepRef")
    step = next((s for s in steps if wanted is not None and s.get("name") == wanted.get("name")), steps[0])
    sides = {layer.get("name", ""): layer.get("side", "").upper() for layer in root.iter("Layer")}
    primitives, centres = _primitives(root, scale)
    packages = {p.get("name", ""): p for p in root.iter("Package")}
    own_names = _numbered_by_exporter(list(packages))
    # a reference the exporter renamed is the part's own from here on: every lookup by the file's name is renamed
    renamed = _renamed_by_exporter([c.get("refDes", "") for c in step.iter("Component")], root)

    def own(ref: str) -> str:
        return renamed.get(ref, ref)

    unpopulated = {own(r) for r in _unpopulated(root)}
    first, flashed = pin_pads(root, step, scale, primitives)
    landed = {(own(r), n): at for (r, n), at in first.items()}
    flashes = {(own(r), n): f for (r, n), f in flashed.items()}
    read: dict[str, _Package] = {}  # each package read once, whatever number of parts wear it
    pins: dict[str, list[tuple[Point, Point]]] = {}
    numbers: dict[str, tuple[str, ...]] = {}
    parts = []
    for comp in step.iter("Component"):
        ref, package = own(comp.get("refDes", "")), comp.get("packageRef", "")
        loc = comp.find("Location")
        if loc is None:
            raise CadError(f"{path}: component {ref} has no <Location>")
        turn, mirrored = _turn(comp)
        side = "bottom" if mirrored or sides.get(comp.get("layerRef", ""), "") == "BOTTOM" else "top"
        if package not in read:
            found = packages.get(package)
            read[package] = _package(found, primitives, scale, centres) if found is not None else _Package()
        pkg = read[package]
        pads, numbers[ref] = _without_bare_holes(pkg, ref, flashes)
        body, listed = pkg.body, len(pkg.pads)
        pins[ref] = [(at, landed[(ref, number)]) for number, at in pkg.places.items() if (ref, number) in landed]
        fiducial = "fiducial" in package.lower() or ref.upper().startswith("FID")
        excluded = "not placed (its BOM item says populate=false)" if ref in unpopulated else None
        if excluded is None and not pads and body is None:
            excluded = "a component whose package has no pins or outline in the file"
        if excluded is None and listed and not pads:
            excluded = BARE_HOLES
        parts.append(PlacedPart(ref, comp.get("part", ""), own_names.get(package, package), _f(loc, "x") * scale,
                                _f(loc, "y") * scale, turn, side, pads, body,
                                mount=mounted(comp.get("mountType", "").upper() == "THMT" or
                                              any(not p.smd for p in pads)), fiducial=fiducial, excluded=excluded))
    parts, told = bottom_footprints(parts, pins, TURNED_THEN_MIRRORED, "as Valor and Cadence read the standard",
                                    f"step {step.get('name', '?')}")
    parts, grown = with_every_flash(parts, numbers, flashes)
    layers = {layer.get("side", "").lower(): layer.get("name", "") for layer in root.iter("Layer")
              if layer.get("layerFunction", "").upper() == "ASSEMBLY"}
    try:
        drawings = {side: [replace(d, ref=own(d.ref)) if d.ref else d for d in found]
                    for side, found in assembly_drawings(root, step, scale).items()}
        parts, drawn = by_side(parts, drawings, f"step {step.get('name', '?')}",
                               {side: f"ASSEMBLY layer {name}" for side, name in layers.items()})
    except CadError as exc:  # the assembly drawing only refines the bodies: the parts stand without it
        drawn = [f"{path}: an ASSEMBLY layer's drawing cannot be read ({exc}): the bodies are the packages' outlines"]
    told.extend(drawn)
    openings, named = _mask_openings(step, root, primitives, scale)
    parts = with_openings(parts, openings, {own(r): size for r, size in named.items()})
    outline = bounding(_polygon_points(step.find("Profile"), scale))
    revision = root.get("revision", "?")
    if grown:
        told.append(flashed_note(grown))
    if renamed:
        shown = ", ".join(f"{a} as {b}" for a, b in sorted(renamed.items())[:8])
        told.append(f"{len(renamed)} reference(s) the exporter wrote with a number added, to keep them apart from "
                    f"another name in its file (a pin's, a layer's), read as the part's own: {shown}"
                    f"{' and more' if len(renamed) > 8 else ''}")
    design = BoardDesign(str(path), f"IPC-2581 rev {revision} (step {step.get('name', '?')})", parts, y_up=True,
                         outline=outline, notes=told)
    if own_names:
        design.notes.append(f"every package's name ends in its number in the file (_1 to _{len(own_names)}, as KiCad 9 "
                            f"numbers them): read without it, {len(own_names)} packages as "
                            f"{len(set(own_names.values()))} footprints")
    if outline is None:
        design.notes.append("no <Profile> outline in the step: the board's extent is taken from its parts")
    return design
