"""A design read through its bill of materials: the parts the assembly fits, and what was bought for each.

The placement a CAD tool writes (a centroid file, a board file) lists every footprint on the board, fitted or not:
a variant's do-not-place parts, test points, logos, a programming header soldered by hand. The BOM is what the
plant buys and the line fits, so a contract manufacturer reads the placement through it, as this does: a part the
BOM does not list, or lists as not fitted, is not placed (a fiducial stays a mark, and a part the design itself
leaves off stays off); a listed part gets what it is from its line (`design.Bought`: manufacturer, part number,
description, the BOM's package name, by which the library knows a package it does not know by the footprint's
name: library.part_class) and, where the placement has none, its value, package and mounting (the BOM's
`Mounting Type`; where the design's pads say otherwise, they are taken and the difference noted). Designators the
BOM lists and the design does not place are noted (fitted by hand or after the line, or the BOM is of another
revision): the line cannot inspect what it has no place for; so are resistors, capacitors and inductors whose
values the two files state as different quantities (values.py: a file out of date, what a BOM-to-CAD check finds).
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from .bom import Bom, BomLine
from .design import BoardDesign, Bought, PlacedPart, board_ref, first_of, named_refs
from .library import CHIP_SIZE, Library
from .mounting import PIN_IN_PASTE, SMD
from .values import kind_of, quantity

NOT_ON_BOM = "not placed (not on the BOM)"


def with_bom(design: BoardDesign, bom: Bom, library: Library) -> BoardDesign:
    """`design` with each part as its BOM line says (above); notes name what the BOM changed and what it lists
    that the design lacks."""
    by_ref = bom.by_ref()
    lines = {ref.upper(): line for ref, line in by_ref.items()}
    listed: set[str] = set()
    unlisted: list[str] = []
    left: list[str] = []
    kept_off: list[str] = []
    zeros: dict[str, str] = {}
    differ: list[str] = []
    mounts: list[str] = []
    parts: list[PlacedPart] = []
    for p in design.parts:
        ref = board_ref(p.ref, design.panel_boards).upper()
        line = lines.get(ref)
        if line is None:
            if p.excluded is None and not library.is_mark(p):
                unlisted.append(p.ref)
                p = replace(p, excluded=NOT_ON_BOM)
            parts.append(p)
            continue
        listed.add(ref)
        if _values_differ(p, line):
            differ.append(f"{p.ref} ({p.value} in the placement, {line.value!r} on the BOM)")
        bought_package = _package(line.package, zeros)
        package = p.package or bought_package
        excluded = p.excluded
        if excluded is None and line.left_off is not None:
            excluded = line.left_off
            left.append(p.ref)
        elif p.not_placed() and line.left_off is None:
            kept_off.append(p.ref)
        p = _mounted(p, line, mounts)
        parts.append(replace(p, value=p.value or line.value, package=package, excluded=excluded,
                             bought=Bought(line.value, line.manufacturer, line.part_number, line.description,
                                           bought_package)))
    notes = [*design.notes, *bom.notes]
    name = Path(bom.source).name
    if unlisted:
        notes.append(f"{len(unlisted)} parts are not on the BOM ({name}) and are taken as not placed: "
                     f"{named_refs(unlisted)}")
    if left:
        notes.append(f"{len(left)} parts the BOM lists as not fitted are not placed: {named_refs(left)}")
    if kept_off:
        notes.append(f"{len(kept_off)} parts the BOM fits are left off as the design says (a variant the BOM does "
                     f"not share?): {named_refs(kept_off)}")
    absent = [r for r, line in by_ref.items() if r.upper() not in listed and line.left_off is None]
    if absent:
        notes.append(f"{len(absent)} fitted BOM designators have no place in the design, so the line cannot inspect "
                     f"them (fitted by hand or after the line, or the BOM is another revision's): {named_refs(absent)}")
    if differ:
        notes.append(f"{len(differ)} parts' values differ between the placement and the BOM (the BOM's is what is "
                     f"bought and fitted: check which file is out of date): {first_of(differ)}")
    if mounts:
        notes.append(f"{len(mounts)} parts' mounting differs between the design's pads and the BOM (the pads are "
                     f"taken: check the footprint or the BOM line): {first_of(mounts)}")
    if zeros:
        notes.append("BOM packages read with the leading zero a spreadsheet drops from a chip size: "
                     + ", ".join(f"{k} as {v}" for k, v in sorted(zeros.items())))
    return replace(design, parts=parts, notes=notes, format=f"{design.format} with its BOM")


def _mounted(part: PlacedPart, line: BomLine, differ: list[str]) -> PlacedPart:
    """`part` mounted as its BOM line says, where the design does not know (a placement file without a mount
    column) or knows it through-hole and the BOM says placed in paste (a hybrid's pads say so whatever the BOM's
    coarser word); a disagreement with the design's pads goes to `differ`, and the pads are taken."""
    if line.mount is None:
        return part
    if not part.mount_known:
        return replace(part, mount=line.mount)
    if (line.mount != SMD) != part.through_hole:
        differ.append(f"{part.ref} ({'through-hole' if part.through_hole else 'SMD'} pads, {line.mount} on the BOM)")
        return part
    return replace(part, mount=PIN_IN_PASTE) if line.mount == PIN_IN_PASTE else part


def _values_differ(part: PlacedPart, line: BomLine) -> bool:
    """A resistor's, capacitor's or inductor's value stated by both files as two quantities (values.py): `0.1uF`
    and `Ceramic capacitor, 100 nF` agree, `5K1` and `4K7` do not; where either states none, nothing is said."""
    kind = kind_of(part.ref)
    if kind is None or not part.value or not line.value:
        return False
    here, there = quantity(part.value, kind), quantity(line.value, kind)
    return here is not None and there is not None and here != there


def _package(text: str, zeros: dict[str, str]) -> str:
    """A BOM's package as a package name: a footprint without its library (KiCad's
    `Resistor_SMD:R_0603_1608Metric`, as the board readers name it), a chip size a spreadsheet wrote as a number
    (`402`) with its zero again (noted in `zeros`)."""
    package = text.split(":", 1)[1] if re.match(r"^[\w.+-]+:\S", text) else text
    if package.isdigit() and CHIP_SIZE.match("0" + package):
        zeros[package] = "0" + package
        return "0" + package
    return package


def described(design: BoardDesign) -> dict[str, str]:
    """Each part's BOM line in a few words (what it is, who makes it, the BOM's package), where a BOM came: what
    the engineer reads to give an unknown package its class."""
    about = {}
    for p in design.parts:
        b = p.bought
        if b is not None:
            made = " ".join(w for w in (b.manufacturer, b.part_number) if w)
            said = (b.description or b.value or p.value, made, b.package and f"BOM package {b.package}")
            words = [w for w in said if w]
            about[p.ref] = "; ".join(words)
    return about
