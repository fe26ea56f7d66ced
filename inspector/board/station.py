"""Where the inspecting station stands on the line, which says which parts a board has when the camera sees it.

An AOI after paste or after reflow sees the board before the through-hole parts go in (by hand, a robot, then wave
or selective solder): their places are empty there, every board, so they are not inspected (not placed, their lands
kept from their neighbours), except those the placement machine puts in paste before reflow (pin-in-paste, THR: their
BOM or placement says so, or the engineer names them). A part whose mounting no file says (a placement file without
a mount column, no Gerbers, no BOM line saying it) is inspected, and named, so the engineer can say. At any station,
the engineer may name parts fitted after it (a battery or a heat sink fitted by hand, a press-fit connector, a part
of a later line): not inspected there either.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .design import PIN_IN_PASTE, BoardDesign, board_ref, named_refs
from .library import Library

NOT_YET = "not placed (through-hole: inserted after this station)"
FITTED_LATER = "not placed (fitted after this station)"


@dataclass(frozen=True)
class Station:
    before_through_hole: bool = False  # an AOI after paste or reflow: through-hole parts go in after it
    pin_in_paste: tuple[str, ...] = ()  # through-hole parts placed in paste before reflow, as the engineer names them
    fitted_later: tuple[str, ...] = ()  # parts fitted after this station (by hand, a press, a later line), named

    @classmethod
    def read(cls, before_through_hole: bool, pin_in_paste: str, fitted_later: str,
             names: tuple[str, str] = ("--pin-in-paste", "--fitted-later")) -> Station:
        """A station as the engineer writes it: designators in lists or ranges (`J1,J2`, `J1-J4`), as a BOM's;
        CadError naming the field (`names`: the command line's options, or the tab's fields) where one is not."""
        from .bom import designators

        return cls(before_through_hole, designators(pin_in_paste, names[0]) if pin_in_paste.strip() else (),
                   designators(fitted_later, names[1]) if fitted_later.strip() else ())

    def describe(self) -> str:
        said = ["before the through-hole parts" if self.before_through_hole else "every part the assembly fits"]
        if self.pin_in_paste:
            said.append(f"pin-in-paste: {', '.join(self.pin_in_paste)}")
        if self.fitted_later:
            said.append(f"fitted later: {', '.join(self.fitted_later)}")
        return "; ".join(said)


def at_station(design: BoardDesign, station: Station, library: Library) -> BoardDesign:
    """`design` as `station` sees it (above; a fiducial, by the file or by `library`'s class, stays a mark);
    ValueError where the station names a part the design does not have, a part both placed in paste and fitted
    later, or pin-in-paste parts at a station that sees them all anyway."""
    if station.pin_in_paste and not station.before_through_hole:
        raise ValueError("pin-in-paste parts (--pin-in-paste, the New board tab's pin-in-paste) are those inserted "
                         "before reflow, which matters only at a station before the through-hole parts "
                         "(--before-through-hole): say that too, or leave them out")
    _check_names(design, station)
    if station.fitted_later:
        design = _fitted_later(design, {r.upper() for r in station.fitted_later})
    return _before_through_hole(design, station, library) if station.before_through_hole else design


def _check_names(design: BoardDesign, station: Station) -> None:
    boards = {board_ref(p.ref, design.panel_boards).upper() for p in design.parts}
    for option, refs in (("pin-in-paste", station.pin_in_paste), ("fitted-later", station.fitted_later)):
        missing = sorted(r for r in refs if r.upper() not in boards)
        if missing:
            raise ValueError(f"{design.source}: the {option} parts {named_refs(missing)} are not on this board; "
                             "name them as its designators are written (J1, not J 1)")
    both = sorted({r.upper() for r in station.pin_in_paste} & {r.upper() for r in station.fitted_later})
    if both:
        raise ValueError(f"{named_refs(both)} named both pin-in-paste (placed before reflow) and fitted later: "
                         "say which")


def _fitted_later(design: BoardDesign, named: set[str]) -> BoardDesign:
    """The parts named fitted after this station, not placed here (their lands kept); those the assembly leaves
    off anyway are said."""
    later, parts = [], []
    for p in design.parts:
        if p.excluded is None and board_ref(p.ref, design.panel_boards).upper() in named:
            later.append(p.ref)
            p = replace(p, excluded=FITTED_LATER)
        parts.append(p)
    notes = [*design.notes, f"{len(later)} parts are fitted after this station and not inspected: "
                            f"{named_refs(later) if later else 'none'}", *_named_off(design, named, "fitted later")]
    return replace(design, parts=parts, notes=notes)


def _named_off(design: BoardDesign, named: set[str], option: str) -> list[str]:
    """The note on the parts named for `option` that the assembly leaves off anyway, where there are any."""
    off = [p.ref for p in design.parts if p.excluded is not None and board_ref(p.ref, design.panel_boards).upper()
           in named]
    return [f"{len(off)} parts named {option} are not placed at all (DNP, not on the BOM): {named_refs(off)}"] \
        if off else []


def _before_through_hole(design: BoardDesign, station: Station, library: Library) -> BoardDesign:
    """The through-hole parts not placed, but those in paste (above)."""
    named = {r.upper() for r in station.pin_in_paste}
    later: list[str] = []
    in_paste: list[str] = []
    not_through_hole: list[str] = []
    unknown: list[str] = []
    parts = []
    for p in design.parts:
        told = board_ref(p.ref, design.panel_boards).upper() in named
        if told and p.mount_known and not p.through_hole:
            not_through_hole.append(p.ref)
        if p.excluded is not None or library.is_mark(p):
            parts.append(p)
            continue
        if not p.mount_known and not told:
            unknown.append(p.ref)
        elif p.through_hole and (p.pin_in_paste or told):
            in_paste.append(p.ref)
            p = replace(p, mount=PIN_IN_PASTE)
        elif p.through_hole:
            later.append(p.ref)
            p = replace(p, excluded=NOT_YET)
        parts.append(p)
    notes = [*design.notes, f"the station stands before the through-hole parts: {len(later)} through-hole parts are "
                            f"not inspected{': ' + named_refs(later) if later else ''}"]
    if in_paste:
        notes.append(f"{len(in_paste)} through-hole parts placed in paste before reflow are inspected: "
                     f"{named_refs(in_paste)}")
    if not_through_hole:
        notes.append(f"{len(not_through_hole)} parts named pin-in-paste are not through-hole by the design (they are "
                     f"inspected as any placed part): {named_refs(not_through_hole)}")
    notes += _named_off(design, named, "pin-in-paste")
    if unknown:
        notes.append(f"{len(unknown)} parts' mounting no file says (the placement has no mount column, and no Gerbers "
                     f"or BOM line say it), so they are inspected; a through-hole one among them is empty here on "
                     f"every board: give the Gerbers (--gerber), or a BOM or placement file with a mounting column: "
                     f"{named_refs(unknown)}")
    return replace(design, parts=parts, notes=notes)
