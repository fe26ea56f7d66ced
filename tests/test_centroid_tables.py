"""Pick-and-place files as each CAD tool writes them: one board read alike from every tool's layout, encoding and
units, imported to a rule set by its IPC-7351 package names alone, and a file that cannot be read refused with its
line named. Each file is written here in its tool's own layout (no CAD tool runs here)."""
from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from inspector.board.centroid import load_profile, read_centroid
from inspector.board.design import CadError
from inspector.board.importing import import_board
from inspector.board.ipc7351 import stated_body
from inspector.board.library import load_library
from inspector.routing.rules import parse_rules
from inspector.yamlio import ConfigError

# ref, x mm, y mm, rotation, side, package (IPC-7351 names, as Altium's libraries give them), value
BOARD = [("R1", 12.7, 5.08, 90.0, "top", "RESC1005X40N", "10k"),
         ("C2", 25.4, 7.62, 0.0, "bottom", "CAPC1608X90N", "100nF"),
         ("U3", 38.1, 20.32, 270.0, "top", "QFN50P400X400X100-25N", "MCU, 48 MHz")]
MIL = {"R1": (500, 200), "C2": (1000, 300), "U3": (1500, 800)}
SIDE = {"top": "TopLayer", "bottom": "BottomLayer"}


def _kicad_pos(inches: bool) -> str:
    unit = "inches" if inches else "mm"
    rows = "".join(f"{ref:<10}{val.split(',')[0]:<8}{pkg:<26}{x / (25.4 if inches else 1):>10.4f} "
                   f"{y / (25.4 if inches else 1):>10.4f} {rot:>9.4f}  {side}\n"
                   for ref, x, y, rot, side, pkg, val in BOARD)
    return (f"### Footprint positions - created on 2026-12-06T11:02:13 ###\n### Printed by KiCad version 8.0.4\n"
            f"## Unit = {unit}, Angle = deg.\n## Side : All\n"
            f"# Ref     Val     Package                         PosX       PosY       Rot  Side\n{rows}## End\n")


def _altium_txt(comment_of: dict[str, str]) -> str:
    rows = "".join(f"{ref:<11}{comment_of[ref]:<15}{SIDE[side]:<12}{pkg:<26}{MIL[ref][0]:<14.3f}{MIL[ref][1]:<14.3f}"
                   f"{rot:<9.0f}\"{val}, {pkg[:4]} part\"\n" for ref, _x, _y, rot, side, pkg, val in BOARD)
    return ("Altium Designer Pick and Place Locations\nC:\\Boards\\Demo\\Project Outputs for Demo\\Pick Place for "
            "Demo.txt\n\n" + "=" * 60 + "\nFile Design Information:\n\nDate:       06/12/26\nTime:       11:02\n"
            "Revision:   Not in VersionControl\nVariant:    No variations\nUnits used: mil\n\n"
            "Designator Comment        Layer       Footprint                 Center-X(mil) Center-Y(mil) Rotation "
            f"Description\n{rows}")


LAYOUTS = {
    "kicad-mm.pos": lambda: _kicad_pos(False),
    "kicad-inches.pos": lambda: _kicad_pos(True),
    # Altium's default text output: aligned, a quoted description holding commas, a comment holding spaces
    "altium.txt": lambda: _altium_txt({"R1": '"10k 1%"', "C2": "100nF", "U3": '"MCU, 48 MHz"'}),
    # ... and a part with no comment: its row has one value fewer than the header, read by the header's columns
    "altium-empty.txt": lambda: _altium_txt({"R1": "10k", "C2": "", "U3": "MCU"}),
    # older Altium: Mid X beside Ref X and Pad X, each value carrying its unit
    "altium-old.txt": lambda: "Designator Footprint                 Mid X         Mid Y         Ref X         Ref Y  " +
    "       Pad X         Pad Y         TB      Rotation Comment\n" + "".join(
        f"{ref:<11}{pkg:<26}{f'{MIL[ref][0]}mil':<14}{f'{MIL[ref][1]}mil':<14}" + f"{'0mil':<14}" * 4 +
        f"{side[0].upper():<8}{rot:<9.2f}{val.split(',')[0]}\n" for ref, _x, _y, rot, side, pkg, val in BOARD),
    "altium.csv": lambda: ("Altium Designer Pick and Place Locations\n\nUnits used: mm\n\n\"Designator\",\"Comment\","
                           "\"Layer\",\"Footprint\",\"Center-X(mm)\",\"Center-Y(mm)\",\"Rotation\",\"Description\"\n" +
                           "".join(f'"{r}","{v}","{SIDE[s]}","{p}","{x:.4f}","{y:.4f}","{a:.0f}",""\n'
                                   for r, x, y, a, s, p, v in BOARD)),
    "jlc-cpl.csv": lambda: "Designator,Mid X,Mid Y,Layer,Rotation\n" + "".join(
        f"{r},{x}mm,{y}mm,{s.capitalize()},{a:.0f}\n" for r, x, y, a, s, _p, _v in BOARD),
    "proteus.txt": lambda: ("Proteus Pick and Place File\nCompany:\nAuthor:\nRevision:\nCreated: 06/12/2026\n"
                            "Units: thou, relative to Output Origin\n\nField Descriptors:\n"
                            "Part ID,Value,Package,Layer,Rotation,X,Y\n" + "".join(
                                f'"{r}","{v}","{p}","{s.upper()}",{a:.0f},{MIL[r][0]:.1f},{MIL[r][1]:.1f}\n'
                                for r, _x, _y, a, s, p, v in BOARD)),
    "semicolons.csv": lambda: "Designator;Footprint;Mid X;Mid Y;Layer;Rotation\n" + "".join(
        f"{r};{p};{str(x).replace('.', ',')};{str(y).replace('.', ',')};{s};{a:.0f}\n"
        for r, x, y, a, s, p, _v in BOARD),
    "diptrace.csv": lambda: "RefDes,Pattern,X (mm),Y (mm),Side,Rotate,Value\n" + "".join(
        f"{r},{p},{x},{y},{s.capitalize()},{a:.0f},{v.split(',')[0]}\n" for r, x, y, a, s, p, v in BOARD),
    # a header naming its units and degrees, and PADS's abbreviations
    "units-in-header.csv": lambda: "Ref. Des.,Part Type,X (mm),Y [mm],Orient.,Layer\n" + "".join(
        f"{r},{p},{x},{y},{a:.1f},{s}\n" for r, x, y, a, s, p, _v in BOARD),
    "degrees.csv": lambda: "Designator,Footprint,Mid X(mm),Mid Y(mm),Rotation (deg),Side\n" + "".join(
        f"{r},{p},{x},{y},{a:.0f},{s}\n" for r, x, y, a, s, p, _v in BOARD),
    "librepcb.csv": lambda: "# Pick&Place Export\n# Project: Demo\nDesignator,Value,Device,Package,Position X,"
                            "Position Y,Rotation,Side\n" + "".join(
                                f'"{r}","{v}","dev","{p}","{x}","{y}","{a}","{s.capitalize()}"\n'
                                for r, x, y, a, s, p, v in BOARD),
}


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_every_tools_layout_reads_the_same_board(tmp_path: Path, name: str) -> None:
    design = read_centroid(_write(tmp_path / name, LAYOUTS[name]()))
    got = [(p.ref, p.x_mm, p.y_mm, p.rotation, p.side) for p in design.parts]
    assert [(r, pytest.approx(x, abs=1e-6), pytest.approx(y, abs=1e-6), a, s) for r, x, y, a, s, _p, _v in BOARD] \
        == got, design.format
    if name.startswith(("altium", "proteus", "semicolons", "diptrace", "librepcb", "kicad")):
        assert [p.package for p in design.parts] == [b[5] for b in BOARD]


def test_encodings_tools_write_are_read(tmp_path: Path) -> None:
    # EasyEDA: UTF-16 with its byte-order mark, tab-separated, units on each value
    text = "Designator\tFootprint\tMid X\tMid Y\tRef X\tRef Y\tPad X\tPad Y\tLayer\tRotation\tComment\n" + "".join(
        f"{r}\t{p}\t{x}mm\t{y}mm\t0mm\t0mm\t0mm\t0mm\t{s[0].upper()}\t{a:.0f}\t{v}\n" for r, x, y, a, s, p, v in BOARD)
    (tmp_path / "easyeda.csv").write_bytes(codecs.BOM_UTF16_LE + text.encode("utf-16-le"))
    (tmp_path / "nomark.csv").write_bytes(text.encode("utf-16-le"))
    for name in ("easyeda.csv", "nomark.csv"):
        design = read_centroid(tmp_path / name)
        assert [(p.ref, p.x_mm, p.side, p.value) for p in design.parts] == [
            (r, x, s, v) for r, x, _y, _a, s, _p, v in BOARD]
    # a Windows tool's cp1252: a value's micro sign is not UTF-8
    (tmp_path / "win.txt").write_bytes(_altium_txt({"R1": "10k", "C2": "10µF", "U3": "MCU"}).encode("cp1252"))
    assert read_centroid(tmp_path / "win.txt").parts[1].value == "10µF"


def test_an_aligned_file_with_a_profiles_own_column_names(tmp_path: Path) -> None:
    f = _write(tmp_path / "plant.txt", "Teil   Koord X   Koord Y   Winkel  Lage\n"
               "R1     12.70     5.08      90      oben\nC2     25.40     7.62      0       unten\n")
    with pytest.raises(CadError, match="no header row naming"):
        read_centroid(f)
    _write(tmp_path / "plant.yaml", "columns: {ref: Teil, x: Koord X, y: Koord Y, rotation: Winkel}\nunits: mm\n")
    design = read_centroid(f, load_profile(tmp_path / "plant.yaml"))
    assert [(p.ref, p.x_mm, p.y_mm, p.rotation) for p in design.parts] == [("R1", 12.7, 5.08, 90.0),
                                                                           ("C2", 25.4, 7.62, 0.0)]


def test_a_file_that_cannot_be_read_is_refused_naming_its_line(tmp_path: Path) -> None:
    (tmp_path / "board.txt").write_bytes(b"\x00\x01PCB binary\x00\x00")
    with pytest.raises(CadError, match="board.txt: a binary file, not a centroid table"):
        read_centroid(tmp_path / "board.txt")
    (tmp_path / "odd.csv").write_bytes(codecs.BOM_UTF16_LE + "Designator\tMid X".encode("utf-16-le") + b"\x41")
    with pytest.raises(CadError, match="odd.csv: looks like UTF-16 text but does not decode"):
        read_centroid(tmp_path / "odd.csv")
    text = _altium_txt({"R1": "10k", "C2": "100nF", "U3": "MCU"}).splitlines()
    header = next(i for i, line in enumerate(text) if line.startswith("Designator"))
    text[header + 2] = "C2 100 nF BottomLayer CAPC1608X90N 1000.000 300.000 0 \"cap\""  # not aligned, a value split
    with pytest.raises(CadError, match=rf"misaligned.txt:{header + 3}: 9 values where the header has 8 columns"):
        read_centroid(_write(tmp_path / "misaligned.txt", "\n".join(text) + "\n"))
    with pytest.raises(CadError, match=r"short.csv:3: 2 columns where the header has 5, and the reference, x, y"):
        read_centroid(_write(tmp_path / "short.csv", "Designator,Mid X,Mid Y,Layer,Rotation\nR1,1,2,Top,0\nC2,3\n"))
    with pytest.raises(CadError, match=r"bad.pos:6: y '-4.2x' is not a number"):
        read_centroid(_write(tmp_path / "bad.pos", _kicad_pos(False).replace("    5.0800", "    -4.2x", 1)))


def test_ipc7351_names_state_their_bodies_and_a_centroid_file_imports_by_them(tmp_path: Path) -> None:
    assert stated_body("RESC1005X40N") == (1.0, 0.5)
    assert stated_body("CAPMP7343X310N") == (7.3, 4.3)
    assert stated_body("SON127P800X600X80-9N") == (8.0, 6.0)
    assert stated_body("QFP50P1200X1200X160-64N") == (12.0, 12.0)
    assert stated_body("BGA256C100P16X16_1700X1700X150") == (17.0, 17.0)
    assert stated_body("SOIC127P600X175-8N") is None  # its span, not its length: asked for, never made up
    lib = load_library(None)
    assert [lib.lookup(p, r).name for p, r in (("SON127P800X600X80-9N", "U1"), ("CAPAE430X540N", "C1"),
                                               ("DIOM5226X240N", "D1"), ("SOIC127P600X175-8N", "U2"))] == [
        "qfn-qfp", "electrolytic", "diode", "soic"]
    out = tmp_path / "demo.yaml"
    design, imported = import_board(_write(tmp_path / "altium.txt", LAYOUTS["altium.txt"]()), out, 20.0)
    rules = parse_rules(out.read_text(encoding="utf-8"), str(out))
    placed = {p.ref: (c, p) for c, p in rules.placements()}
    assert sorted(placed) == ["R1", "U3"]  # C2 is on the bottom
    # each type's body is what its name states, at 20 px/mm: a 1.0 x 0.5 mm chip, a QFN 4 mm a side
    assert placed["R1"][0].size == (20, 10) and placed["U3"][0].size == (80, 80)
    soic = _write(tmp_path / "soic.csv", "Designator,Footprint,Mid X,Mid Y,Rotation\nU9,SOIC127P600X175-8N,5,5,0\n")
    with pytest.raises(ValueError, match="SOIC127P600X175-8N"):
        import_board(soic, tmp_path / "soic.yaml", 20.0)
    assert "SOIC127P600X175-8N" in (tmp_path / "soic.packages.yaml").read_text()


def test_kicad_library_names_state_leadless_and_eia_bodies_and_a_kicad_pos_imports_by_them(tmp_path: Path) -> None:
    # each as KiCad's own libraries name it; the five met in KiCad 9's demos match their footprints' drawn bodies
    # (results/boards.md): QFN-32 and QFN-40 5 x 5, QFN-56 7 x 7, TDFN-8 1.5 x 2, CP_EIA-3528 3.5 x 2.8
    lib = load_library(None)
    named = {"QFN-32-1EP_5x5mm_P0.5mm_EP3.45x3.45mm": ((5.0, 5.0), "qfn-qfp"),
             "TDFN-8_1.5x2mm_Fused-Lead_JEDEC_MO-252_W2015D": ((1.5, 2.0), "qfn-qfp"),
             "WSON-8-1EP_6x5mm_P1.27mm_EP3.4x4.3mm": ((6.0, 5.0), "qfn-qfp"),
             "X2SON-8_1.4x1mm_P0.35mm": ((1.4, 1.0), "qfn-qfp"),
             "LGA-14_3x2.5mm_P0.5mm_LayoutBorder3x4y": ((3.0, 2.5), "qfn-qfp"),
             "TFBGA-100_9.0x9.0mm_Layout10x10_P0.8mm": ((9.0, 9.0), "bga"),
             "CP_EIA-3528-21_Kemet-B_Pad1.50x2.35mm_HandSolder": ((3.5, 2.8), "tantalum")}
    assert {n: (lib.body(n, "U1"), lib.lookup(n, "U1").name) for n in named} == named
    # a gull-wing name gives its plastic, not the span its window must show; a vendor's name no size: asked for
    for name in ("SOIC-20W_7.5x12.8mm_P1.27mm", "TSSOP-20_4.4x6.5mm_P0.65mm", "LQFP-48_7x7mm_P0.5mm",
                 "PLCC-20_9x9mm", "Texas_RGY_R-PVQFN-N16_EP2.05x2.55mm", "C_EIA-0402", "Jackson-3_2x2mm"):
        assert lib.body(name, "U1") is None, name
    pos = _kicad_pos(False).replace("QFN50P400X400X100-25N", "QFN-24-1EP_4x4mm_P0.5mm  ")
    design, imported = import_board(_write(tmp_path / "k.pos", pos), tmp_path / "k.yaml", 20.0)
    placed = {p.ref: c for c, p in parse_rules((tmp_path / "k.yaml").read_text(encoding="utf-8"),
                                               "k.yaml").placements()}
    assert placed["U3"].size == (80, 80)  # 4 mm a side at 20 px/mm


def test_chip_sizes_in_names_give_bodies_and_references_must_be_a_parts_own(tmp_path: Path) -> None:
    lib = load_library(None)
    assert [lib.body(p, r) for p, r in (("R0402", "R1"), ("C_0603_1608Metric", "C1"), ("R_0201_0603Metric", "R2"),
                                        ("LED-0603", "D1"), ("SOT-23", "Q1"))] == [
        (1.0, 0.5), (1.6, 0.8), (0.6, 0.3), (1.6, 0.8), None]  # KiCad's metric code is not read as imperial
    kicad = _write(tmp_path / "k.pos", _kicad_pos(False).replace("RESC1005X40N", "R_0402_1005Metric")
                   .replace("CAPC1608X90N", "C_0603_1608Metric"))
    _design, imported = import_board(kicad, tmp_path / "k.yaml", 20.0, side="bottom")
    assert imported.types == {"C_0603_1608Metric": 1}
    rules = parse_rules((tmp_path / "k.yaml").read_text(encoding="utf-8"), "k.yaml")
    assert rules.component("C_0603_1608Metric").size == (32, 16)
    shared = _write(tmp_path / "dup.csv", "Designator,Footprint,Mid X,Mid Y,Layer,Rotation\nR1,R0402,10,10,Top,0\n"
                    "R1,R0402,20,10,Top,0\nR2,R0402,30,10,Top,0\n,R0402,40,10,Top,0\nR1,R0402,5,5,Bottom,0\n")
    with pytest.raises(ValueError, match=r"dup.csv: parts without a reference of their own .*: \(no reference\) at "
                                         r"\(40, 10\); R1 at \(10, 10\) and \(20, 10\); .*annotate the board"):
        import_board(shared, tmp_path / "dup.yaml", 20.0)
    assert not (tmp_path / "dup.yaml").exists()
    _design, bottom = import_board(shared, tmp_path / "dup-bottom.yaml", 20.0, side="bottom")  # R1 once there
    assert [f.ref for f in bottom.fates if f.inspected] == ["R1"]
    twice = _write(tmp_path / "twice.csv", "Designator,Footprint,Mid X,Mid Y,Layer,Rotation\nC1,C0402,10,10,Bottom,0\n"
                   "C1,C0402,20,10,Bottom,0\n")
    with pytest.raises(ValueError, match=r"C1 at \(10, 10\) and \(20, 10\)"):  # the file's places, not the mirror's
        import_board(twice, tmp_path / "twice.yaml", 20.0, side="bottom")


def test_kicads_negated_bottom_x_is_read_as_the_board_has_it(tmp_path: Path) -> None:
    # KiCad 6 wrote every bottom part's x negated (later KiCads on an option): its signs say so, and a note tells
    negated = _write(tmp_path / "k6.pos", _kicad_pos(False).replace("  25.4000", " -25.4000"))
    design = read_centroid(negated)
    assert [p.x_mm for p in design.parts] == [12.7, 25.4, 38.1] and "read negated" in design.notes[0]
    _write(tmp_path / "as-is.yaml", "bottom_x: as-is\n")  # a profile may say only that
    assert read_centroid(negated, load_profile(tmp_path / "as-is.yaml")).parts[1].x_mm == -25.4
    # a bottom-only file cannot show it: read as written, and the note asks
    bottom = _write(tmp_path / "b.pos", "\n".join(line for line in _kicad_pos(False).replace(
        "  25.4000", " -25.4000").splitlines() if " top" not in line) + "\n")
    design = read_centroid(bottom)
    assert [p.x_mm for p in design.parts] == [-25.4] and "bottom_x: negated" in design.notes[0]
    _write(tmp_path / "negated.yaml", "bottom_x: negated\n")
    assert read_centroid(bottom, load_profile(tmp_path / "negated.yaml")).parts[0].x_mm == 25.4
    _write(tmp_path / "bad.yaml", "bottom_x: mirrored\n")
    with pytest.raises(ConfigError, match="bottom_x.*one of as-is, negated"):
        load_profile(tmp_path / "bad.yaml")


def test_parts_a_placement_file_leaves_off_are_not_inspected(tmp_path: Path) -> None:
    """A variant's DNP parts stay in many placement files: said by a DNP or populate column, or by the value. Each
    is left out as not placed (inspected, it would be flagged missing on every board); `NPN` and `10uF NP` are values
    of placed parts, and a column saying yes is placed."""
    table = _write(tmp_path / "jlc.csv",
                   "Designator,Val,Package,Mid X,Mid Y,Rotation,Layer,DNP\n"
                   "R1,10k,R0402,1,1,0,T,\nR2,10k,R0402,3,1,0,T,yes\nR3,DNP,R0402,5,1,0,T,\n"
                   "R4,10k DNF,R0402,7,1,0,T,no\nQ1,NPN,SOT23-3,9,1,0,T,\nC1,10uF NP,C0805,11,1,0,T,\n")
    fates = {p.ref: p.excluded for p in read_centroid(table).parts}
    assert fates == {"R1": None, "R2": "not placed (its DNP column says so)",
                     "R3": "not placed (its value says 'DNP')", "R4": "not placed (its value says '10k DNF')",
                     "Q1": None, "C1": None}
    fitted = _write(tmp_path / "fitted.csv", "Ref,X,Y,Rot,Fitted\nR1,1,1,0,Yes\nR2,3,1,0,No\nR3,5,1,0,Not fitted\n")
    assert [p.excluded for p in read_centroid(fitted).parts] == [
        None, "not placed (its populate column says no)", "not placed (its populate column says no)"]
    eagle = _write(tmp_path / "b.mnt", "R1 1.0 1.0 0 10k R0402\nR2 3.0 1.0 0 DNP R0402\n")
    assert [p.excluded for p in read_centroid(eagle).parts] == [None, "not placed (its value says 'DNP')"]
    out = tmp_path / "b.yaml"
    plant = _write(tmp_path / "plant.yaml", "packages:\n  SOT23-3: {class: sot, body: [2.9, 2.4]}\n")
    _design, imported = import_board(table, out, 20.0, library=plant)
    assert {f.ref: f.inspected for f in imported.fates if f.ref.startswith("R")} == {
        "R1": True, "R2": False, "R3": False, "R4": False}
