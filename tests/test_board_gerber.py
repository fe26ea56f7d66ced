"""A placement file with the board's fabrication Gerbers beside it: each part's pads and the board's edge read from
KiCad 9's own Gerber exports (tests/cad/make_gerbers_kicad9.py), checked against the board file they came from."""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from inspector.board.centroid import read_centroid
from inspector.board.design import CadError, PlacedPart
from inspector.board.gerber import read_gerbers
from inspector.board.gerber_parts import with_gerbers
from inspector.board.importing import read_design
from inspector.board.kicad import read_kicad
from inspector.board.library import load_library
from inspector.board.to_rules import _window

CAD = Path(__file__).parent / "cad"
BOARD = CAD / "bodies-kicad9.kicad_pcb"
POS = CAD / "bodies-kicad9-pos.csv"
X2 = CAD / "bodies-kicad9-gerbers.zip"
RS274X = CAD / "bodies-kicad9-gerbers-rs274x.zip"


def _pad_window(part: PlacedPart, y_up: bool) -> tuple[float, ...]:
    """The part's window from its pads alone (image frame, mm): the board file's bodies are its drawings, the
    placement file's the library's, so only the pads are compared."""
    window = _window(replace(part, body=None), y_up)
    assert window is not None, part.ref
    return window


def _matching(design, truth) -> set[str]:  # noqa: ANN001
    """The parts whose pads' window lies within 0.02 mm of the board file's, in place and size."""
    board = {p.ref: p for p in truth.parts}
    return {p.ref for p in design.parts if p.pads and all(
        abs(a - b) <= 0.02 for a, b in zip(_pad_window(p, design.y_up), _pad_window(board[p.ref], truth.y_up)))}


def _edited_pos(path: Path, edit: Callable[[int, list[str]], None]) -> Path:
    """KiCad's placement file written to `path` with each part's row edited in place: edit(its index, its cells;
    PosX at 3, PosY at 4, Rot at 5)."""
    lines = POS.read_text().splitlines()
    out = [lines[0]]
    for n, line in enumerate(lines[1:]):
        cells = line.split(",")
        edit(n, cells)
        out.append(",".join(cells))
    path.write_text("\n".join(out) + "\n")
    return path


def _moved(cells: list[str], dx: float, dy: float = 0.0) -> None:
    cells[3], cells[4] = f"{float(cells[3]) + dx:.6f}", f"{float(cells[4]) + dy:.6f}"


def _shifted_pos(tmp_path: Path, dx: float, dy: float) -> Path:
    """KiCad's placement file with every part moved by (dx, dy) mm, as a file written from another origin."""
    return _edited_pos(tmp_path / "moved-pos.csv", lambda _n, cells: _moved(cells, dx, dy))


def test_x2_gerbers_give_every_part_its_own_pads_and_the_board_its_edge() -> None:
    truth = read_kicad(BOARD)
    gerbers = read_gerbers(X2)
    assert gerbers.attributed
    design = with_gerbers(read_centroid(POS), gerbers, load_library())
    assert design.format.endswith("with Gerbers")
    assert any("by the parts the Gerbers name" in n and "16 of 16 parts" in n for n in design.notes), design.notes
    # every part on a quarter turn, both sides, through-hole or SMD: its pads where the board file has them
    assert _matching(design, truth) == {p.ref for p in truth.parts} - {"U3"}
    by_ref = {p.ref: p for p in design.parts}
    # U3, at 45 degrees, is where it is (a Gerber flash's box is the turned pad's box, so its pads read larger: a
    # part off a quarter turn is listed, not inspected)
    u3 = _pad_window(by_ref["U3"], True)
    assert u3[:2] == pytest.approx(_pad_window(next(p for p in truth.parts if p.ref == "U3"), False)[:2], abs=0.02)
    assert by_ref["D1"].through_hole and by_ref["J2"].through_hole and not by_ref["U1"].through_hole
    assert len(by_ref["J1"].pads) == 6  # the JST's two mounting pads with its four pins
    # the board's edge: the board file's 56 x 42 mm outline, y up (the middle of the edge's strokes)
    assert design.outline == pytest.approx((0.0, -42.0, 56.0, 0.0), abs=0.001)
    # a package the library sizes keeps its body; one it does not is windowed by its pads, and said so
    assert by_ref["U2"].body == (-1.5, -1.5, 1.5, 1.5)
    assert any("windows are their pads alone" in n and "C2" in n for n in design.notes), design.notes


def test_plain_rs274x_pads_go_to_parts_by_place() -> None:
    truth = read_kicad(BOARD)
    gerbers = read_gerbers(RS274X)
    assert not gerbers.attributed
    design = with_gerbers(read_centroid(POS), gerbers, load_library())
    assert any("by place" in n for n in design.notes), design.notes
    matching = _matching(design, truth)
    # every part on a quarter turn: those the library sizes, the unsized ones placed by their centre, and J2, a pin
    # header placed by its pin 1, whose far pin went to the chip beside it (C3) before its name was read
    # (`PinHeader_1x04_P2.54mm`: four pins a column, pad_fields.py)
    assert {"R1", "R2", "C1", "U1", "U2", "U4", "U5", "Q1", "Q2", "J1", "C2", "C4", "D1", "J2", "C3"} <= matching


def test_gerbers_from_another_origin_are_moved_onto_the_placement_file(tmp_path: Path) -> None:
    truth = read_kicad(BOARD)
    moved = _shifted_pos(tmp_path, 12.5, -7.25)
    design = with_gerbers(read_centroid(moved), read_gerbers(X2), load_library())
    assert any("origin is -12.500, 7.250 mm from the placement file's" in n for n in design.notes), design.notes
    shifted = replace(truth, parts=[replace(p, x_mm=p.x_mm + 12.5, y_mm=p.y_mm + 7.25) for p in truth.parts])
    assert _matching(design, shifted) == {p.ref for p in truth.parts} - {"U3"}
    # without names, a placement file relative to the board's lower-left corner (the drill origin's usual place)
    corner = read_gerbers(RS274X).outline
    design = with_gerbers(read_centroid(_shifted_pos(tmp_path, -corner[0], -corner[1])), read_gerbers(RS274X),
                          load_library())
    assert any("origin is" in n for n in design.notes) and design.outline[0] == pytest.approx(0.0)


def test_gerbers_of_another_board_or_origin_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(CadError, match="do not share an origin"):
        with_gerbers(read_centroid(_shifted_pos(tmp_path, 31.0, 17.0)), read_gerbers(RS274X), load_library())
    # the parts named in the Gerbers at no one offset from the placement file's: not the same board
    mixed = _edited_pos(tmp_path / "mixed.csv", lambda n, cells: _moved(cells, 3.0 * n))
    with pytest.raises(CadError, match="no one offset"):
        with_gerbers(read_centroid(mixed), read_gerbers(X2), load_library())
    with pytest.raises(ValueError, match="a KiCad board holds its own pads and outline: leave the Gerbers out"):
        read_design(BOARD, None, gerber=X2)
    (tmp_path / "broken.kicad_pcb").write_text("(kicad_pcb (version")  # refused by its kind, before it is read
    with pytest.raises(ValueError, match="leave the Gerbers out"):
        read_design(tmp_path / "broken.kicad_pcb", None, gerber=X2)
    with zipfile.ZipFile(tmp_path / "notes.zip", "w") as z:
        z.writestr("readme.txt", "not a Gerber\n")
    with pytest.raises(CadError, match="notes.zip"):
        read_gerbers(tmp_path / "notes.zip")
    with pytest.raises(CadError, match="no such Gerber folder"):
        read_gerbers(tmp_path / "missing")


def test_board_import_with_gerbers_writes_a_rule_set_the_line_loads(tmp_path: Path) -> None:
    out = tmp_path / "b.yaml"
    r = subprocess.run([sys.executable, "-m", "inspector.cli", "board", "import", str(POS), "--gerber", str(X2),
                        "--out", str(out), "--px-per-mm", "10", "--json", str(tmp_path / "b.json")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "with Gerbers" in r.stdout and "pads from the Gerbers" in r.stdout
    parts = {p["ref"]: p for p in json.loads((tmp_path / "b.json").read_text())["parts"]}
    # the top's 11 parts: U3 (45 degrees) listed, the rest inspected; the placement file alone windows fewer
    assert {ref for ref, p in parts.items() if p["inspected"]} == {"U1", "C3", "Q1", "C1", "R1", "J1", "U2", "C2",
                                                                 "D1", "J2"}
    assert "pads:" in out.read_text()


def test_the_library_body_is_laid_on_the_pads_the_gerbers_give(tmp_path: Path) -> None:
    """A header placed by its pin 1 gets its body about its pads, not about the pin; a chip whose placement file
    counts its zero a quarter from the library's gets its body along its two terminals, not across them."""
    plant = tmp_path / "plant.yaml"
    plant.write_text("packages:\n  PinHeader_1x04_P2.54mm_Vertical: {class: connector, body: [2.54, 10.16]}\n",
                     encoding="utf-8")

    def quarter_on(_n: int, cells: list[str]) -> None:  # R1 written a quarter turn on from KiCad's zero
        if cells[0] == '"R1"':
            cells[5] = f"{float(cells[5]) + 90:.6f}"
    turned = _edited_pos(tmp_path / "turned.csv", quarter_on)
    design = with_gerbers(read_centroid(turned), read_gerbers(X2), load_library(plant))
    by_ref = {p.ref: p for p in design.parts}
    j2 = by_ref["J2"]
    pads_x = sorted({round(q.x, 2) for q in j2.pads}) + [0.0]
    pads_y = sorted({round(q.y, 2) for q in j2.pads}) + [0.0]
    assert (0.0, 0.0) in {(round(q.x, 2), round(q.y, 2)) for q in j2.pads}  # placed by its pin 1
    centre = ((j2.body[0] + j2.body[2]) / 2, (j2.body[1] + j2.body[3]) / 2)
    assert centre == pytest.approx(((min(pads_x) + max(pads_x)) / 2, (min(pads_y) + max(pads_y)) / 2), abs=0.01)
    r1 = by_ref["R1"]
    w, h = r1.body[2] - r1.body[0], r1.body[3] - r1.body[1]
    along_x = abs(r1.pads[0].x - r1.pads[1].x) > abs(r1.pads[0].y - r1.pads[1].y)
    assert (w > h) == along_x and {round(w, 2), round(h, 2)} == {1.6, 0.8}


X3 = CAD / "bodies-kicad9-gerbers-x3.zip"


def test_a_gerber_x3_set_imports_alone_from_its_component_layers(tmp_path: Path) -> None:
    """A set with X3's component layers holds its placement: `board import SET` reads the parts from them and their
    pads from the set's copper, each where the board file has it (KiCad writes a bottom part's X3 rotation 180
    degrees from its board file's: the pads, read in the same frame, land right either way)."""
    truth = read_kicad(BOARD)
    design = read_design(X3, None)
    assert design.format == "Gerber X3 component layers with Gerbers"
    by_ref = {p.ref: p for p in design.parts}
    assert set(by_ref) == {p.ref for p in truth.parts}
    assert {p.ref for p in design.parts if p.side == "bottom"} == {"U5", "C4", "U4", "R2", "Q2"}
    assert by_ref["U1"].package == "SOIC-8_3.9x4.9mm_P1.27mm" and by_ref["J2"].through_hole
    assert _matching(design, truth) == {p.ref for p in truth.parts} - {"U3"}
    out = tmp_path / "x3.yaml"
    r = subprocess.run([sys.executable, "-m", "inspector.cli", "board", "import", str(X3), "--out", str(out),
                        "--px-per-mm", "10", "--side", "bottom"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Gerber X3 component layers with Gerbers; 16 parts, 5 inspected (bottom side)" in r.stdout
    # a component layer that cannot be read is named; a zip of other files is not taken for a Gerber X3 set
    with zipfile.ZipFile(X3) as z, zipfile.ZipFile(tmp_path / "bad.zip", "w") as bad:
        for item in z.infolist():
            text = z.read(item).decode()
            if "top-pos" in item.filename:
                text = text.replace("%TO.CRot,-90*%", "%TO.CRot,minus ninety*%", 1)
            bad.writestr(item, text)
    with pytest.raises(CadError, match=r"top-pos\.gbr: part U1's rotation \(\.CRot\) 'minus ninety'"):
        read_design(tmp_path / "bad.zip", None)
    # a part whose mount is Fiducial is a registration mark
    with zipfile.ZipFile(X3) as z, zipfile.ZipFile(tmp_path / "mark.zip", "w") as marked:
        for item in z.infolist():
            text = z.read(item).decode()
            r1 = "%TO.C,R1*%\n%TO.CFtp,R_0603_1608Metric*%\n%TO.CVal,R_0603_1608Metric*%\n%TO.CMnt,"
            marked.writestr(item, text.replace(r1 + "SMD*%", r1 + "Fiducial*%"))
    assert [p.ref for p in read_design(tmp_path / "mark.zip", None).parts if p.fiducial] == ["R1"]
    with pytest.raises(ValueError, match="without X3 component layers holds no placement: import"):
        read_design(X2, None)


def test_parts_left_off_keep_their_lands_from_their_neighbours(tmp_path: Path) -> None:
    """A row of 0402s 1.2 mm apart in KiCad's plain RS-274X (pads by place, tests/cad/make_dense_kicad9.py): R3 off
    the BOM and C2 not fitted wear no pads, and their lands stay theirs instead of going to R2, R4 and C1 (which
    took them when a part left off claimed none); a placement of designators and places alone, its packages from
    the BOM, comes out the same where the BOM lists R3 (as not fitted: a part no file sizes goes after the sized
    ones, and R2 and R4 would take its lands)."""
    dense = CAD / "dense-kicad9-gerbers-rs274x.zip"
    bom = tmp_path / "bom.csv"
    bom.write_text('Designator,Qty,Value,Footprint,DNP\n"R1,R2,R4-R6",5,10k,Resistor_SMD:R_0402_1005Metric,\n'
                   '"C1,C3,C4",3,100n,Capacitor_SMD:C_0402_1005Metric,\nC2,1,100n,Capacitor_SMD:C_0402_1005Metric,DNP\n')
    design = read_design(CAD / "dense-kicad9-pos.csv", None, gerber=dense, bom=bom)
    pads = {p.ref: len(p.pads) for p in design.parts}
    assert pads == {"C1": 2, "C2": 0, "C3": 2, "C4": 2, "R1": 2, "R2": 2, "R3": 0, "R4": 2, "R5": 2, "R6": 2}
    lines = (CAD / "dense-kicad9-pos.csv").read_text().splitlines()
    cpl = tmp_path / "cpl.csv"  # Ref, PosX, PosY, Rot, Side
    cpl.write_text("\n".join(",".join(c for k, c in enumerate(row.split(",")) if k not in (1, 2)) for row in lines))
    bom.write_text(bom.read_text() + "R3,1,10k,Resistor_SMD:R_0402_1005Metric,DNP\n")
    bare = read_design(cpl, None, gerber=dense, bom=bom)
    assert {p.ref: len(p.pads) for p in bare.parts} == pads
    assert {p.package for p in bare.parts} == {"R_0402_1005Metric", "C_0402_1005Metric"}


@pytest.mark.parametrize("name, field", [
    ("SOIC127P600X175-8N", (6.0, 3.81, False)),  # IPC-7351: two rows 6.00 mm toe to toe, 4 pins a row at 1.27 mm
    ("SOT95P280X145-5N", (2.8, 1.9, False)),  # SOT-23-5: three pins on one side
    ("QFP50P1200X1200X160-100N", (12.0, 12.0, False)),
    ("QFN50P400X400X90-25N", (4.0, 4.0, False)),  # leadless: its body
    ("SON127P800X600X80-9N", (8.0, 6.0, False)),
    ("BGA100C80P10X10_900X900X140", (9.0, 9.0, False)),
    ("SOD3716X135N", (3.7, 1.6, False)),
    ("RESC1005X40N", (1.0, 0.5, False)),
    ("R_Axial_DIN0207_L6.3mm_D2.5mm_P10.16mm_Horizontal", (10.16, 0.0, True)),  # KiCad through-hole: from pin 1
    ("CP_Radial_D5.0mm_P2.00mm", (2.0, 0.0, True)),
    ("DIP-16_W7.62mm", (7.62, 17.78, True)),
    ("PinHeader_2x08_P2.54mm_Vertical", (2.54, 17.78, True)),
    ("R_Array_SIP9", (20.32, 0.0, True)),
    ("SOIC-8_3.9x4.9mm_P1.27mm", None),  # a KiCad SMD name states its plastic (klc_names.py), not its lands
    ("0603", None),
    ("Potentiometer_Bourns_3266W_Vertical", None),
])
def test_a_package_name_says_where_its_lands_lie(name: str, field: tuple | None) -> None:
    from inspector.board.pad_fields import pad_field

    got = pad_field(name)
    assert (None if got is None else (got.w, got.h, got.from_pin_one)) == \
        (None if field is None else pytest.approx(field))


def test_a_through_hole_part_placed_by_its_pin_1_takes_the_pins_its_name_puts_there_not_a_neighbours() -> None:
    """An axial resistor placed by its pin 1 (KiCad's zero), turned, beside a DIP whose pins lie the other way: the
    resistor takes its own far pin, 10.16 mm along its x, though the DIP's lie nearer the other way."""
    from inspector.board.gerber import GerberBoard, GerberPad

    hole = 1.6
    resistor = PlacedPart("R5", "4k7", "R_Axial_DIN0207_L6.3mm_D2.5mm_P10.16mm_Horizontal", 148.0, -64.0, 90.0,
                          "top", mount=None)
    dip = PlacedPart("U2", "", "DIP-8_W7.62mm", 140.38, -71.6, 0.0, "top", mount=None)
    pads = [GerberPad(148.0, -64.0, hole, hole, "top", through_hole=True),  # R5's pin 1 ...
            GerberPad(148.0, -53.84, hole, hole, "top", through_hole=True)]  # ... and 2, 10.16 mm up (x turned 90)
    pads += [GerberPad(140.38 + dx, -71.6 - 2.54 * k, hole, hole, "top", through_hole=True)
             for dx in (0.0, 7.62) for k in range(4)]  # the DIP's: its right row 0.04 mm from R5's x, below it
    design = replace(read_centroid(POS), parts=[resistor, dip])
    placed = with_gerbers(design, GerberBoard("test", pads, None, False), load_library())
    got = {p.ref: sorted((round(q.x, 2), round(q.y, 2)) for q in p.pads) for p in placed.parts}
    assert got["R5"] == [(0.0, 0.0), (10.16, 0.0)] and len(got["U2"]) == 8, got  # its own frame: along its x
    assert all(p.through_hole for p in placed.parts)


def test_copper_drawn_in_pieces_is_one_pad(tmp_path: Path) -> None:
    """Copper drawn inside a pad (a via in it, a macro-less rounded pad's flash over its outline) is that pad, not
    another: KiCad's plain set with a 0.3 mm flash added in the middle of one SMD pad and of one through-hole pad
    reads the same pads as before."""
    before = read_gerbers(RS274X).pads
    smd = next(q for q in before if q.side == "top" and not q.through_hole and min(q.w, q.h) > 0.5)
    tht = next(q for q in before if q.side == "top" and q.through_hole)
    with zipfile.ZipFile(RS274X) as z:
        files = {n: z.read(n) for n in z.namelist()}
    name = next(n for n in files if n.endswith("F_Cu.gtl"))
    flashes = "".join(f"X{round(q.x * 1e6)}Y{round(q.y * 1e6)}D03*\n" for q in (smd, tht))
    files[name] = files[name].replace(b"M02*", f"%ADD99C,0.300000*%\nD99*\n{flashes}M02*".encode())
    with zipfile.ZipFile(tmp_path / "g.zip", "w") as z:
        for n, data in files.items():
            z.writestr(n, data)
    after = read_gerbers(tmp_path / "g.zip").pads
    assert sorted(after, key=repr) == sorted(before, key=repr)


def test_a_small_chip_does_not_take_a_pad_beside_it_from_a_part_the_library_does_not_size() -> None:
    """An 0402's lands hug its body: a pad 0.9 mm past its end is the unsized sensor's beside it, whose own point
    lies 2.2 mm away (a sized part's pads are given first, and took every pad within 1.5 mm of a body)."""
    from inspector.board.gerber import GerberBoard, GerberPad

    chip = PlacedPart("C7", "100n", "C_0402_1005Metric", 10.0, 10.0, 0.0, "top", mount=None)
    sensor = PlacedPart("U9", "", "ACME_SENSOR_LGA4", 12.4, 10.0, 0.0, "top", mount=None)
    pads = [GerberPad(9.52, 10.0, 0.56, 0.62, "top"), GerberPad(10.48, 10.0, 0.56, 0.62, "top"),  # C7's
            GerberPad(11.4, 10.0, 0.5, 0.5, "top"), GerberPad(13.4, 10.0, 0.5, 0.5, "top"),  # U9's four
            GerberPad(12.4, 11.0, 0.5, 0.5, "top"), GerberPad(12.4, 9.0, 0.5, 0.5, "top")]
    design = replace(read_centroid(POS), parts=[chip, sensor])
    placed = {p.ref: p for p in with_gerbers(design, GerberBoard("test", pads, None, False), load_library()).parts}
    assert len(placed["C7"].pads) == 2 and len(placed["U9"].pads) == 4


def test_a_bottom_parts_through_hole_pads_are_its_own_on_the_top_too() -> None:
    """A header fitted from the bottom has its plated pads on both faces; their top copies were loose pads a
    fiducial on the top beside it took (it lost its mark's size: stm32wb55-dev's FID1 and FID2 were left out)."""
    from inspector.board.gerber import GerberBoard, GerberPad

    header = PlacedPart("J6", "", "PinHeader_1x03_P2.54mm_Vertical", 86.29, -107.94, 0.0, "bottom", mount=None)
    mark = PlacedPart("FID1", "", "Fiducial_1.5mm_Mask3mm", 89.75, -110.25, 0.0, "top", fiducial=True,
                      mount=None)
    pads = [GerberPad(89.75, -110.25, 1.5, 1.5, "top", mask_margin=0.75)]
    pads += [GerberPad(86.29, -107.94 - 2.54 * k, 1.7, 1.7, side, through_hole=True)
             for k in range(3) for side in ("top", "bottom")]
    design = replace(read_centroid(POS), parts=[header, mark])
    placed = {p.ref: p for p in with_gerbers(design, GerberBoard("test", pads, None, False), load_library()).parts}
    assert [(q.w, q.h) for q in placed["FID1"].pads] == [(1.5, 1.5)]
    assert len(placed["J6"].pads) == 3 and placed["J6"].through_hole
