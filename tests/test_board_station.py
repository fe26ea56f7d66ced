"""A station before the through-hole parts (an AOI after paste or reflow): bodies-kicad9's LED D1 and header J2 are
through-hole in each of its formats, by its pads, a placement file's mount column, or a BOM's Mounting Type; a part
placed in paste before reflow is inspected all the same; SnapperGPS's real board and BOM agree on its USB connector."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from inspector.board.bom import read_bom
from inspector.board.design import CadError
from inspector.board.importing import read_design
from inspector.board.library import load_library
from inspector.board.mounting import PIN_IN_PASTE, SMD, THROUGH_HOLE, mount_of
from inspector.board.station import NOT_YET, Station, at_station
from tests.test_board_teach import cli

CAD = Path(__file__).parent / "cad"
POS = CAD / "bodies-kicad9-pos.csv"
BEFORE = Station(before_through_hole=True)
LIB = load_library(None)


def _later(design) -> list[str]:  # noqa: ANN001 - a BoardDesign
    return sorted(p.ref for p in design.parts if p.excluded == NOT_YET)


@pytest.mark.parametrize(("file", "gerber"), [
    ("bodies-kicad9.kicad_pcb", None), ("bodies-kicad9-ipc2581.xml", None), ("bodies-kicad9-odb.zip", None),
    ("bodies-kicad9-gerbers-x3.zip", None), ("bodies-kicad9-pos.csv", "bodies-kicad9-gerbers.zip")])
def test_every_format_says_which_parts_go_in_after_reflow(file: str, gerber: str | None) -> None:
    """The board's own pads say it (plated holes; Gerbers: the same pad on both sides): D1 and J2 are not inspected
    before the through-hole parts, every other part is; a station that sees the finished board leaves none out."""
    design = read_design(CAD / file, None, gerber=CAD / gerber if gerber else None)
    assert at_station(design, Station(), LIB) is design
    seen = at_station(design, BEFORE, LIB)
    assert _later(seen) == ["D1", "J2"] and sum(p.excluded is None for p in seen.parts) == len(design.parts) - 2
    assert "the station stands before the through-hole parts: 2 through-hole parts are not inspected: D1, J2" \
        in seen.notes
    named = at_station(design, Station(True, ("J2",)), LIB)
    assert _later(named) == ["D1"] and next(p for p in named.parts if p.ref == "J2").pin_in_paste
    assert "1 through-hole parts placed in paste before reflow are inspected: J2" in named.notes


def test_the_command_line_leaves_them_out_and_the_json_says_each_parts_mounting(tmp_path: Path) -> None:
    out, doc = tmp_path / "b.yaml", tmp_path / "b.json"
    r = cli("board", "import", str(CAD / "bodies-kicad9.kicad_pcb"), "--out", str(out), "--px-per-mm", "10",
            "--before-through-hole", "--pin-in-paste", "J2", "--json", str(doc))
    assert r.returncode == 0, r.stderr
    got = json.loads(doc.read_text())
    fates = {f["ref"]: f for f in got["parts"]}
    assert (fates["D1"]["inspected"], fates["D1"]["reason"], fates["D1"]["mount"]) == (False, NOT_YET, THROUGH_HOLE)
    assert (fates["J2"]["inspected"], fates["J2"]["mount"]) == (True, PIN_IN_PASTE)
    assert fates["R1"]["mount"] == SMD and got["station"] == "before the through-hole parts; pin-in-paste: J2"
    assert "note: 1 through-hole parts placed in paste before reflow are inspected: J2" in r.stdout
    # the rule set says what it was made from and how (board/provenance.py): the board's bytes, and the station
    from inspector.board.provenance import fingerprint

    head = out.read_text().splitlines()[1:3]
    board = fingerprint(CAD / "bodies-kicad9.kicad_pcb")
    assert head == [f"# made from: design bodies-kicad9.kicad_pcb (sha256 {board})",
                    "# import options: side top, 10 px/mm, recipe bodies-kicad9; station: before the through-hole "
                    "parts; pin-in-paste: J2"]
    r = cli("board", "import", str(CAD / "bodies-kicad9.kicad_pcb"), "--out", str(out), "--px-per-mm", "10",
            "--before-through-hole", "--pin-in-paste", "J2,J9")
    assert r.returncode != 0 and "the pin-in-paste parts J9 are not on this board" in r.stderr
    r = cli("board", "import", str(CAD / "bodies-kicad9.kicad_pcb"), "--out", str(out), "--px-per-mm", "10",
            "--pin-in-paste", "J2")
    assert r.returncode != 0 and "a station before the through-hole parts (--before-through-hole)" in r.stderr
    r = cli("board", "import", str(CAD / "bodies-kicad9.kicad_pcb"), "--out", str(out), "--px-per-mm", "10",
            "--before-through-hole", "--pin-in-paste", "J4-J2")
    assert r.returncode != 0 and "--pin-in-paste: designator range 'J4-J2' does not count up" in r.stderr


def test_parts_fitted_after_the_station_are_named_and_not_inspected(tmp_path: Path) -> None:
    """At any station the engineer may name parts fitted after it: not placed there, their lands kept, said; with
    the BOM leaving one off anyway, that is said too; a part both in paste and fitted later, or one the board lacks,
    is refused."""
    from inspector.board.station import FITTED_LATER

    design = read_design(CAD / "bodies-kicad9.kicad_pcb", None, bom=CAD / "bodies-kicad9-bom.csv")
    seen = at_station(design, Station(fitted_later=("C2", "U1", "J2")), LIB)
    assert sorted(p.ref for p in seen.parts if p.excluded == FITTED_LATER) == ["C2", "U1"]
    assert all(p.not_placed() for p in seen.parts if p.ref in ("C2", "U1"))
    assert "2 parts are fitted after this station and not inspected: C2, U1" in seen.notes
    assert "1 parts named fitted later are not placed at all (DNP, not on the BOM): J2" in seen.notes
    both = at_station(design, Station(True, ("J1",), ("C2",)), LIB)
    assert sorted(p.ref for p in both.parts if p.excluded in (FITTED_LATER, NOT_YET)) == ["C2", "D1"]
    with pytest.raises(ValueError, match="C2 named both pin-in-paste .* and fitted later: say which"):
        at_station(design, Station(True, ("C2",), ("C2",)), LIB)
    with pytest.raises(ValueError, match="the fitted-later parts BT1 are not on this board"):
        at_station(design, Station(fitted_later=("BT1",)), LIB)
    out, doc = tmp_path / "b.yaml", tmp_path / "b.json"
    r = cli("board", "import", str(CAD / "bodies-kicad9.kicad_pcb"), "--out", str(out), "--px-per-mm", "10",
            "--fitted-later", "C2,U1", "--json", str(doc))
    assert r.returncode == 0, r.stderr
    got = json.loads(doc.read_text())
    assert got["station"] == "every part the assembly fits; fitted later: C2, U1"
    assert {f["ref"]: f["reason"] for f in got["parts"] if not f["inspected"]}["U1"] == FITTED_LATER


@pytest.mark.parametrize(("text", "mount"), [
    ("SMD", SMD), ("smt", SMD), ("Surface Mount", SMD), ("SMD/SMT", SMD), ("THT", THROUGH_HOLE),
    ("Through-Hole", THROUGH_HOLE), ("through hole", THROUGH_HOLE), ("PTH", THROUGH_HOLE), ("Press-Fit", THROUGH_HOLE),
    ("THR", PIN_IN_PASTE), ("Pin-in-Paste", PIN_IN_PASTE), ("paste in hole", PIN_IN_PASTE), ("", None), ("  ", None),
    # Digi-Key's Mounting Type values: an orientation after the mounting, and a hybrid's two mountings
    ("Surface Mount, Right Angle", SMD), ("Through Hole, Right Angle", THROUGH_HOLE),
    ("Through Hole, Vertical", THROUGH_HOLE), ("Surface Mount, Through Hole", PIN_IN_PASTE),
    ("Surface Mount, Right Angle; Through Hole", PIN_IN_PASTE)])
def test_mounting_words(text: str, mount: str | None) -> None:
    assert mount_of(text) == mount


@pytest.mark.parametrize("text", ["Chassis Mount", "Panel Mount", "Free Hanging (In-Line)", "Right Angle", "Hybrid",
                                  "Surface Mount, Chassis"])
def test_mounting_words_not_read_are_refused_for_the_caller_to_name(text: str) -> None:
    with pytest.raises(ValueError):
        mount_of(text)


def test_a_placement_files_mount_column_says_it_and_without_one_the_engineer_is_told(tmp_path: Path) -> None:
    """KiCad's placement file has no mount column: no part's mounting is known, so every part is inspected and the
    engineer told which. With one (`Mount`), D1 goes in later, J2 in paste; a word it does not read is named at its
    line, its part's mounting unknown."""
    plain = at_station(read_design(POS, None), BEFORE, LIB)
    assert _later(plain) == [] and all(not p.mount_known for p in plain.parts)
    assert any(n.startswith("16 parts' mounting no file says (the placement has no mount column") for n in plain.notes)
    lines = POS.read_text().splitlines()
    words = {"D1": "THT", "J2": "Pin in paste", "U1": "Hybrid", "C3": ""}
    mounted = tmp_path / "mounted.csv"
    mounted.write_text("\n".join([lines[0] + ",Mount"] + [
        f"{row},{words.get(row.split(',')[0].strip(chr(34)), 'SMD')}" for row in lines[1:]]) + "\n")
    design = read_design(mounted, None)
    parts = {p.ref: p for p in design.parts}
    assert (parts["D1"].through_hole, parts["J2"].pin_in_paste, parts["R1"].mount_known) == (True, True, True)
    assert not parts["U1"].mount_known and not parts["C3"].mount_known
    line = next(n for n, row in enumerate(lines, start=1) if row.startswith('"U1"'))
    assert f"1 parts' mounting is in words this does not read (SMD, THT, pin-in-paste and their usual spellings), " \
           f"so it is not known: {mounted}:{line} ('Hybrid')" in design.notes
    seen = at_station(design, BEFORE, LIB)
    assert _later(seen) == ["D1"]
    assert any(n.startswith("2 parts' mounting no file says") and n.endswith(": C3, U1") for n in seen.notes)


def test_a_boms_mounting_type_mounts_a_placement_and_is_checked_against_a_boards_pads(tmp_path: Path) -> None:
    """Digi-Key's `Mounting Type` column: over KiCad's placement file (no mount column) it says D1 and J2 are
    through-hole, J2 in paste; over the board file, whose pads say it already, a line saying otherwise is noted
    and the pads taken, and its pin-in-paste is taken."""
    bom = tmp_path / "bom.csv"
    rows = {"D1": "Through Hole", "J2": "THR", "R1": "Through Hole", "U1": "Chassis Mount"}
    refs = [row.split(",")[0].strip('"') for row in POS.read_text().splitlines()[1:]]
    bom.write_text("Designator,Qty,Value,Mounting Type\n" + "".join(
        f"{r},1,x,{rows.get(r, 'Surface Mount')}\n" for r in refs))
    assert read_bom(bom).by_ref()["J2"].mount == PIN_IN_PASTE
    assert any("1 BOM lines say a mounting in words this does not read" in n and "('Chassis Mount')" in n
               for n in read_bom(bom).notes)
    placed = at_station(read_design(POS, None, bom=bom), BEFORE, LIB)
    assert _later(placed) == ["D1", "R1"] and next(p for p in placed.parts if p.ref == "J2").excluded is None
    assert any(n.startswith("1 parts' mounting no file says") and n.endswith(": U1") for n in placed.notes)
    board = read_design(CAD / "bodies-kicad9.kicad_pcb", None, bom=bom)
    assert ("1 parts' mounting differs between the design's pads and the BOM (the pads are taken: check the "
            "footprint or the BOM line): R1 (SMD pads, through-hole on the BOM)") in board.notes
    assert _later(at_station(board, BEFORE, LIB)) == ["D1"]


def test_a_panels_boards_are_each_named_by_the_boards_designators(tmp_path: Path) -> None:
    """Pin-in-paste names the board's designators; on a panel (parts k-REF) each copy of the part is meant."""
    from tests.test_board_odbpp import PANEL, write_job

    job = write_job(tmp_path, {"steps/panel/stephdr": PANEL})
    design = read_design(job, None, step="panel")
    through = sorted(p.ref for p in design.parts if p.through_hole)
    assert through and all("-" in r for r in through)
    board_refs = sorted({r.split("-", 1)[1] for r in through})
    seen = at_station(design, Station(True, tuple(board_refs)), LIB)
    assert _later(seen) == [] and all(p.pin_in_paste for p in seen.parts if p.through_hole)
    with pytest.raises(ValueError, match="the pin-in-paste parts 1-J1 are not on this board"):
        at_station(design, Station(True, ("1-J1",)), LIB)


def test_bad_pin_in_paste_designators_are_refused_by_the_same_reader_as_a_boms() -> None:
    from inspector.board.bom import designators

    with pytest.raises(CadError, match="does not count up"):
        designators("J4-J2", "pin-in-paste")


BOARDS = Path(__file__).parent.parent.parent / "shared" / "data" / "boards"
SNAPPER = BOARDS / "snappergps"


@pytest.mark.skipif(not SNAPPER.is_dir(), reason="the shared boards are not beside this checkout")
def test_snappergps_usb_connector_is_placed_in_paste_by_its_pads_and_through_hole_by_its_bom() -> None:
    """The real board (Eagle): J1, the USB-C socket, has 14 surface pins and 4 plated legs, so it is reflowed with its
    legs in paste and inspected before the through-hole parts; its BOM's Mounting Type says `through-hole` (the
    distributor's word for a hybrid), which the pads overrule without a quarrel (both say plated holes). Its
    centroid file has no pads: there the BOM's word is all there is, and J1 is left out, and said."""
    bom = SNAPPER / "SnapperGPS_1_0_0_BOM.csv"
    board = read_design(SNAPPER / "snappergps_1_0_0.brd", None, bom=bom)
    j1 = next(p for p in board.parts if p.ref == "J1")
    assert (j1.through_hole, j1.pin_in_paste, sum(p.smd for p in j1.pads), len(j1.pads)) == (True, True, 14, 18)
    assert not any("mounting differs" in n for n in board.notes)
    seen = at_station(board, BEFORE, LIB)
    assert _later(seen) == [] and "1 through-hole parts placed in paste before reflow are inspected: J1" in seen.notes
    centroid = read_design(SNAPPER / "snappergps_1_0_0.mnt", None, bom=bom)
    assert _later(at_station(centroid, BEFORE, LIB)) == ["J1"]
    assert _later(at_station(centroid, Station(True, ("J1",)), LIB)) == []


HOLES = CAD / "holes-kicad9"  # tests/cad/make_holes_kicad9.py: J1 through-hole; U1's thermal vias, C1's via-in-pad,
# R1 over R2 on the other side: pads over pads that are no lead's; J2 a USB-C socket, surface pins and plated legs


@pytest.mark.parametrize("gerbers", ["gerbers", "gerbers-rs274x"])
def test_drill_files_say_which_pads_a_lead_goes_through(gerbers: str) -> None:
    """With KiCad's Excellon files (X2 or plain; the USB-C socket's oval legs written as G85 slots), J1's 1 mm holes
    make it through-hole, and neither U1's 0.2 mm thermal vias, C1's 0.3 mm via nor the other side's pad under R1
    and R2 do; J2's legs beside its surface pins make it a hybrid placed in paste. Before the through-hole parts,
    J1 alone is left out, as from the board file, whose pads say the same (its footprint's attribute calls J2
    surface mount: said, and taken as the pads say)."""
    design = read_design(Path(f"{HOLES}-pos.csv"), None, gerber=Path(f"{HOLES}-{gerbers}.zip"))
    mounted = {p.ref: (p.through_hole, p.pin_in_paste) for p in design.parts}
    assert mounted == {"J1": (True, False), "J2": (True, True), "U1": (False, False), "C1": (False, False),
                       "R1": (False, False), "R2": (False, False)}
    assert not any("drill file" in n for n in design.notes)
    board = read_design(Path(f"{HOLES}.kicad_pcb"), None)
    assert {p.ref: (p.through_hole, p.pin_in_paste) for p in board.parts} == mounted
    assert "1 footprints' attribute (smd / through_hole) says other than their pads, taken as their pads say: J2 " \
        "(through-hole pads beside surface pins)" in board.notes
    assert _later(at_station(design, BEFORE, LIB)) == ["J1"] == _later(at_station(board, BEFORE, LIB))


def test_without_drill_files_pads_on_both_sides_are_taken_as_through_hole_and_said(tmp_path: Path) -> None:
    """The same Gerbers without their drill files: a pad over a pad is taken as through-hole, so the stacked R1 and
    R2 read as through-hole too, and the import says why; a set whose only drill file is the non-plated one has no
    through-hole pad, and says so; a drill file gerbonara cannot read is named."""
    import zipfile

    with zipfile.ZipFile(f"{HOLES}-gerbers-rs274x.zip") as z:
        z.extractall(tmp_path / "set")
    (tmp_path / "set" / "holes-kicad9-PTH.drl").unlink()
    npth_only = read_design(Path(f"{HOLES}-pos.csv"), None, gerber=tmp_path / "set")
    assert not any(p.through_hole for p in npth_only.parts)
    assert any(n.startswith("the set's only drill file is the non-plated holes' (NPTH)") for n in npth_only.notes)
    (tmp_path / "set" / "holes-kicad9-NPTH.drl").unlink()
    design = read_design(Path(f"{HOLES}-pos.csv"), None, gerber=tmp_path / "set")
    assert {"J1", "R1", "R2"} <= {p.ref for p in design.parts if p.through_hole}
    assert any(n.startswith("no drill file in the set: a pad is taken as through-hole where the other side has a pad")
               for n in design.notes)
    (tmp_path / "set" / "holes-kicad9-PTH.drl").write_text("M48\nMETRIC\nT1C1.0\n%\nT1\nXabcY1\nM30\n")
    with pytest.raises(CadError, match=r"holes-kicad9-PTH.drl: not an Excellon drill file gerbonara can read"):
        read_design(Path(f"{HOLES}-pos.csv"), None, gerber=tmp_path / "set")


def test_a_kicad_footprints_pads_say_its_mounting_over_its_attribute(tmp_path: Path) -> None:
    """A footprint left `through_hole` over a surface pad (StickHub's J9 in KiCad's demos) is surface mount, and one
    marked `smd` with plated legs beside its pins (a USB-C socket) is placed in paste, each said; a plated pad under
    0.5 mm is a thermal via, and a pad without its drill given counts as a lead's."""
    board = tmp_path / "m.kicad_pcb"
    board.write_text("""(kicad_pcb (version 20241229) (generator "pcbnew")
  (footprint "x:Tab" (layer "F.Cu") (at 10 10) (attr through_hole)
    (property "Reference" "J9" (at 0 0) (layer "F.SilkS"))
    (pad "1" smd rect (at 0 0) (size 3 2) (layers "F.Cu" "F.Mask")))
  (footprint "x:Socket" (layer "F.Cu") (at 20 10) (attr smd)
    (property "Reference" "J2" (at 0 0) (layer "F.SilkS"))
    (pad "1" smd rect (at -1 0) (size 0.3 1) (layers "F.Cu" "F.Mask"))
    (pad "2" smd rect (at 1 0) (size 0.3 1) (layers "F.Cu" "F.Mask"))
    (pad "S1" thru_hole oval (at -3 1) (size 1 2) (drill oval 0.6 1.4) (layers "*.Cu" "*.Mask"))
    (pad "S2" thru_hole oval (at 3 1) (size 1 2) (drill oval 0.6 1.4) (layers "*.Cu" "*.Mask")))
  (footprint "x:QFN" (layer "F.Cu") (at 30 10) (attr smd)
    (property "Reference" "U1" (at 0 0) (layer "F.SilkS"))
    (pad "1" smd rect (at -2 0) (size 0.8 0.3) (layers "F.Cu" "F.Mask"))
    (pad "2" smd rect (at 2 0) (size 0.8 0.3) (layers "F.Cu" "F.Mask"))
    (pad "3" smd rect (at 0 0) (size 2 2) (layers "F.Cu" "F.Mask"))
    (pad "3" thru_hole circle (at 0 0) (size 0.5 0.5) (drill 0.2) (layers "*.Cu")))
  (footprint "x:Pin" (layer "F.Cu") (at 40 10)
    (property "Reference" "TP1" (at 0 0) (layer "F.SilkS"))
    (pad "1" thru_hole circle (at 0 0) (size 1.7 1.7) (layers "*.Cu" "*.Mask")))
)
""", encoding="utf-8")
    design = read_design(board, None)
    assert {p.ref: (p.through_hole, p.pin_in_paste) for p in design.parts} == {
        "J9": (False, False), "J2": (True, True), "U1": (False, False), "TP1": (True, False)}
    assert "2 footprints' attribute (smd / through_hole) says other than their pads, taken as their pads say: J9 (no " \
        "plated hole), J2 (through-hole pads beside surface pins)" in design.notes


@pytest.mark.parametrize(("via", "attributes", "c1_through_hole"), [
    ("0.550", True, False),  # a via wider than a lead's hole, and the drill file says it is a via's
    ("0.550", False, True),  # the same file without its X2 attributes: by its width alone, a lead's hole
    ("0.600", True, True),  # as wide as J2's legs' tool: which hole is which is unknown, so by its width
])
def test_a_wide_via_in_a_pad_is_a_via_where_the_drill_files_attributes_say_so(
        tmp_path: Path, via: str, attributes: bool, c1_through_hole: bool) -> None:
    """KiCad's own X2 drill file with C1's via-in-pad widened (0.3 mm to `via`): the tool's `ViaDrill` attribute
    keeps C1 surface mount however wide its via; without the attributes, or where the via's width is another tool's
    too, the 0.5 mm rule stands. The other parts read as before."""
    import re
    import zipfile

    with zipfile.ZipFile(f"{HOLES}-gerbers.zip") as z:
        z.extractall(tmp_path / "set")
    drill = tmp_path / "set" / "holes-kicad9-PTH.drl"
    text = drill.read_text(encoding="utf-8")
    assert "; #@! TA.AperFunction,Plated,PTH,ViaDrill\nT2C0.300\n" in text
    text = text.replace("T2C0.300", f"T2C{via}")
    if not attributes:
        text = re.sub(r"^; #@! TA\..*\n", "", text, flags=re.MULTILINE)
    drill.write_text(text, encoding="utf-8")
    design = read_design(Path(f"{HOLES}-pos.csv"), None, gerber=tmp_path / "set")
    mounted = {p.ref: p.through_hole for p in design.parts}
    assert mounted == {"J1": True, "J2": True, "U1": False, "C1": c1_through_hole, "R1": False, "R2": False}


def test_a_hybrid_is_placed_in_paste_and_a_mark_is_never_left_out() -> None:
    """By pads alone (Eagle's, the Gerbers'): plated holes make a part through-hole, and as many surface pads beside
    them or more (a USB-C socket's pins beside its legs) make it pin-in-paste; a lone surface pad among holes does
    not. A fiducial the Gerbers give a plated hole (by place, on a plain RS-274X set) stays a registration mark."""
    from dataclasses import replace

    from inspector.board.design import BoardDesign, Pad, PlacedPart
    from inspector.board.mounting import by_pads

    hole, surface = Pad(0, 0, 1.7, 1.7, smd=False), Pad(0, 0, 0.3, 1.0)
    assert by_pads(()) == (False, False) and by_pads((surface, surface)) == (False, False)
    assert by_pads((hole, hole, hole)) == (True, False) and by_pads((hole, hole, surface)) == (True, False)
    assert by_pads((hole, hole, surface, surface)) == (True, True)
    fiducial = PlacedPart("FID1", "", "Fiducial_1mm_Mask2mm", 1.0, 1.0, 0.0, "top", (hole,), mount=THROUGH_HOLE)
    header = replace(fiducial, ref="J1", package="PinHeader_1x01_P2.54mm_Vertical")
    seen = at_station(BoardDesign("b", "test", [fiducial, header], y_up=True), BEFORE, LIB)
    assert _later(seen) == ["J1"] and seen.parts[0].excluded is None
