"""A board's bill of materials beside its design: KiCad 9's own BOMs of bodies-kicad9's schematic (grouped and a line
per part), the same parts in Altium's columns saved as .xlsx, .xls and .ods by LibreOffice Calc
(tests/cad/make_bom_kicad9.py, make_bom_workbooks.py), and
BOMs with the faults a plant meets."""
from __future__ import annotations

import json
from pathlib import Path

import openpyxl
import pytest

from inspector.board.bom import designators, load_bom_profile, read_bom
from inspector.board.design import CadError
from inspector.board.importing import read_design
from inspector.board.values import quantity
from inspector.routing.rules import load_rules
from tests.test_board_teach import cli

CAD = Path(__file__).parent / "cad"
POS = CAD / "bodies-kicad9-pos.csv"
GROUPED, FLAT = CAD / "bodies-kicad9-bom.csv", CAD / "bodies-kicad9-bom-flat.csv"
WORKBOOK = CAD / "bodies-kicad9-bom.xlsx"


def _read(path: Path) -> dict[str, tuple[str, bool]]:
    """Each designator's (value, left off) as the BOM says."""
    return {ref: (line.value, line.left_off is not None) for line in read_bom(path).lines for ref in line.refs}


def test_kicads_grouped_and_flat_boms_and_a_workbook_read_alike() -> None:
    grouped = read_bom(GROUPED)
    assert len(grouped.lines) == 10 and grouped.notes == []
    r1 = grouped.by_ref()["R1"]
    assert (r1.refs, r1.quantity, r1.value, r1.package, r1.manufacturer, r1.part_number) == (
        ("R1", "R2"), 2, "10k", "Resistor_SMD:R_0603_1608Metric", "Yageo", "RC0603FR-0710KL")
    assert _read(GROUPED) == _read(FLAT)
    assert len(_read(GROUPED)) == 15 and "J2" not in _read(GROUPED)  # J2 is left out of KiCad's BOM
    assert _read(GROUPED)["U3"] == ("OPA2333", True)  # its DNP column
    # the workbook: a title block above the header, Altium's `Manufacturer Part Number 1`, a Fitted column
    book = read_bom(WORKBOOK)
    assert book.by_ref()["U2"].part_number == "TPS62130RGTR" and book.by_ref()["U2"].where.endswith(":13")
    assert {r: v for r, v in _read(WORKBOOK).items() if r != "J2"} == _read(GROUPED)
    assert _read(WORKBOOK)["J2"] == ("header", True)  # Not Fitted
    # the same workbook saved by LibreOffice Calc as Excel 97's .xls and as OpenDocument's .ods reads alike
    for older in (".xls", ".ods"):
        other = read_bom(WORKBOOK.with_suffix(older))
        assert _read(WORKBOOK.with_suffix(older)) == _read(WORKBOOK) and other.by_ref()["U2"].where.endswith(":13")
        assert [(line.refs, line.package, line.part_number) for line in other.lines] == [
            (line.refs, line.package, line.part_number) for line in book.lines]


def test_designator_lists_and_ranges() -> None:
    assert designators("R1-R4, C7 - C9;D1..D3 U1-A 2-R7 R5-7\tTP10:TP11", "x") == (
        "R1", "R2", "R3", "R4", "C7", "C8", "C9", "D1", "D2", "D3", "U1-A", "2-R7", "R5", "R6", "R7", "TP10", "TP11")
    assert designators("Total:", "x") == designators("(see note 3)", "x") == designators("42", "x") == ()
    with pytest.raises(CadError, match=r"bom.csv:4: designator range 'R9-R3' does not count up"):
        designators("R9-R3", "bom.csv:4")


def test_a_placement_file_through_its_bom(tmp_path: Path) -> None:
    """KiCad's placement file lists every footprint; its BOM leaves J2 off and U3 unfitted: neither is placed, every
    other part carries what was bought for it into the import's JSON."""
    plain = read_design(POS, None)
    design = read_design(POS, None, bom=GROUPED)
    assert design.format == f"{plain.format} with its BOM"
    parts = {p.ref: p for p in design.parts}
    assert parts["U3"].excluded == "not placed (the BOM's DNP column says so)"
    assert parts["J2"].excluded == "not placed (not on the BOM)"
    assert [p.ref for p in design.parts if p.excluded] == ["J2", "U3"]
    assert parts["U2"].bought is not None and parts["U2"].bought.part_number == "TPS62130RGTR"
    assert [p.package for p in design.parts] == [p.package for p in plain.parts]  # the placement's own kept
    assert "1 parts are not on the BOM (bodies-kicad9-bom.csv) and are taken as not placed: J2" in design.notes
    assert "1 parts the BOM lists as not fitted are not placed: U3" in design.notes
    out, doc = tmp_path / "b.yaml", tmp_path / "b.json"  # the board file: its footprints give every body
    r = cli("board", "import", str(CAD / "bodies-kicad9.kicad_pcb"), "--bom", str(GROUPED), "--out", str(out),
            "--px-per-mm", "10", "--json", str(doc))
    assert r.returncode == 0, r.stderr
    fates = {f["ref"]: f for f in json.loads(doc.read_text())["parts"]}
    assert fates["U1"]["inspected"] and (fates["U1"]["manufacturer"], fates["U1"]["part_number"]) == (
        "Texas Instruments", "LM358DR")
    assert not fates["U3"]["inspected"] and fates["U3"]["reason"].startswith("not placed")
    assert "note: 1 parts are not on the BOM" in r.stdout
    assert sorted(r for r, f in fates.items() if f["reason"].startswith("not placed")) == ["J2", "U3"]
    # the rule set names what was bought for each inspected place: a finding's part number (results/cfx.py)
    numbers = load_rules(out).part_numbers
    assert numbers["U1"] == "LM358DR" and set(numbers) == {r for r, f in fates.items() if f["inspected"]}


def test_a_placement_file_without_packages_takes_the_boms(tmp_path: Path) -> None:
    """A CPL of designators and places alone gets each part's package from the workbook, `0603` though the
    spreadsheet holds the number 603 (a chip the library knows by its size); a package the library lacks is asked
    for with what the BOM says of its parts."""
    lines = POS.read_text().splitlines()
    head = lines[0].split(",")
    keep = [head.index(c) for c in ("Ref", "PosX", "PosY", "Rot", "Side")]
    cpl = tmp_path / "cpl.csv"
    cpl.write_text("\n".join(",".join(row.split(",")[k] for k in keep) for row in lines) + "\n")
    design = read_design(cpl, None, bom=WORKBOOK)
    parts = {p.ref: p for p in design.parts}
    assert (parts["R1"].package, parts["C1"].package, parts["Q1"].package) == ("0603", "0805", "SOT-23")
    assert "BOM packages read with the leading zero a spreadsheet drops from a chip size: 603 as 0603, 805 as 0805" \
        in design.notes
    out = tmp_path / "cpl.yaml"
    r = cli("board", "import", str(cpl), "--bom", str(WORKBOOK), "--out", str(out), "--px-per-mm", "10")
    assert r.returncode == 3 and "CASE-D (C2)" in r.stderr  # the library knows no CASE-D: it asks
    asked = (tmp_path / "cpl.packages.yaml").read_text()
    assert "'CASE-D': {class: null}   # C2\n    # BOM: 47uF; Panasonic EEE-FK1C470P; BOM package CASE-D" in asked


def test_a_bom_that_cannot_be_taken_says_why(tmp_path: Path) -> None:
    twice = tmp_path / "twice.csv"
    twice.write_text("Designator,Qty,Value\nR1 R2,2,10k\nR3,1,1k\nR2,1,4k7\n")
    with pytest.raises(CadError, match=r"twice.csv:4: R2 is on the BOM twice \(also .*twice.csv:2\)"):
        read_bom(twice)
    odd = tmp_path / "odd.csv"
    odd.write_text("Teile,Menge\nR1,1\n")
    with pytest.raises(CadError, match="no header row naming the designators"):
        read_bom(odd)
    (tmp_path / "cut.xls").write_bytes(WORKBOOK.with_suffix(".xls").read_bytes()[:600])  # a copy cut short
    with pytest.raises(CadError, match=r"cut.xls: not a .xls workbook calamine can read .*save the BOM again"):
        read_bom(tmp_path / "cut.xls")
    (tmp_path / "fake.xlsx").write_text("Designator,Qty\nR1,1\n")
    with pytest.raises(CadError, match=r"fake.xlsx: not a .xlsx workbook calamine can read"):
        read_bom(tmp_path / "fake.xlsx")
    # the workbook saved with a password (Excel's "Encrypt with Password"): asked to be saved without one
    with pytest.raises(CadError, match=r"bom-locked.xlsx: the workbook is protected by a password; save the BOM "
                                       r"without one \(or as CSV\)"):
        read_bom(CAD / "bodies-kicad9-bom-locked.xlsx")
    (tmp_path / "apple.numbers").write_bytes(b"PK\x03\x04")
    with pytest.raises(CadError, match=r"apple.numbers: a .numbers spreadsheet; export the BOM as .xlsx or CSV"):
        read_bom(tmp_path / "apple.numbers")
    # a quantity its designators do not count, and lines of no part, are noted; the designators are taken
    counted = tmp_path / "counted.csv"
    counted.write_text("Designator;Quantity;Comment\nR1-R4;3;10k\n;1;PCB\nC1;1;DNP\nTotal:;6;\n")
    bom = read_bom(counted)
    assert bom.by_ref()["R4"].quantity == 3 and bom.by_ref()["C1"].left_off == "not placed (the BOM's value says 'DNP')"
    assert bom.notes == [f"2 BOM lines name no designator (the board itself, paste, a total): not parts the line "
                         f"places: {counted}:3, {counted}:5 ('Total:')",
                         f"1 BOM lines state a quantity other than their designators' count, and their designators "
                         f"are taken: {counted}:2 (3 for 4)"]
    # a workbook whose first sheet is a cover page: the sheet with the header is read
    book = openpyxl.Workbook()
    book.active.title = "Cover"
    book.active.append(["Assembly 1234 rev B"])
    sheet = book.create_sheet("BOM")
    sheet.append(["Item", "Qty", "Reference", "Part"])
    sheet.append([1, 2.0, "R1, R2", "10k"])
    book.save(tmp_path / "two.xlsx")
    line = read_bom(tmp_path / "two.xlsx").lines[0]
    assert (line.where, line.refs, line.quantity, line.value) == (f"{tmp_path / 'two.xlsx'}[BOM]:2", ("R1", "R2"), 2,
                                                                    "10k")


def test_designators_the_design_lacks_and_a_variant_disagreeing_are_noted(tmp_path: Path) -> None:
    """The BOM lists parts the placement has no place for (noted, not inspectable), and fits U3, which the placement
    marks DNP (left off, as the placement says, and noted)."""
    bom = tmp_path / "bom.csv"
    bom.write_text(GROUPED.read_text().replace('"J1"', '"J1,J7,SW1"').replace('"1","DNP"', '"1",""'))
    pos = tmp_path / "pos.csv"
    pos.write_text(POS.read_text().replace('"U3","SOIC-8_3.9x4.9mm_P1.27mm"', '"U3","DNP"'))
    design = read_design(pos, None, bom=bom)
    assert {p.ref: p.excluded for p in design.parts if p.excluded} == {
        "J2": "not placed (not on the BOM)", "U3": "not placed (its value says 'DNP')"}
    assert ("2 fitted BOM designators have no place in the design, so the line cannot inspect them (fitted by hand "
            "or after the line, or the BOM is another revision's): J7, SW1") in design.notes
    assert ("1 parts the BOM fits are left off as the design says (a variant the BOM does not share?): U3"
            in design.notes)


def test_a_bom_of_its_own_column_names_reads_by_its_profile(tmp_path: Path) -> None:
    """An ERP's BOM (German names, semicolons, cp1252): refused with the advice to save a profile, then read by it;
    a profile naming a column the BOM lacks, or a field the BOM has none of, says so."""
    erp = tmp_path / "erp.csv"
    erp.write_bytes("Pos.;Menge;Materialnummer;Bezeichnung;Einbauort\n10;2;4711-10K;Widerstand 10 k ±1 %;R1, R2\n"
                    "20;1;4711-LM358;OPV;U1\n".encode("cp1252"))
    with pytest.raises(CadError, match=r"erp.csv: no header row naming the designators .*--bom-profile FILE"):
        read_bom(erp)
    profile = tmp_path / "erp.yaml"
    profile.write_text("columns: {refs: Einbauort, quantity: Menge, part_number: Materialnummer, value: Bezeichnung}\n")
    named = load_bom_profile(profile)
    r1 = read_bom(erp, named).by_ref()["R2"]
    assert (r1.refs, r1.quantity, r1.part_number, r1.value) == (("R1", "R2"), 2, "4711-10K", "Widerstand 10 k ±1 %")
    with pytest.raises(CadError, match=r"erp.csv: no header row holding the columns its profile names \('Ort'"):
        read_bom(erp, {"refs": "Ort"})
    (tmp_path / "bad.yaml").write_text("columns: {refs: Einbauort, colour: Farbe}\n")
    with pytest.raises(ValueError, match=r"bad.yaml.*colour"):
        load_bom_profile(tmp_path / "bad.yaml")
    out = tmp_path / "b.yaml"
    r = cli("board", "import", str(POS), "--bom-profile", str(profile), "--out", str(out), "--px-per-mm", "10")
    assert r.returncode != 0 and "no BOM is given" in r.stderr


@pytest.mark.parametrize(("text", "kind", "value"), [
    ("4K7", "ohm", 4700.0), ("Resistor, 100K", "ohm", 1e5), ("10 kOhm", "ohm", 1e4), ("10kΩ 1%", "ohm", 1e4),
    ("5R1", "ohm", 5.1), ("470", "ohm", 470.0), ("0.1uF", "F", 1e-7), ("Ceramic capacitor, 100 nF", "F", 1e-7),
    ("Multi-layer ceramic capacitor, 1 uF, 6.3 V, X5R", "F", 1e-6), ("4u7", "F", 4.7e-6), ("10uF 6.3V", "F", 1e-5),
    ("Fixed inductor, 39 nH, 200 mA, 550 MOhm", "H", 3.9e-8), ("C_0603_1608Metric", "F", None), ("DNP", "ohm", None),
    ("Ferrite bead", "H", None), ("10k or 4K7", "ohm", None)])
def test_values_read_as_quantities(text: str, kind: str, value: float | None) -> None:
    assert quantity(text, kind) == (pytest.approx(value) if value is not None else None)


def test_values_the_placement_and_the_bom_disagree_on_are_noted(tmp_path: Path) -> None:
    pos = tmp_path / "pos.csv"
    pos.write_text("Designator,Comment,Mid X,Mid Y,Rotation\nR1,4K7,1,1,0\nR2,5K1,5,1,0\nC1,0.1uF,9,1,0\n"
                   "U1,STM32,14,1,0\n")
    bom = tmp_path / "bom.csv"
    bom.write_text('Designator,Quantity,Value\nR1,1,"Resistor, 4.7 kOhm"\nR2,1,"Resistor, 4K7"\n'
                   'C1,1,"Ceramic capacitor, 100 nF"\nU1,1,STM32L4\n')
    design = read_design(pos, None, bom=bom)
    assert [n for n in design.notes if "values" in n] == [
        "1 parts' values differ between the placement and the BOM (the BOM's is what is bought and fitted: check "
        "which file is out of date): R2 (5K1 in the placement, 'Resistor, 4K7' on the BOM)"]


def test_a_panel_reads_each_boards_parts_through_the_one_bom(tmp_path: Path) -> None:
    """A panel's copies (parts k-REF) are each the board its BOM describes: J1 off the BOM and R3 not fitted are
    so on every board, the fiducial stays a mark, R2 stays off as the job says (its .no_pop), and the BOM's R2
    line, fitted, is noted as disagreeing."""
    from tests.test_board_odbpp import PANEL, write_job

    job = write_job(tmp_path, {"steps/panel/stephdr": PANEL})
    bom = tmp_path / "bom.csv"
    bom.write_text("Designator,Qty,Value,DNP\nR1,1,10k,\nR2,1,1k,\nR3,1,10k,DNP\nU1,1,LM358,\nC1,1,100n,\n")
    design = read_design(job, None, step="panel", bom=bom)
    fates = {p.ref: p.excluded for p in design.parts}
    for k in (1, 2, 3):
        assert fates[f"{k}-J1"] == "not placed (not on the BOM)" and fates[f"{k}-FID1"] is None
        assert fates[f"{k}-R3"] == "not placed (the BOM's DNP column says so)"
        assert fates[f"{k}-R2"] == "not placed (its .no_pop attribute)" and fates[f"{k}-U1"] is None
    assert "3 parts are not on the BOM (bom.csv) and are taken as not placed: 1-J1, 2-J1, 3-J1" in design.notes
    assert not any("no place in the design" in n for n in design.notes)
    assert ("3 parts the BOM fits are left off as the design says (a variant the BOM does not share?): 1-R2, 2-R2, "
            "3-R2") in design.notes


@pytest.mark.parametrize(("header", "row", "expect"), [
    # JLC's assembly BOM with a maker's number beside LCSC's (a supplier's number, not read)
    ("Comment,Designator,Footprint,LCSC Part #,Mfg Part No.", '10k,"R1,R2",R0402,C25744,RC0402FR-0710KL',
     ("10k", "R0402", "RC0402FR-0710KL", None)),
    # EasyEDA's: Name is the value, Manufacturer Part the number
    ("ID,Name,Designator,Footprint,Quantity,Manufacturer Part,Manufacturer,Supplier,Supplier Part",
     "1,10k,R1 R2,R0402,2,RC0402FR-0710KL,YAGEO,LCSC,C25744", ("10k", "R0402", "RC0402FR-0710KL", 2)),
    # Eagle's bom.ulp by values, semicolons
    ("Qty;Value;Device;Package;Parts;Description", '"2";"10k";"R-EU_R0402";"R0402";"R1, R2";"RESISTOR"',
     ("10k", "R0402", "", 2)),
    # OrCAD's
    ("Item,Quantity,Reference,Part,PCB Footprint,Mfr. Part #", "1,2,R1-R2,10k,R0402,RC0402FR-0710KL",
     ("10k", "R0402", "RC0402FR-0710KL", 2)),
    # Proteus's
    ("Category,Quantity,References,Value,Order Code,Manufacturer P/N", "Resistors,2,R1-2,10k,,RC0402FR-0710KL",
     ("10k", "", "RC0402FR-0710KL", 2)),
])
def test_bom_layouts_of_the_usual_tools(tmp_path: Path, header: str, row: str, expect: tuple) -> None:
    bom = tmp_path / "bom.csv"
    bom.write_text(f"{header}\n{row}\n")
    line = read_bom(bom).by_ref()["R2"]
    assert line.refs == ("R1", "R2") and (line.value, line.package, line.part_number, line.quantity) == expect


def test_a_package_the_library_does_not_know_is_known_by_the_boms_name_for_it(tmp_path: Path) -> None:
    """The board names its transistors' footprint in a plant's own library (`MyLib:Q_SMALL`), which the product's
    library does not know; the BOM calls that package SOT-23, which it does: the import takes the class from it,
    keeps the footprint's name as the type, and says so. Without the BOM, it asks."""
    board = tmp_path / "b.kicad_pcb"
    board.write_text((CAD / "bodies-kicad9.kicad_pcb").read_text().replace('(footprint "SOT-23"',
                                                                           '(footprint "MyLib:Q_SMALL"'))
    out = tmp_path / "b.yaml"
    r = cli("board", "import", str(board), "--out", str(out), "--px-per-mm", "10")
    assert r.returncode == 3 and "Q_SMALL (Q1)" in r.stderr
    r = cli("board", "import", str(board), "--bom", str(GROUPED), "--out", str(out), "--px-per-mm", "10")
    assert r.returncode == 0, r.stderr
    assert "note: packages the library knows by the BOM's name for them: Q_SMALL as SOT-23 (sot)" in r.stdout
    assert load_rules(out).component("Q_SMALL").shape == "sot23"


def test_a_plant_library_knows_parts_by_their_part_number(tmp_path: Path) -> None:
    """A plant library's `parts:` section knows what it buys by the BOM's part number: a package the library lacks
    (the workbook's CASE-D, C2 and C4's) is answered once for every board that buys the part, body and all; and the
    part number wins over the package (a ferrite bead designated L, an inductor by its letter), so the package's
    parts of two classes become two types. The import names the parts known so; a class no library defines is
    refused."""
    lines = POS.read_text().splitlines()
    head = lines[0].split(",")
    keep = [head.index(c) for c in ("Ref", "PosX", "PosY", "Rot", "Side")]
    cpl = tmp_path / "cpl.csv"
    cpl.write_text("\n".join(",".join(row.split(",")[k] for k in keep) for row in lines) + "\n")
    plant = tmp_path / "plant.yaml"
    plant.write_text("parts:\n  EEE-FK1C470P: {class: electrolytic, body: [6.6, 6.6]}\n"
                     "  LM358DR: {class: soic, body: [6.0, 4.9]}\n  MMBT3904LT1G: {class: sot, body: [2.9, 2.4]}\n"
                     "  TPS62130RGTR: {class: qfn-qfp, body: [3.0, 3.0]}\n  WP7113ID: {class: led, body: [5.8, 5.8]}\n"
                     "  SM04B-SRSS-TB(LF)(SN): {class: connector, body: [6.0, 4.3]}\n")
    out, doc = tmp_path / "cpl.yaml", tmp_path / "cpl.json"
    r = cli("board", "import", str(cpl), "--bom", str(WORKBOOK), "--library", str(plant), "--out", str(out),
            "--px-per-mm", "10", "--json", str(doc))
    assert r.returncode == 0, r.stderr
    assert ("note: parts the library knows by their part number: EEE-FK1C470P (electrolytic): C2, C4; LM358DR "
            "(soic): U1, U4; MMBT3904LT1G (sot): Q1, Q2; SM04B-SRSS-TB(LF)(SN) (connector): J1; TPS62130RGTR "
            "(qfn-qfp): U2, U5; WP7113ID (led): D1") in r.stdout
    fates = {f["ref"]: f for f in json.loads(doc.read_text())["parts"]}
    assert fates["C2"]["inspected"] and fates["C2"]["type"] == "CASE-D"
    size = load_rules(out).component("CASE-D").size
    assert size == (66, 66)  # 6.6 mm at 10 px/mm
    beads = tmp_path / "beads.csv"
    beads.write_text("Designator,Mid X,Mid Y,Layer,Rotation,Footprint\nL1,5,5,Top,0,0603\nL2,9,5,Top,0,0603\n")
    bom = tmp_path / "beads-bom.csv"
    bom.write_text("Designator,Qty,Value,Manufacturer Part Number\nL1,1,2.2uH,LQM18PN2R2MFRL\n"
                   "L2,1,220R@100MHz,BLM18PG221SN1D\n")
    plant.write_text("parts:\n  BLM18PG221SN1D: ferrite\n")
    r = cli("board", "import", str(beads), "--bom", str(bom), "--library", str(plant), "--out", str(out),
            "--px-per-mm", "20", "--json", str(doc))
    assert r.returncode == 0, r.stderr
    assert {f["ref"]: f["type"] for f in json.loads(doc.read_text())["parts"]} == {
        "L1": "0603_chip-inductor", "L2": "0603_ferrite"}
    plant.write_text("parts:\n  BLM18PG221SN1D: {class: bead}\n")
    r = cli("board", "import", str(beads), "--bom", str(bom), "--library", str(plant), "--out", str(out),
            "--px-per-mm", "20")
    assert r.returncode != 0 and "names package classes no library defines: bead" in r.stderr
