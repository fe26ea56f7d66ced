"""A board design, the package library and the camera's scale -> a rule set the line runs, and every part's fate.

The image frame is the board's outline seen from the top, x right and y down, at `px_per_mm`, grown to take in
any inspected part hanging over the edge (a connector): a file whose y points up (Eagle, centroid files) is
flipped, its footprints with it. A rule set for the bottom side sees the board from below, turned over about its
vertical axis (flip.py). A part's window is its body and every pad
(design.PlacedPart.extent), centred where that box lies, not at the footprint's origin (a connector's origin is
often pin 1). Rotations are the file's, counter-clockwise seen from the top; the rule set turns crops by quarter
turns, so a part at another angle is listed, not inspected. Component types are the packages (a part's value
does not change how its body looks to the camera; a plant that wants it split names the package apart), split by
class where one package name holds two (Eagle's bare `0402` for resistors and capacitors).

The rule set written is validated by the line's own validator before it is kept: a part the validator refuses
(two windows on one spot, a body off the board) is left out with the validator's words, and the rest written
again, so what comes out always loads.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, replace

from ..routing.fiducials import MIN_RING_MARGIN_PX
from ..routing.rules import parse_rules
from ..routing.shapes import SHAPES
from ..yamlio import ConfigError
from .design import BoardDesign, PlacedPart, named_refs
from .flip import seen_from_below
from .geometry import BoardGeometry, PxRect
from .library import Library, PackageClass
from .mask_openings import dot

MIN_SIDE_PX = 4  # the validator's least body side
CROP_MARGIN_PX = 4
INPUT_PX = 32  # the starter classifiers' input, px a side: a chip's window at camera resolution is about this big
# a window more than this many inputs long (a QFP, a TO-263, a header) loses its leads' pitch at that input: its type
# gets a larger one of its own (`input_size:`), at the price of four times the pixels for its few parts
COARSE_BEYOND = 4
LARGE_INPUT_PX = 64
ANGLE_TOLERANCE = 0.5  # degrees from a quarter turn still taken as that quarter turn
MAX_PASSES = 400


class UnknownPackages(ValueError):
    """Packages the library does not know: `unknown` maps each to the references that use it."""

    def __init__(self, unknown: dict[str, list[str]]) -> None:
        self.unknown = unknown
        listed = "; ".join(f"{p} ({', '.join(r[:4])}{' ...' if len(r) > 4 else ''})"
                           for p, r in sorted(unknown.items()))
        super().__init__(f"{len(unknown)} packages the library cannot lay out (it does not know them, or, for a "
                         f"file without footprints, their body size): {listed}")


@dataclass
class PartFate:
    ref: str
    package: str
    value: str
    type: str | None
    x_mm: float
    y_mm: float
    rotation: float
    side: str
    inspected: bool
    reason: str = ""
    manufacturer: str = ""  # what was bought for the place, where a BOM came with the design (design.Bought)
    part_number: str = ""
    mount: str | None = None  # smd, through-hole or pin-in-paste (mounting.py); None where no file says

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Imported:
    rules_text: str  # empty when no part is inspected
    fates: list[PartFate]
    types: dict[str, int]  # component type -> parts
    fiducials: list[str]
    board_px: tuple[int, int]
    notes: list[str]
    # the image's top-left corner in the file's mm (y flipped where the file's y points up: -y; x flipped, -x, for
    # the bottom side, seen from below), and its scale
    origin_mm: tuple[float, float] = (0.0, 0.0)
    px_per_mm: float = 1.0
    geometry: BoardGeometry | None = None  # the outline and every inspected part's pads, image px (teaching)

    def left_out(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.fates:
            if not f.inspected:
                key = re.sub(r" \(.*", "", f.reason)
                out[key] = out.get(key, 0) + 1
        return out


def type_name(package: str) -> str:
    """A component type's name from its package: letters, digits and - _ . only."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", package).strip("_") or "package"


def _quarter(rotation: float) -> int | None:
    r = rotation % 360.0
    q = round(r / 90.0) * 90 % 360
    return q if min(abs(r - q), 360 - abs(r - q)) <= ANGLE_TOLERANCE else None


def _frame(design: BoardDesign) -> tuple[float, float, float, float]:
    """The outline's box in the image frame (y down), mm."""
    x0, y0, x1, y1 = design.bounds()
    return (x0, -y1, x1, -y0) if design.y_up else (x0, y0, x1, y1)


def _with_body(part: PlacedPart, library: Library) -> PlacedPart:
    """A part of a file without footprints (a centroid file) given the library's body, centred on it."""
    if part.extent() is not None:  # a board file's footprint: its own pads and body
        return part
    body = library.part_body(part)
    if body is None:
        return part
    return replace(part, body=(-body[0] / 2, -body[1] / 2, body[0] / 2, body[1] / 2))


def _window(part: PlacedPart, y_up: bool) -> tuple[float, float, float, float] | None:
    """(centre x, centre y in the image frame, width, height at rotation 0), mm."""
    ext = part.extent()
    if ext is None:
        return None
    x0, y0, x1, y1 = ext
    if y_up:
        y0, y1 = -y1, -y0
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    t = math.radians(part.rotation)
    # counter-clockwise seen from the top, in a y-down frame
    dx, dy = cx * math.cos(t) + cy * math.sin(t), -cx * math.sin(t) + cy * math.cos(t)
    px, py = part.x_mm, (-part.y_mm if y_up else part.y_mm)
    return px + dx, py + dy, x1 - x0, y1 - y0


def _pads_px(part: PlacedPart, y_up: bool, origin: tuple[float, float], scale: float) -> list[PxRect]:
    """The part's pads in the image frame: each pad's centre turned with the part, its sides swapped on a quarter
    turn (parts off a quarter turn are not inspected, so their pads are never asked for)."""
    t = math.radians(part.rotation)
    px, py = part.x_mm, (-part.y_mm if y_up else part.y_mm)
    quarter = round(part.rotation / 90.0) % 2 == 1
    out = []
    for pad in part.pads:
        cx, cy = pad.x, (-pad.y if y_up else pad.y)
        dx, dy = cx * math.cos(t) + cy * math.sin(t), -cx * math.sin(t) + cy * math.cos(t)
        w, h = (pad.h, pad.w) if quarter else (pad.w, pad.h)
        x, y = (px + dx - origin[0]) * scale, (py + dy - origin[1]) * scale
        out.append((x - w * scale / 2, y - h * scale / 2, x + w * scale / 2, y + h * scale / 2))
    return out


Lands = tuple[list[tuple[int, int, int, int]], tuple[int, int, int, int] | None]


def _lands(part: PlacedPart, y_up: bool, scale: float, size: tuple[int, int]) -> Lands:
    """The part's pads and body as the rule set's `pads:` and `body:`: px boxes about its window's centre at
    rotation 0 (the crop's frame), inside the `size` window. The body only where it is a body: a box that covers
    every land of a part soldered on top (a courtyard or an old footprint's outline) would hide its joints; a
    through-hole part's housing does cover its pins, which the renderer draws over it."""
    ext = part.extent()
    if ext is None or not part.pads:
        return [], None
    x0, y0, x1, y1 = ext
    if y_up:
        y0, y1 = -y1, -y0
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    w, h = size
    lo_x, lo_y, hi_x, hi_y = -(w // 2), -(h // 2), (w + 1) // 2, (h + 1) // 2

    def px(a: float, b: float, c: float, d: float) -> tuple[int, int, int, int]:
        if y_up:
            b, d = -d, -b
        bx0, by0 = max(lo_x, round((a - cx) * scale)), max(lo_y, round((b - cy) * scale))
        bx1, by1 = min(hi_x, round((c - cx) * scale)), min(hi_y, round((d - cy) * scale))
        return bx0, by0, max(bx1, bx0 + 1), max(by1, by0 + 1)

    pads = [px(q.x - q.w / 2, q.y - q.h / 2, q.x + q.w / 2, q.y + q.h / 2) for q in part.pads]
    body = part.body
    if body is not None and not part.through_hole and all(
            body[0] <= q.x - q.w / 2 and body[2] >= q.x + q.w / 2 and body[1] <= q.y - q.h / 2
            and body[3] >= q.y + q.h / 2 for q in part.pads):
        body = None
    return pads, None if body is None else px(*body)


def import_design(design: BoardDesign, library: Library, px_per_mm: float, side: str = "top",
                  recipe: str | None = None) -> Imported:
    if px_per_mm <= 0:
        raise ValueError(f"px per mm must be positive, got {px_per_mm}")
    as_filed = design.parts  # each part's fate keeps the file's own position and rotation
    if side == "bottom":
        design = seen_from_below(design)
    unknown: dict[str, list[str]] = {}
    classes: dict[str, PackageClass | None] = {}
    for p in design.parts:
        cls = library.part_class(p)
        classes[p.ref] = cls
        needed = p.side == side and not p.fiducial and p.excluded is None
        if needed and (cls is None or (cls.inspect and p.extent() is None and library.part_body(p) is None)):
            unknown.setdefault(p.package, []).append(p.ref)  # no class, or (a centroid file) no body to window
    if unknown:
        raise UnknownPackages(unknown)
    _unique_references(as_filed, design.source, side, classes)
    # one type a package; a package two classes share (Eagle's bare `0402` for R and C) splits by class
    pairs = {(p.package, c.name) for p in design.parts if (c := classes[p.ref]) is not None}
    shared = {pkg for pkg, _ in pairs if sum(1 for q, _c in pairs if q == pkg) > 1}
    names = {(pkg, c): type_name(f"{pkg}_{c}" if pkg in shared else pkg) for pkg, c in pairs}
    parts = [_with_body(p, library) for p in design.parts]
    windows = {p.ref: _window(p, design.y_up) for p in parts}
    fx0, fy0, fx1, fy1 = _frame(design)
    # a connector often hangs over the board's edge: the image takes in every inspected window and its margin
    reach = (CROP_MARGIN_PX + 2) / px_per_mm
    for p in parts:
        cls = classes[p.ref]
        if p.side != side or p.fiducial or p.excluded is not None or cls is None or not cls.inspect:
            continue
        window, q = windows[p.ref], _quarter(p.rotation)
        if window is None or q is None:
            continue
        half_w, half_h = (window[2] / 2, window[3] / 2) if q in (0, 180) else (window[3] / 2, window[2] / 2)
        fx0, fy0 = min(fx0, window[0] - half_w - reach), min(fy0, window[1] - half_h - reach)
        fx1, fy1 = max(fx1, window[0] + half_w + reach), max(fy1, window[1] + half_h + reach)
    width, height = max(32, math.ceil((fx1 - fx0) * px_per_mm)), max(32, math.ceil((fy1 - fy0) * px_per_mm))
    fates: list[PartFate] = []
    placed: dict[str, tuple[str, int, int, int, int, int]] = {}  # ref -> (type, x, y, w, h, rotation)
    marks: dict[str, tuple[int, int, int, int | None]] = {}  # ref -> x, y, size, bare ring (px)
    for p, filed in zip(parts, as_filed):
        cls = classes[p.ref]
        fate = PartFate(p.ref, p.package, p.value, None, filed.x_mm, filed.y_mm, filed.rotation, p.side, False,
                        manufacturer=p.bought.manufacturer if p.bought else "",
                        part_number=p.bought.part_number if p.bought else "", mount=p.mount)
        fates.append(fate)
        window = windows[p.ref]
        if p.side != side:
            fate.reason = f"on the {p.side} side (this rule set inspects the {side})"
        elif p.fiducial or (cls is not None and cls.name == "fiducial"):
            fate.reason = "a fiducial: registration mark, nothing placed"
            if window is not None:  # the mark is the copper dot (its largest pad), not its mask opening
                pad = dot(p)
                across = min(pad.w, pad.h) if pad is not None else min(window[2], window[3])
                size = max(3, round(across * px_per_mm))
                # its bare ring as the footprint opens the mask, where the CAD says (registration matches the mark
                # with it: wider, the mask beyond it spoils the match)
                margin = pad.mask_margin if pad is not None else None
                ring = round((across + 2 * margin) * px_per_mm) if margin is not None and margin > 0 else None
                marks[p.ref] = (round((window[0] - fx0) * px_per_mm), round((window[1] - fy0) * px_per_mm), size,
                                ring if ring is not None and ring >= size + MIN_RING_MARGIN_PX else None)
        elif p.excluded is not None:
            fate.reason = p.excluded
        elif cls is not None and not cls.inspect:
            fate.reason = cls.reason
        elif window is None:
            fate.reason = "no pads or body in the file: its window is unknown"
        elif (q := _quarter(p.rotation)) is None:
            fate.reason = f"rotation {p.rotation:g} deg is not a quarter turn (crops are turned by quarter turns)"
        else:
            w, h = round(window[2] * px_per_mm), round(window[3] * px_per_mm)
            if min(w, h) < MIN_SIDE_PX:
                fate.reason = (f"{window[2]:.2f} x {window[3]:.2f} mm is under {MIN_SIDE_PX} px at {px_per_mm:g} "
                               "px/mm: a camera with more px per mm sees it")
            else:
                fate.type, fate.inspected = names[(p.package, cls.name if cls else "")], True
                placed[p.ref] = (fate.type, round((window[0] - fx0) * px_per_mm), round((window[1] - fy0) * px_per_mm),
                                 w, h, q)
    notes = list(design.notes)
    numbered: dict[tuple[str, str], list[str]] = {}  # (part number, class) -> its parts
    for p in design.parts:
        if (number := library.by_number(p)) is not None:
            numbered.setdefault((number, library.parts[number]), []).append(p.ref)
    if numbered:
        notes.append("parts the library knows by their part number: " + "; ".join(
            f"{number} ({cls}): {named_refs(refs, 6)}" for (number, cls), refs in sorted(numbered.items())))
    by_bom = sorted({(p.package, p.bought.package, c.name) for p in design.parts if p.bought is not None
                     and (c := classes[p.ref]) is not None and library.lookup(p.package, p.ref) is None
                     and library.by_number(p) is None})
    if by_bom:
        notes.append("packages the library knows by the BOM's name for them: "
                     + ", ".join(f"{pkg} as {bought} ({cls})" for pkg, bought, cls in by_bom))
    by_ref = {f.ref: f for f in fates}
    if not placed:  # nothing a camera above this side could inspect: no rule set, only the parts' fates
        return Imported("", fates, {}, [], (width, height), notes, (fx0, fy0), px_per_mm)
    by_part = {p.ref: p for p in parts}
    lands = {ref: _lands(by_part[ref], design.y_up, px_per_mm, (v[3], v[4])) for ref, v in placed.items()}
    bought = {p.ref: p.bought.part_number for p in parts if p.bought is not None and p.bought.part_number}
    for _ in range(MAX_PASSES):
        numbers = {ref: bought[ref] for ref in sorted(placed) if ref in bought}
        text = _text(recipe or "board", (width, height), placed, marks, classes, lands, design.panel_boards, numbers)
        try:
            parse_rules(text, "<import>")
            break
        except ConfigError as exc:
            ref = _culprit(str(exc), placed, marks)
            if ref is None:
                raise ValueError(f"the rule set written for {design.source} does not load: {exc}") from None
            if ref in marks:
                del marks[ref]
                notes.append(f"fiducial {ref} left out: {exc}")
            else:
                del placed[ref]
                by_ref[ref].inspected, by_ref[ref].type = False, None
                by_ref[ref].reason = f"refused by the rule validator ({_why(str(exc))})"
    else:
        raise ValueError(f"the rule set written for {design.source} still does not load after {MAX_PASSES} fixes")
    if len(marks) < 2:
        notes.append(f"{len(marks)} fiducial(s) usable: boards of this rule set are cut at their nominal pixels; "
                     "teach them on golden photos registered on the outline or picked points (`board teach`), "
                     "or align rendered boards on a drawn golden board (`board golden`)")
    types: dict[str, int] = {}
    for t, *_ in placed.values():
        types[t] = types.get(t, 0) + 1
    bx0, by0, bx1, by1 = _frame(design)
    outline = ((bx0 - fx0) * px_per_mm, (by0 - fy0) * px_per_mm, (bx1 - fx0) * px_per_mm, (by1 - fy0) * px_per_mm)
    geometry = BoardGeometry(outline, px_per_mm, {ref: _pads_px(by_part[ref], design.y_up, (fx0, fy0), px_per_mm)
                                                  for ref in placed}, design.source)
    return Imported(text, fates, types, sorted(marks), (width, height), notes, (fx0, fy0), px_per_mm, geometry)


def _unique_references(parts: list[PlacedPart], source: str, side: str,
                       classes: dict[str, PackageClass | None]) -> None:
    """Every part the rule set would hold (an inspected part or a fiducial on this side) has a reference of its own:
    the line keeps each part's results by it. A ValueError names the ones that do not, where they sit."""
    seen: dict[str, list[PlacedPart]] = {}
    for p in parts:
        cls = classes.get(p.ref)
        if p.side == side and p.excluded is None and (p.fiducial or (cls is not None and cls.inspect)):
            seen.setdefault(p.ref.strip(), []).append(p)
    clashes = {ref: ps for ref, ps in seen.items() if not ref or len(ps) > 1}
    if clashes:
        listed = "; ".join(f"{ref or '(no reference)'} at " + " and ".join(f"({q.x_mm:g}, {q.y_mm:g})" for q in ps[:4])
                           + (f" and {len(ps) - 4} more" if len(ps) > 4 else "") for ref, ps in sorted(clashes.items()))
        raise ValueError(f"{source}: parts without a reference of their own (mm, the file's frame): {listed}; "
                         "the line reports every part by its reference: annotate the board in the CAD tool (or the "
                         "centroid file) so each part has its own, and import again")


def _why(message: str) -> str:
    return message.split(": ", 2)[-1] if ": " in message else message


def _culprit(message: str, placed: dict, marks: dict) -> str | None:
    """The part or mark a validator message is about (the first reference it names that is still in)."""
    for ref in re.findall(r"[A-Za-z_][A-Za-z0-9_\-]*", message):
        if ref in marks and ("mark" in message or "fiducial" in message):
            return ref
    m = re.search(r"components\.[^.]+\.at\.(\S+?):", message)
    if m and m.group(1) in placed:
        return m.group(1)
    m = re.search(r"marks\.(\S+?)[.:]", message)
    if m and m.group(1) in marks:
        return m.group(1)
    for ref in placed:
        if re.search(rf"\b{re.escape(ref)}\b", message):
            return ref
    return None


def _text(recipe: str, size: tuple[int, int], placed: dict, marks: dict,
          classes: dict[str, PackageClass | None], lands: dict[str, Lands], panel_boards: int = 0,
          part_numbers: dict[str, str] | None = None) -> str:
    lines = ["# imported by `inspector board import` (inspector/board): routing_rules/README.md",
             f"recipe: {recipe}", "seed: 0", f"board: {{width: {size[0]}, height: {size[1]}}}",
             f"crop_margin: {CROP_MARGIN_PX}"]
    if panel_boards:
        lines.append(f"panel: {{boards: {panel_boards}}}  # parts k-REF are board k's: each board its own result")
    if len(marks) >= 2:
        lines += ["fiducials:", "  transform: similarity", "  marks:"]
        lines += [f"    {ref}: {{at: [{x}, {y}], shape: circle, size: {s}" + (f", ring: {r}}}" if r else "}")
                  for ref, (x, y, s, r) in sorted(marks.items())]
    polar = {t for ref, (t, *_) in placed.items() if classes[ref] is not None and classes[ref].polarized}
    lines.append(f"classifier: {{arch: resnet10, input_size: {INPUT_PX}}}")
    if polar:
        lines += ["detectors:", "  det-polarity: {arch: yolov8n.yaml, input_size: 64, threshold: 0.5}"]
    lines.append("components:")
    by_type: dict[str, list[tuple[str, tuple]]] = {}
    for ref, v in placed.items():
        by_type.setdefault(v[0], []).append((ref, v))
    for t, members in sorted(by_type.items()):
        cls = classes[members[0][0]]
        assert cls is not None and cls.shape is not None
        w, h = members[0][1][3], members[0][1][4]
        lines += [f"  {t}:", f"    shape: {cls.shape}", f"    size: [{w}, {h}]"]
        if max(w, h) + 2 * CROP_MARGIN_PX > COARSE_BEYOND * INPUT_PX:
            lines.append(f"    input_size: {LARGE_INPUT_PX}")
        if t in polar:
            lines.append("    detector: det-polarity")
        elif SHAPES[cls.shape].polarized:  # drawn like a polarised part, but its package has no polarity
            lines.append("    polarized: false")
        pads, body = lands[members[0][0]]  # one package, one footprint: its first part's lands
        if pads:
            lines.append(f"    pads: [{', '.join(f'[{a}, {b}, {c}, {d}]' for a, b, c, d in pads)}]")
        if body is not None:
            lines.append(f"    body: [{', '.join(str(v) for v in body)}]")
        at = ", ".join(f"{ref}: [{x}, {y}{'' if r == 0 else f', {r}'}]" for ref, (_t, x, y, _w, _h, r) in members)
        lines.append(f"    at: {{{at}}}")
    if part_numbers:  # JSON's quoting is YAML's: a number with a comma or a colon stays one string
        lines.append("part_numbers:  # what the BOM buys for each place: a finding's part number (results/cfx.py)")
        lines += [f"  {ref}: {json.dumps(number)}" for ref, number in part_numbers.items()]
    return "\n".join(lines) + "\n"
