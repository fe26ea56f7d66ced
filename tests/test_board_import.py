"""`inspector board import`: real CAD and centroid files in their own formats -> a rule set the line loads, and
every part's fate (inspector/board)."""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from inspector.board.centroid import load_profile, read_centroid
from inspector.board.importing import read_design
from inspector.board.kicad import CadError, read_kicad
from inspector.board.library import load_library
from inspector.board.to_rules import UnknownPackages, import_design
from inspector.routing.rules import load_rules, parse_rules
from inspector.yamlio import ConfigError

from .eagle_files import eagle_board

BOARDS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "boards"
STM32 = BOARDS / "stm32wb55-dev" / "stm32wb55-dev.kicad_pcb"
SNAPPER = BOARDS / "snappergps" / "snappergps_1_0_0.mnt"
needs_boards = pytest.mark.skipif(not STM32.is_file() or not SNAPPER.is_file(),
                                  reason="the shared boards (../shared/data/boards) are not here")

# a KiCad 5 board as pcbnew 5 writes it: `module`, fp_text for reference and value, pads turned with the module
KICAD5 = """(kicad_pcb (version 20171130) (host pcbnew 5.1.9)
  (general (thickness 1.6))
  (gr_line (start 0 0) (end 40 0) (layer Edge.Cuts) (width 0.05))
  (gr_line (start 40 0) (end 40 30) (layer Edge.Cuts) (width 0.05))
  (gr_line (start 40 30) (end 0 30) (layer Edge.Cuts) (width 0.05))
  (gr_line (start 0 30) (end 0 0) (layer Edge.Cuts) (width 0.05))
  (module Resistor_SMD:R_0805_2012Metric (layer F.Cu) (tedit 5B36C52B) (tstamp 5C1A2F3E)
    (at 10 8 90)
    (attr smd)
    (fp_text reference R1 (at 0 -1.65 90) (layer F.SilkS) (effects (font (size 1 1) (thickness 0.15))))
    (fp_text value 10k (at 0 1.65 90) (layer F.Fab) (effects (font (size 1 1) (thickness 0.15))))
    (fp_line (start -1 0.6) (end -1 -0.6) (layer F.Fab) (width 0.1))
    (fp_line (start 1 -0.6) (end 1 0.6) (layer F.Fab) (width 0.1))
    (pad 1 smd roundrect (at -0.9375 0 90) (size 0.975 1.4) (layers F.Cu F.Paste F.Mask) (roundrect_rratio 0.25))
    (pad 2 smd roundrect (at 0.9375 0 90) (size 0.975 1.4) (layers F.Cu F.Paste F.Mask) (roundrect_rratio 0.25))
  )
  (module Package_SO:SOIC-8_3.9x4.9mm_P1.27mm (layer F.Cu) (tedit 5D9F72B1) (tstamp 5C1A2F40)
    (at 25 15)
    (attr smd)
    (fp_text reference U1 (at 0 -3.4) (layer F.SilkS) (effects (font (size 1 1) (thickness 0.15))))
    (fp_text value NE555 (at 0 3.4) (layer F.Fab) (effects (font (size 1 1) (thickness 0.15))))
    (fp_line (start -1.95 -2.45) (end 1.95 -2.45) (layer F.Fab) (width 0.1))
    (fp_line (start 1.95 2.45) (end -1.95 2.45) (layer F.Fab) (width 0.1))
    (pad 1 smd roundrect (at -2.475 -1.905) (size 1.95 0.6) (layers F.Cu F.Paste F.Mask))
    (pad 8 smd roundrect (at 2.475 -1.905) (size 1.95 0.6) (layers F.Cu F.Paste F.Mask))
  )
  (module Capacitor_SMD:C_0603_1608Metric (layer F.Cu) (tedit 5B301BBE) (tstamp 5C1A2F42)
    (at 30 25 45)
    (attr smd)
    (fp_text reference C1 (at 0 -1.43 45) (layer F.SilkS) (effects (font (size 1 1) (thickness 0.15))))
    (fp_text value 100n (at 0 1.43 45) (layer F.Fab) (effects (font (size 1 1) (thickness 0.15))))
    (pad 1 smd roundrect (at -0.7875 0 45) (size 0.875 0.95) (layers F.Cu F.Paste F.Mask))
    (pad 2 smd roundrect (at 0.7875 0 45) (size 0.875 0.95) (layers F.Cu F.Paste F.Mask))
  )
  (module Capacitor_SMD:C_0603_1608Metric (layer B.Cu) (tedit 5B301BBE) (tstamp 5C1A2F44)
    (at 20 20 180)
    (attr smd)
    (fp_text reference C2 (at 0 1.43) (layer B.SilkS) (effects (font (size 1 1) (thickness 0.15)) (justify mirror)))
    (fp_text value 1u (at 0 -1.43) (layer B.Fab) (effects (font (size 1 1) (thickness 0.15)) (justify mirror)))
    (pad 1 smd roundrect (at -0.7875 0 180) (size 0.875 0.95) (layers B.Cu B.Paste B.Mask))
    (pad 2 smd roundrect (at 0.7875 0 180) (size 0.875 0.95) (layers B.Cu B.Paste B.Mask))
  )
  (module Connector_PinHeader_2.54mm:PinHeader_1x02_P2.54mm_Vertical (layer F.Cu) (tedit 59FED5CC)
    (at 8 20)
    (fp_text reference J1 (at 0 -2.33) (layer F.SilkS) (effects (font (size 1 1) (thickness 0.15))))
    (fp_text value Conn_01x02 (at 0 4.87) (layer F.Fab) (effects (font (size 1 1) (thickness 0.15))))
    (pad 1 thru_hole rect (at 0 0) (size 1.7 1.7) (drill 1) (layers *.Cu *.Mask))
    (pad 2 thru_hole oval (at 0 2.54) (size 1.7 1.7) (drill 1) (layers *.Cu *.Mask))
  )
  (module TestPoint:TestPoint_Pad_D1.0mm (layer F.Cu) (tedit 5A0F774F) (tstamp 5C1A2F46)
    (at 5 25)
    (attr virtual)
    (fp_text reference TP1 (at 0 -1.45) (layer F.SilkS) (effects (font (size 1 1) (thickness 0.15))))
    (fp_text value TP (at 0 1.55) (layer F.Fab) (effects (font (size 1 1) (thickness 0.15))))
    (pad 1 smd circle (at 0 0) (size 1 1) (layers F.Cu F.Mask))
  )
)
"""


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inspector.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_a_kicad5_board_imports_with_every_parts_fate(tmp_path: Path) -> None:
    (tmp_path / "b.kicad_pcb").write_text(KICAD5)
    design = read_kicad(tmp_path / "b.kicad_pcb")
    assert design.outline == (0.0, 0.0, 40.0, 30.0) and not design.y_up
    r1 = next(p for p in design.parts if p.ref == "R1")
    assert (r1.value, r1.package, r1.x_mm, r1.y_mm, r1.rotation, r1.side) == ("10k", "R_0805_2012Metric", 10.0, 8.0,
                                                                              90.0, "top")
    assert r1.pads[0].w == 0.975 and r1.pads[0].h == 1.4  # the pad turns with its module: not turned against it
    imported = import_design(design, load_library(), 10.0, recipe="b")
    fate = {f.ref: f for f in imported.fates}
    assert fate["R1"].inspected and fate["U1"].inspected and fate["U1"].type == "SOIC-8_3.9x4.9mm_P1.27mm"
    assert not fate["C1"].inspected and "45 deg is not a quarter turn" in fate["C1"].reason
    assert not fate["C2"].inspected and "bottom side" in fate["C2"].reason
    assert not fate["TP1"].inspected and "board only" in fate["TP1"].reason  # KiCad 5: (attr virtual)
    rules = parse_rules(imported.rules_text, str(tmp_path / "b.yaml"))
    assert rules.board_size == (400, 300)
    placed = {p.ref: (c, p) for c, p in rules.placements()}
    comp, r1p = placed["R1"]
    # the window: the body (2.0 x 1.2 fab lines) and both pads (x -1.425..1.425), centred on the module's origin
    assert (r1p.x, r1p.y, r1p.rotation) == (100, 80, 90) and comp.size == (28, 14) and comp.shape == "resistor"
    assert placed["U1"][0].detector == "det-polarity" and placed["U1"][0].shape == "soic"
    # a pin header is drawn as a SOIC but has no polarity: the rule set says so, so no reversed header is rendered
    assert placed["U1"][0].polarized and placed["J1"][0].shape == "soic" and not placed["J1"][0].polarized
    assert placed["J1"][0].detector is None and "polarized: false" in imported.rules_text
    imported_bottom = import_design(design, load_library(), 10.0, side="bottom")
    assert [f.ref for f in imported_bottom.fates if f.inspected] == ["C2"]


def _lands_drawn_where_the_geometry_puts_them(imported, rules, image) -> int:  # noqa: ANN001
    """Every pad of the import's own geometry (image frame, worked out apart from the rule set) shows land on the
    rendered board (a body may cover all but a land's outer end: a crystal's, a chip's), on every part whose window
    no other part's reaches (a connector's drawn body may cover a neighbour's lands): the lands checked."""
    import math

    from inspector.routing.rules import body_box

    boxes = {p.ref: body_box(c, p) for c, p in rules.placements()}
    alone = {ref for ref, (x0, y0, x1, y1) in boxes.items()
             if not any(o != ref and ox0 < x1 and ox1 > x0 and oy0 < y1 and oy1 > y0
                        for o, (ox0, oy0, ox1, oy1) in boxes.items())}
    looked = 0
    for ref, pads in imported.geometry.pads.items():
        if ref not in alone:
            continue
        for x0, y0, x1, y1 in pads:
            inside = image[math.floor(y0 + 0.5):math.ceil(y1 - 0.5), math.floor(x0 + 0.5):math.ceil(x1 - 0.5)]
            b, g, r = (inside[..., k].astype(int) for k in range(3))
            land = (np.minimum(np.minimum(b, g), r) > 110) & (abs(g - r) < 40)  # land, not mask or body
            assert land.sum() >= 2, (ref, (x0, y0, x1, y1))
            looked += 1
    return looked


def test_an_imported_board_is_drawn_with_its_footprints_own_lands(tmp_path: Path) -> None:
    """The rule set carries each footprint's lands and body (`pads:`, `body:`, about the window's centre at rotation
    0); the renderer draws them, turned with the part, exactly where the import's own board geometry (the image
    frame, worked out apart from the rule set) puts every pad."""
    from inspector.ingest.synthetic import render_board

    (tmp_path / "b.kicad_pcb").write_text(KICAD5)
    imported = import_design(read_kicad(tmp_path / "b.kicad_pcb"), load_library(), 10.0, recipe="b")
    rules = parse_rules(imported.rules_text, str(tmp_path / "b.yaml"))
    r1 = rules.component("R_0805_2012Metric")
    # pads at x -/+0.9375 mm, 0.975 x 1.4 mm; the fab body 2.0 x 1.2 mm; the window 2.85 x 1.4 mm at 10 px/mm
    assert r1.pads == ((-14, -7, -4, 7), (4, -7, 14, 7)) and r1.body == (-10, -6, 10, 6)
    assert rules.component("PinHeader_1x02_P2.54mm_Vertical").body is None  # no body drawn in its footprint
    board = render_board(rules, "B1", np.random.default_rng(0), rates={})
    assert _lands_drawn_where_the_geometry_puts_them(imported, rules, board.image) == 6
    # a file whose y points up (Eagle, centroid files): a SOT-23, its lone pin up in the file, at every quarter turn
    from inspector.board.design import BoardDesign, Pad, PlacedPart

    sot = (Pad(-0.95, -1.1, 0.6, 0.7), Pad(0.95, -1.1, 0.6, 0.7), Pad(0.0, 1.1, 0.6, 0.7))
    parts = [PlacedPart(f"Q{k}", "", "SOT-23", 5.0 + 6 * k, 5.0, 90.0 * k, "top", sot, (-1.45, -0.65, 1.45, 0.65))
             for k in range(4)]
    up = import_design(BoardDesign("up.brd", "test", parts, True, (0.0, 0.0, 26.0, 10.0)), load_library(), 20.0)
    rules_up = parse_rules(up.rules_text, str(tmp_path / "up.yaml"))
    image = render_board(rules_up, "U1", np.random.default_rng(0), rates={}).image
    assert _lands_drawn_where_the_geometry_puts_them(up, rules_up, image) == 12
    lone = [up.geometry.pads[f"Q{k}"][2] for k in range(4)]  # the lone pin: up in the file, so up in the image at 0
    assert lone[0][1] < up.geometry.pads["Q0"][0][1]
    # and no land where there is none: between R1's two pads lies its body, beside them the mask
    b, g, r = board.image[80, 100 + 12].astype(int)  # right of R1 (turned: its pads lie above and below)
    assert g > 2 * r, (b, g, r)


def test_a_malformed_or_foreign_kicad_file_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "cut.kicad_pcb").write_text(KICAD5[: len(KICAD5) // 2])
    with pytest.raises(CadError, match="cut.kicad_pcb.*not a well-formed KiCad s-expression"):
        read_kicad(tmp_path / "cut.kicad_pcb")
    (tmp_path / "s.kicad_pcb").write_text("(kicad_sch (version 20230121))")
    with pytest.raises(CadError, match="schematic or footprint file is not a board"):
        read_kicad(tmp_path / "s.kicad_pcb")
    r = cli("board", "import", str(tmp_path / "x.brd2"), "--out", str(tmp_path / "x.yaml"), "--px-per-mm", "10")
    assert r.returncode == 1 and "not a format `board import` reads" in r.stderr
    # a teardrop's `filter_ratio` written without its opening bracket, as in the RoyalBlue54L demo KiCad 9.0.8 ships
    # (KiCad reads it): mended, said, and nothing else taken from the file changes; any other stray bracket refused
    board = (Path(__file__).parent / "cad" / "bottom-kicad9.kicad_pcb").read_text(encoding="utf-8")
    glitch = '(pad "1" smd rect (teardrops (best_length_ratio 0.5) (curved_edges no)filter_ratio 0.9) (enabled yes))'
    (tmp_path / "t.kicad_pcb").write_text(board.replace('(pad "1" smd rect', glitch), encoding="utf-8")
    mended = read_kicad(tmp_path / "t.kicad_pcb")
    assert mended.parts == read_kicad(Path(__file__).parent / "cad" / "bottom-kicad9.kicad_pcb").parts
    assert mended.notes == ["24 teardrop setting(s) written `(curved_edges no)filter_ratio 0.9)`, without the "
                            "opening bracket, as a KiCad 9 release wrote them: read as KiCad reads them"]
    (tmp_path / "u.kicad_pcb").write_text(board.replace('(pad "1" smd rect', glitch.replace("filter", "fillet")),
                                          encoding="utf-8")
    with pytest.raises(CadError, match=r"u\.kicad_pcb.*not a well-formed KiCad s-expression"):
        read_kicad(tmp_path / "u.kicad_pcb")


@needs_boards
def test_a_kicad9_board_asks_for_the_packages_the_library_lacks_then_imports(tmp_path: Path) -> None:
    out = tmp_path / "new" / "stm.yaml"  # a folder that does not exist yet: the asked file makes it
    r = cli("board", "import", str(STM32), "--out", str(out), "--px-per-mm", "20")
    assert r.returncode == 3 and not out.exists(), r.stdout  # it asks (exit 3), writes nothing
    asked = tmp_path / "new" / "stm.packages.yaml"
    for package in ("MLPF-WB55-01E3_STM-M", "TO254P942H425-4", "Texas_R-PDSO-G6", "XDCR_SCD41-D-R2"):
        assert package in r.stderr and package in asked.read_text()
    r = cli("board", "import", str(STM32), "--out", str(out), "--px-per-mm", "20", "--library", str(asked))
    assert r.returncode == 1 and "not filled in" in r.stderr  # an unfilled template is refused, not guessed
    asked.write_text(asked.read_text().replace("{class: null}", "{class: qfn-qfp}"))
    r = cli("board", "import", str(STM32), "--out", str(out), "--px-per-mm", "20", "--library", str(asked),
            "--json", str(tmp_path / "stm.json"))
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "stm.json").read_text())
    parts = {p["ref"]: p for p in doc["parts"]}
    assert len(parts) == 139 and (parts["D3"]["x_mm"], parts["D3"]["y_mm"], parts["D3"]["rotation"]) == (133.75,
                                                                                                         126.5, 90.0)
    assert parts["C17"]["inspected"] and parts["C17"]["type"] == "C_0603_1608Metric_Pad1.08x0.95mm_HandSolder"
    assert sum(p["side"] == "bottom" for p in doc["parts"]) == 17 and "left out:" in r.stdout
    for p in doc["parts"]:
        assert p["inspected"] == (p["type"] is not None) and (p["inspected"] or p["reason"])
    rules = load_rules(out)
    placed = {p.ref: p for _c, p in rules.placements()}
    ox, oy = doc["image_origin_mm"]  # the outline's corner (83, 100), less what the connectors hang over its edge
    assert ox <= 83.0 and oy <= 100.0 and not doc["y_up"]
    assert (placed["C17"].x, placed["C17"].y) == (round((122.2625 - ox) * 20), round((121.5 - oy) * 20))
    assert set(placed) == {p["ref"] for p in doc["parts"] if p["inspected"]}


@needs_boards
def test_an_eagle_centroid_file_takes_bodies_from_the_library(tmp_path: Path) -> None:
    design = read_centroid(SNAPPER)
    d1 = next(p for p in design.parts if p.ref == "D1")
    assert (d1.value, d1.package, d1.x_mm, d1.y_mm, d1.rotation) == ("", "LED-0603", 24.13, 17.53, 90.0)
    c1 = next(p for p in design.parts if p.ref == "C1")
    assert (c1.value, c1.package) == ("22pF", "0402") and design.y_up
    with pytest.raises(UnknownPackages) as caught:
        import_design(design, load_library(), 30.0)
    # a chip size knows its body, bare (0402) or in a longer name (LED-0603)
    assert "LED-0603" not in caught.value.unknown and "0402" not in caught.value.unknown
    lib = tmp_path / "plant.yaml"
    lines = [f"  '{p}': {{class: soic, body: [2.0, 1.5]}}" for p in caught.value.unknown]
    lib.write_text("packages:\n" + "\n".join(lines) + "\n")
    imported = import_design(design, load_library(lib), 30.0, recipe="snapper")
    rules = parse_rules(imported.rules_text, str(tmp_path / "s.yaml"))
    placed = {p.ref: p for _c, p in rules.placements()}
    assert rules.component("LED-0603").size == (48, 24)  # 1.6 x 0.8 mm at 30 px/mm
    top = design.bounds()[3]
    assert placed["C1"].y == round((top - 26.29) * 30)  # y up in the file, down in the image


@needs_boards
def test_snappergps_through_its_own_bom(tmp_path: Path) -> None:
    """The real board's BOM (a spreadsheet's CSV: `402` for 0402, designators in quoted lists, a total line) leaves
    off its five test points and U5, the programming pads; every other part carries its maker's part number, and
    the centroid file's unknown packages are asked for with what the BOM says they are."""
    bom = SNAPPER.parent / "SnapperGPS_1_0_0_BOM.csv"
    board = read_design(SNAPPER.with_suffix(".brd"), None, bom=bom)
    assert sorted(p.ref for p in board.parts if p.excluded == "not placed (not on the BOM)") == [
        "GND", "RESET", "SWCLK", "SWDIO", "U5", "VDD"]
    assert all(p.bought is not None and p.bought.part_number for p in board.parts if p.excluded is None)
    assert next(p for p in board.parts if p.ref == "U1").bought.part_number == "EFM32HG310F64G-C-QFN32R"
    # the centroid file's values (`0.1uF`, `4K7`) and the BOM's (`Ceramic capacitor, 100 nF`, `Resistor, 4K7`) agree
    assert not any("values differ" in n for n in read_design(SNAPPER, None, bom=bom).notes)
    out = tmp_path / "sg.yaml"
    r = cli("board", "import", str(SNAPPER), "--bom", str(bom), "--out", str(out), "--px-per-mm", "20")
    assert r.returncode == 3 and "ALEX_CONN5" not in r.stderr  # U5 is not placed: nothing to ask
    asked = (tmp_path / "sg.packages.yaml").read_text()
    assert ("'AMANDA_TSST8': {class: null}   # Q1, Q3, Q4\n    # BOM: Mosfet array N and P-channel, 20 V, 2.5 A, 1 W; "
            "Rohm Semiconductor TT8M1TR; BOM package 8-SMD\n") in asked
    # the board file, with a plant library that knows neither U5's programming pads (not placed) nor U3's TVS
    # footprint: the BOM's SOT143B gives U3 its class
    from tests.test_presence import SNAPPER_CLASSES

    lib = tmp_path / "plant.yaml"
    lib.write_text("packages:\n" + "".join(f"  '{k}': {{class: {v}}}\n" for k, v in SNAPPER_CLASSES.items()
                                           if k not in ("ALEX_CONN5", "TVS_DIODE-PRTR5V0U2AX")))
    r = cli("board", "import", str(SNAPPER.with_suffix(".brd")), "--bom", str(bom), "--library", str(lib), "--out",
            str(out), "--px-per-mm", "20")
    assert r.returncode == 0, r.stderr
    assert "packages the library knows by the BOM's name for them: TVS_DIODE-PRTR5V0U2AX as SOT143B (sot)" in r.stdout
    assert "U3" in {p.ref for _c, p in load_rules(out).placements()}


def test_csv_centroid_files_by_their_headers_or_a_saved_profile(tmp_path: Path) -> None:
    (tmp_path / "jlc.csv").write_text("Designator,Mid X,Mid Y,Layer,Rotation\nR1,10.5mm,4.2mm,Top,90\n"
                                      "C1,12mm,4.2mm,Bottom,0\n")
    design = read_centroid(tmp_path / "jlc.csv")
    assert [(p.ref, p.x_mm, p.y_mm, p.rotation, p.side) for p in design.parts] == [
        ("R1", 10.5, 4.2, 90.0, "top"), ("C1", 12.0, 4.2, 0.0, "bottom")]
    (tmp_path / "alt.csv").write_text('Altium Designer Pick and Place\n\n"Designator","Footprint","Center-X(mil)",'
                                      '"Center-Y(mil)","Layer","Rotation"\n"U1","SOIC8","1000","500","TopLayer","270"\n')
    u1 = read_centroid(tmp_path / "alt.csv").parts[0]
    assert (u1.ref, u1.package, u1.rotation) == ("U1", "SOIC8", 270.0) and u1.x_mm == pytest.approx(25.4)
    (tmp_path / "odd.csv").write_text("Teil;Xpos;Ypos;Winkel\nR7;1,5;2,5;180\n")
    with pytest.raises(CadError, match="no header row naming"):
        read_centroid(tmp_path / "odd.csv")
    (tmp_path / "odd.yaml").write_text("columns: {ref: Teil, x: Xpos, y: Ypos, rotation: Winkel}\nunits: mm\n")
    r7 = read_centroid(tmp_path / "odd.csv", load_profile(tmp_path / "odd.yaml")).parts[0]
    assert (r7.ref, r7.x_mm, r7.y_mm, r7.rotation) == ("R7", 1.5, 2.5, 180.0)
    (tmp_path / "bad.csv").write_text("Designator,Mid X,Mid Y,Rotation\nR1,ten,4.2,0\n")
    with pytest.raises(CadError, match=r"bad.csv:2: x 'ten' is not a number"):
        read_centroid(tmp_path / "bad.csv")
    (tmp_path / "badprofile.yaml").write_text("columns: {ref: Teil, x: Xpos}\n")
    with pytest.raises(ConfigError, match="columns.y"):
        load_profile(tmp_path / "badprofile.yaml")


@needs_boards
def test_an_eagle_board_brings_its_own_footprints(tmp_path: Path) -> None:
    from inspector.board.eagle import read_eagle

    brd = SNAPPER.with_suffix(".brd")
    design = read_eagle(brd)
    assert design.y_up and design.outline is not None and len(design.parts) == 68
    d1 = next(p for p in design.parts if p.ref == "D1")
    assert (d1.package, d1.x_mm, d1.y_mm, d1.rotation, d1.side) == ("LED-0603", 24.13, 17.526, 90.0, "top")
    assert d1.pads and d1.body is not None  # from the file's own library: no body size asked for
    assert sum(p.side == "bottom" for p in design.parts) == 5
    with pytest.raises(UnknownPackages) as caught:
        import_design(design, load_library(), 30.0)
    assert "LED-0603" not in caught.value.unknown and "0402" not in caught.value.unknown
    lib = tmp_path / "plant.yaml"
    lib.write_text("packages:\n" + "\n".join(f"  '{p}': {{class: soic}}" for p in caught.value.unknown) + "\n")
    imported = import_design(design, load_library(lib), 30.0)
    assert imported.types["0402_chip-capacitor"] > 0 and imported.types["0402_chip-resistor"] > 0  # one name, two looks
    rules = parse_rules(imported.rules_text, str(tmp_path / "s.yaml"))
    # Eagle's y points up and its footprints turn the other way round the flipped axis: the lands still land
    from inspector.ingest.synthetic import render_board

    board = render_board(rules, "S1", np.random.default_rng(0), rates={}).image
    assert _lands_drawn_where_the_geometry_puts_them(imported, rules, board) > 150
    (tmp_path / "cut.brd").write_bytes(brd.read_bytes()[:5000])
    with pytest.raises(CadError, match=r"cut.brd:\d+: not well-formed Eagle XML"):
        read_eagle(tmp_path / "cut.brd")


def test_an_imported_board_trains_starter_experts_and_runs_through_the_line(tmp_path: Path, box_models: Path) -> None:
    """The rule set `board import` writes runs unchanged: the renderer draws it, starter experts train on it (a tiny
    recipe here; `zoo build --rules` and `run --rules` use the full one), and the line inspects its boards."""
    from inspector.app.line import LineConfig
    from inspector.app.run import open_source, run_line
    from inspector.app.service import ServiceConfig
    from inspector.results.store import ResultStore, sqlite_url
    from inspector.training.demo_zoo import build_demo_zoo
    from tests.conftest import TINY_RECIPE

    (tmp_path / "b.kicad_pcb").write_text(KICAD5)
    r = cli("board", "import", str(tmp_path / "b.kicad_pcb"), "--out", str(tmp_path / "b.yaml"), "--px-per-mm", "10")
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "b.yaml").read_text(encoding="utf-8")  # the SOIC given an input of its own, as a QFP is
    (tmp_path / "b.yaml").write_text(text.replace("  SOIC-8_3.9x4.9mm_P1.27mm:\n",
                                                  "  SOIC-8_3.9x4.9mm_P1.27mm:\n    input_size: 48\n"))
    rules = load_rules(tmp_path / "b.yaml")
    recipe = {**TINY_RECIPE, "per_type": 40, "classifier_cap": 40, "classifier_epochs": 1, "detector_cap": 16,
              "detector_epochs": 1, "val_per_type": 6}
    zoo = build_demo_zoo(tmp_path / "models" / "starter" / "b", [rules], recipe=recipe, workers=1)
    assert {"cls-R_0805_2012Metric", "cls-SOIC-8_3.9x4.9mm_P1.27mm", "det-polarity"} <= set(zoo.entries)
    assert zoo.entries["cls-SOIC-8_3.9x4.9mm_P1.27mm"].spec["input_size"] == 48  # trained, and served, at its own
    assert zoo.entries["cls-R_0805_2012Metric"].spec["input_size"] == rules.classifier_spec["input_size"]
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    run_line(rules, zoo, box_models, open_source("synthetic", rules, 3, 4), ServiceConfig(LineConfig()),
             store, tmp_path, lambda _m: None)
    stored = store.inspections()
    assert len(stored) == 3 and all({p.ref for p in i.parts} == {"R1", "U1", "J1"} for i in stored)


# IPC-2581 rev C as the standard lays it out (namespaced, Content/StepRef, DictionaryStandard, Step with Profile,
# Packages with pins and outlines, Components with Xform and Location, a BOM that leaves one part unpopulated)
IPC2581 = """<?xml version="1.0" encoding="UTF-8"?>
<IPC-2581 revision="C" xmlns="http://webstds.ipc.org/2581" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <Content roleRef="Owner">
    <FunctionMode mode="ASSEMBLY"/>
    <StepRef name="board"/>
    <LayerRef name="F.Cu"/><LayerRef name="B.Cu"/>
    <BomRef name="board_BOM"/>
    <DictionaryStandard units="MILLIMETER">
      <EntryStandard id="RECT_1"><RectCenter width="0.9" height="0.95"/></EntryStandard>
      <EntryStandard id="RECT_2"><RectCenter width="1.95" height="0.6"/></EntryStandard>
      <EntryStandard id="CIRCLE_1"><Circle diameter="1"/></EntryStandard>
    </DictionaryStandard>
  </Content>
  <Bom name="board_BOM">
    <BomHeader assembly="board" revision="1"/>
    <BomItem OEMDesignNumberRef="10k" quantity="2" category="ELECTRICAL">
      <RefDes name="R1" packageRef="R_0603_1608Metric" populate="true" layerRef="F.Cu"/>
      <RefDes name="R2" packageRef="R_0603_1608Metric" populate="false" layerRef="F.Cu"/>
    </BomItem>
  </Bom>
  <Ecad name="board">
    <CadHeader units="MILLIMETER"/>
    <CadData>
      <Layer name="F.Cu" layerFunction="CONDUCTOR" side="TOP" polarity="POSITIVE"/>
      <Layer name="B.Cu" layerFunction="CONDUCTOR" side="BOTTOM" polarity="POSITIVE"/>
      <Step name="board">
        <Datum x="0" y="0"/>
        <Profile><Polygon>
          <PolyBegin x="0" y="0"/><PolyStepSegment x="40" y="0"/><PolyStepSegment x="40" y="30"/>
          <PolyStepSegment x="0" y="30"/><PolyStepSegment x="0" y="0"/>
        </Polygon></Profile>
        <Package name="R_0603_1608Metric" type="RESISTOR" pinOne="1" pinOneOrientation="LEFT">
          <Outline><Polygon>
            <PolyBegin x="-0.8" y="-0.4"/><PolyStepSegment x="0.8" y="-0.4"/><PolyStepSegment x="0.8" y="0.4"/>
            <PolyStepSegment x="-0.8" y="0.4"/><PolyStepSegment x="-0.8" y="-0.4"/>
          </Polygon><LineDesc lineWidth="0.1" lineEnd="ROUND"/></Outline>
          <Pin number="1" type="SURFACE" mountType="SURFACE_MOUNT_PAD">
            <Location x="-0.775" y="0"/><StandardPrimitiveRef id="RECT_1"/></Pin>
          <Pin number="2" type="SURFACE" mountType="SURFACE_MOUNT_PAD">
            <Location x="0.775" y="0"/><StandardPrimitiveRef id="RECT_1"/></Pin>
        </Package>
        <Package name="SOIC-8_3.9x4.9mm_P1.27mm" type="SOIC" pinOne="1">
          <Outline><Polygon>
            <PolyBegin x="-1.95" y="-2.45"/><PolyStepSegment x="1.95" y="-2.45"/>
            <PolyStepSegment x="1.95" y="2.45"/><PolyStepSegment x="-1.95" y="2.45"/>
          </Polygon></Outline>
          <Pin number="1" type="SURFACE"><Location x="-2.475" y="1.905"/><StandardPrimitiveRef id="RECT_2"/></Pin>
          <Pin number="4" type="SURFACE"><Location x="-2.475" y="-1.905"/><StandardPrimitiveRef id="RECT_2"/></Pin>
          <Pin number="5" type="SURFACE"><Location x="2.475" y="-1.905"/><StandardPrimitiveRef id="RECT_2"/></Pin>
          <Pin number="8" type="SURFACE"><Location x="2.475" y="1.905"/><StandardPrimitiveRef id="RECT_2"/></Pin>
        </Package>
        <Package name="Fiducial_1mm_Mask2mm" type="FIDUCIAL">
          <Pin number="1" type="SURFACE"><Location x="0" y="0"/><StandardPrimitiveRef id="CIRCLE_1"/></Pin>
        </Package>
        <Component refDes="R1" packageRef="R_0603_1608Metric" part="10k" layerRef="F.Cu" mountType="SMT">
          <Xform rotation="90"/><Location x="10" y="20"/></Component>
        <Component refDes="R2" packageRef="R_0603_1608Metric" part="10k" layerRef="F.Cu" mountType="SMT">
          <Location x="14" y="20"/></Component>
        <Component refDes="C1" packageRef="R_0603_1608Metric" part="100n" layerRef="B.Cu" mountType="SMT">
          <Xform rotation="180" mirror="true"/><Location x="20" y="5"/></Component>
        <Component refDes="U1" packageRef="SOIC-8_3.9x4.9mm_P1.27mm" part="NE555" layerRef="F.Cu" mountType="SMT">
          <Location x="28.5" y="12.25"/></Component>
        <Component refDes="FID1" packageRef="Fiducial_1mm_Mask2mm" part="FID" layerRef="F.Cu" mountType="SMT">
          <Location x="3" y="27"/></Component>
      </Step>
    </CadData>
  </Ecad>
</IPC-2581>
"""


FIDUCIALS = """  (module Fiducial:Fiducial_1mm_Mask2mm (layer F.Cu) (tstamp 5C1A2F50)
    (at 3 3)
    (attr virtual)
    (fp_text reference FID1 (at 0 -2) (layer F.SilkS) (effects (font (size 1 1) (thickness 0.15))))
    (fp_text value Fiducial (at 0 2) (layer F.Fab) (effects (font (size 1 1) (thickness 0.15))))
    (pad "" smd circle (at 0 0) (size 1 1) (layers F.Cu F.Mask) (solder_mask_margin 0.5))
  )
  (module Fiducial:Fiducial_1.5mm_Mask3mm (layer F.Cu) (tstamp 5C1A2F52)
    (at 37 27)
    (solder_mask_margin 0.75)
    (attr virtual)
    (fp_text reference FID2 (at 0 -2) (layer F.SilkS) (effects (font (size 1 1) (thickness 0.15))))
    (fp_text value Fiducial (at 0 2) (layer F.Fab) (effects (font (size 1 1) (thickness 0.15))))
    (pad "" smd circle (at 0 0) (size 1.5 1.5) (layers F.Cu F.Mask))
  )
  (module Fiducial:Fiducial_1mm (layer F.Cu) (tstamp 5C1A2F54)
    (at 37 3)
    (attr virtual)
    (fp_text reference FID3 (at 0 -2) (layer F.SilkS) (effects (font (size 1 1) (thickness 0.15))))
    (fp_text value Fiducial (at 0 2) (layer F.Fab) (effects (font (size 1 1) (thickness 0.15))))
    (pad "" smd circle (at 0 0) (size 1 1) (layers F.Cu F.Mask))
  )
)
"""


def test_a_fiducials_bare_ring_comes_from_its_footprints_mask_opening(tmp_path: Path) -> None:
    """The mask margin of a fiducial's pad (or its footprint's) sets the mark's `ring`, the bare board around it
    that registration matches it with; a footprint that gives none keeps the default ring."""
    board = KICAD5[:KICAD5.rstrip().rindex(")")] + FIDUCIALS
    (tmp_path / "f.kicad_pcb").write_text(board)
    design = read_kicad(tmp_path / "f.kicad_pcb")
    margins = {p.ref: p.pads[0].mask_margin for p in design.parts if p.fiducial}
    assert margins == {"FID1": 0.5, "FID2": 0.75, "FID3": None}
    imported = import_design(design, load_library(), 20.0, recipe="f")
    assert "FID1: {at: [60, 60], shape: circle, size: 20, ring: 40}" in imported.rules_text
    assert "FID2: {at: [740, 540], shape: circle, size: 30, ring: 60}" in imported.rules_text
    assert "FID3: {at: [740, 60], shape: circle, size: 20}" in imported.rules_text
    marks = {m.name: m for m in parse_rules(imported.rules_text, "f.yaml").fiducials.marks}
    assert (marks["FID1"].reach, marks["FID2"].reach, marks["FID3"].reach) == (20.0, 30.0, 30.0)
    # a board-wide mask clearance (KiCad 5's setup) opens every pad without one of its own, FID3's too
    cleared = board.replace("(general (thickness 1.6))",
                            "(general (thickness 1.6))\n  (setup (pad_to_mask_clearance 0.2))")
    (tmp_path / "c.kicad_pcb").write_text(cleared)
    margins = {p.ref: p.pads[0].mask_margin for p in read_kicad(tmp_path / "c.kicad_pcb").parts if p.fiducial}
    assert margins == {"FID1": 0.5, "FID2": 0.75, "FID3": 0.2}


def import_stm32(root: Path) -> Path:
    """The shared stm32wb55-dev board imported by `board import` at 20 px/mm into `root`, the four packages the
    built-in library lacks classed by a plant library: its rule set."""
    library = root / "plant.yaml"
    library.write_text("packages:\n  'MLPF-WB55-01E3_STM-M': {class: qfn-qfp}\n  'TO254P942H425-4': {class: "
                       "transistor-tht}\n  'Texas_R-PDSO-G6': {class: sot}\n  'XDCR_SCD41-D-R2': {class: qfn-qfp}\n")
    r = cli("board", "import", str(STM32), "--out", str(root / "stm.yaml"), "--px-per-mm", "20", "--library",
            str(library))
    assert r.returncode == 0, r.stderr
    return root / "stm.yaml"


@needs_boards
def test_a_real_boards_fiducials_register_its_photo_at_their_own_rings(tmp_path: Path) -> None:
    """The shared stm32wb55-dev board's photo, brought to the recipe's pixels on five points picked by hand: its
    three visible fiducials (KiCad's 1.5 mm dot in a 3 mm opening) register it at the rings its CAD gives. At the
    default ring, twice as wide, they matched 0.46-0.62 and the board was refused (found by `board check`), and
    FID2 was left out of the import because that ring touched R5."""
    import cv2

    from inspector.board.register import register_points
    from inspector.ingest.registration import RegistrationFailed, register

    rules = load_rules(import_stm32(tmp_path))
    assert {(m.name, m.size, m.ring) for m in rules.fiducials.marks} == {
        ("FID1", 30, 60), ("FID2", 30, 60), ("FID3", 30, 60), ("FID4", 30, 60)}
    picked = [((187.0, 441.0), (135.0, 305.0)), ((190.0, 893.0), (135.0, 1075.0)), ((794.0, 896.0), (1165.0, 1075.0)),
              ((474.1, 816.6), (625.0, 942.0)), ((698.3, 360.2), (1005.0, 170.0))]  # FID1, FID3, FID4, U6, SW1
    photo = cv2.imread(str(STM32.parent / "assembled.jpg"))
    to_board = register_points(picked, 20.0).homography
    board = cv2.warpPerspective(photo, to_board, rules.board_size, flags=cv2.INTER_CUBIC)
    reg = register(board, rules.fiducials)  # FID2 sits under the USB cable's shadow in this photo: left out or found
    assert {"FID1", "FID3", "FID4"} <= set(reg.found) and reg.residual_px <= 1.0, reg
    wide = "".join(line for line in rules.text.splitlines(keepends=True) if "FID2:" not in line)  # it touched R5
    wide = parse_rules(wide.replace(", ring: 60}", "}"), "wide.yaml")
    with pytest.raises(RegistrationFailed, match="not found"):
        register(board, wide.fiducials)


def test_an_ipc2581_file_imports_its_parts_pads_bom_and_outline(tmp_path: Path) -> None:
    """IPC-2581 read from the standard's own structure, in a file written to the standard's layout by hand (a BOM
    that leaves a part unpopulated, inches); KiCad 9.0.8's own export is read in the test of its bottom side."""
    from inspector.board.ipc2581 import read_ipc2581

    path = tmp_path / "board.xml"
    path.write_text(IPC2581, encoding="utf-8")
    design = read_ipc2581(path)
    by = {p.ref: p for p in design.parts}
    assert design.outline == (0, 0, 40, 30) and design.y_up
    assert (by["R1"].x_mm, by["R1"].y_mm, by["R1"].rotation, by["R1"].side) == (10, 20, 90, "top")
    assert by["R2"].excluded and "populate" in by["R2"].excluded
    assert by["C1"].side == "bottom" and by["FID1"].fiducial
    assert sorted((p.x, p.w, p.h) for p in by["R1"].pads) == [(-0.775, 0.9, 0.95), (0.775, 0.9, 0.95)]
    assert by["U1"].body == (-1.95, -2.45, 1.95, 2.45) and len(by["U1"].pads) == 4
    # in inches the same numbers are 25.4 times as many millimetres
    inches = tmp_path / "inches.xml"
    inches.write_text(IPC2581.replace('<CadHeader units="MILLIMETER"/>', '<CadHeader units="INCH"/>'),
                      encoding="utf-8")
    assert next(p for p in read_ipc2581(inches).parts if p.ref == "U1").x_mm == pytest.approx(28.5 * 25.4)
    r = cli("board", "import", str(path), "--out", str(tmp_path / "b.yaml"), "--px-per-mm", "10",
            "--json", str(tmp_path / "b.json"))
    assert r.returncode == 0, r.stderr
    rules = load_rules(tmp_path / "b.yaml")
    place = {p.ref: p for _c, p in rules.placements()}
    assert set(place) == {"R1", "U1"}
    assert (place["R1"].x, place["R1"].y, place["R1"].rotation) == (100, 100, 90)  # y up: 30 - 20 mm from the top
    fates = {f["ref"]: f for f in json.loads((tmp_path / "b.json").read_text(encoding="utf-8"))["parts"]}
    assert not fates["R2"]["inspected"] and "populate" in fates["R2"]["reason"]
    bad = tmp_path / "bad.xml"
    bad.write_text(IPC2581.replace("</Step>", "</Stp>"), encoding="utf-8")
    r = cli("board", "import", str(bad), "--out", str(tmp_path / "c.yaml"), "--px-per-mm", "10")
    assert r.returncode != 0 and "bad.xml:" in r.stderr and "not well-formed IPC-2581" in r.stderr


def _ipc_bottom_soic(reading: str) -> str:
    """IPC2581 with a bottom SOIC U2 at (30, 20), rotation 90 and mirror, and its B.Cu pads where `reading`, in its
    own words, puts them: "turn, then mirror" (as Valor and Cadence read the standard) or "mirror, then turn"."""
    pads = []
    for number, (px, py) in {"1": (-2.475, 1.905), "4": (-2.475, -1.905), "5": (2.475, -1.905),
                             "8": (2.475, 1.905)}.items():
        if reading == "mirror, then turn":
            px = -px
        qx, qy = -py, px  # turned 90 counter-clockwise
        if reading == "turn, then mirror":
            qx = -qx
        pads.append(f'<Pad><Location x="{30 + qx:.3f}" y="{20 + qy:.3f}"/><StandardPrimitiveRef id="RECT_2"/>'
                    f'<PinRef componentRef="U2" pin="{number}"/></Pad>')
    part = ('<Component refDes="U2" packageRef="SOIC-8_3.9x4.9mm_P1.27mm" part="NE555" layerRef="B.Cu" '
            'mountType="SMT"><Xform rotation="90" mirror="true"/><Location x="30" y="20"/></Component>')
    return IPC2581.replace("      </Step>", f"{part}<LayerFeature layerRef=\"B.Cu\"><Set>{''.join(pads)}</Set>"
                                          "</LayerFeature>\n      </Step>")


@pytest.mark.parametrize("reading", ["turn, then mirror", "mirror, then turn"])
def test_an_ipc2581_bottom_part_wears_its_package_as_the_steps_own_pads_place_it(tmp_path: Path, reading: str) -> None:
    from inspector.board.ipc2581 import read_ipc2581

    path = tmp_path / "board.xml"
    path.write_text(_ipc_bottom_soic(reading), encoding="utf-8")
    design = read_ipc2581(path)
    u2 = next(p for p in design.parts if p.ref == "U2")
    a = math.radians(u2.rotation)  # design.py: the footprint frame turned counter-clockwise, y up
    placed = sorted((round(30 + q.x * math.cos(a) - q.y * math.sin(a), 3), round(20 + q.x * math.sin(a) +
                     q.y * math.cos(a), 3)) for q in u2.pads)
    said = sorted((round(float(x), 3), round(float(y), 3)) for x, y in
                  re.findall(r'<Pad><Location x="([-\d.]+)" y="([-\d.]+)"', _ipc_bottom_soic(reading)))
    assert placed == said
    assert (u2.rotation, [n.split(":")[1].split(" (")[0] for n in design.notes if "draws the" not in n]) == (
        (270.0, [" bottom parts read as turned, then mirrored about the y axis"]) if reading == "turn, then mirror"
        else (90.0, [" bottom parts read as mirrored about the y axis, then turned"]))
    # with no pads of its own in the file, the standard's order as Valor and Cadence read it, and a note to check
    plain = tmp_path / "plain.xml"
    plain.write_text(IPC2581, encoding="utf-8")
    c1 = read_ipc2581(plain)
    assert next(p for p in c1.parts if p.ref == "C1").rotation == 180.0
    assert "as Valor and Cadence read the standard; check a bottom part's window in the preview" in c1.notes[0]


def test_ipc2581_package_names_are_stripped_of_numbers_only_where_the_exporter_numbered_every_one() -> None:
    from inspector.board.ipc2581 import _numbered_by_exporter

    assert _numbered_by_exporter(["SOT-23_2", "R_0603_1608Metric_1", "R_0603_1608Metric_3"]) == {
        "SOT-23_2": "SOT-23", "R_0603_1608Metric_1": "R_0603_1608Metric", "R_0603_1608Metric_3": "R_0603_1608Metric"}
    # a plant's own names that happen to end in numbers, a gap in the numbering, a lone package: kept as written
    for names in (["SOIC_16", "QFN_32"], ["SOIC_1", "QFN_3"], ["SOT-23_1"], ["SOT-23_1", "R0603"]):
        assert _numbered_by_exporter(names) == {}, names


def test_a_reference_kicad_renamed_beside_a_pin_or_layer_of_its_name_is_read_as_its_own(tmp_path: Path) -> None:
    """KiCad 9's IPC-2581 export writes C8 as `C8_1` where a BGA's pin is named C8 (and L3 as `L3_3` beside a layer
    L3): such a reference is read as the part's own, and said so; the same `C3_1` with nothing else named C3, or two
    references that would both become one, are kept as written."""
    from inspector.board.ipc2581 import read_ipc2581

    text = (Path(__file__).parent / "cad" / "bodies-kicad9-ipc2581.xml").read_text(encoding="utf-8")
    text = re.sub(r'(componentRef|refDes|name)="C3"', r'\1="C3_1"', text)
    as_written = tmp_path / "kept.xml"
    as_written.write_text(text, encoding="utf-8")
    clash = tmp_path / "clash.xml"
    clash.write_text(text.replace('<Layer name="User.1"', '<Layer name="C3"'), encoding="utf-8")
    twice = tmp_path / "twice.xml"
    twice.write_text(clash.read_text(encoding="utf-8").replace('"C2"', '"C3_2"'), encoding="utf-8")
    kept, read, both = read_ipc2581(as_written), read_ipc2581(clash), read_ipc2581(twice)
    assert "C3_1" in {p.ref for p in kept.parts} and not any("number added" in n for n in kept.notes)
    refs = {p.ref for p in read.parts}
    assert "C3" in refs and "C3_1" not in refs and len(refs) == 16
    assert "1 reference(s) the exporter wrote with a number added, to keep them apart from another name in its file " \
        "(a pin's, a layer's), read as the part's own: C3_1 as C3" in read.notes
    c3 = next(p for p in read.parts if p.ref == "C3")
    assert c3.body == pytest.approx((-0.8, -0.4, 0.8, 0.4), abs=0.02)  # its drawing found under the file's name
    assert {"C3_1", "C3_2"} <= {p.ref for p in both.parts}


def _pads_placed(part, y_up: bool) -> list[tuple[float, float]]:  # noqa: ANN001
    """design.py's convention: each pad of the footprint frame turned counter-clockwise about the part's origin; in
    a y-up frame (a y-down file's y negated, as pcbnew's centres were written)."""
    t, out = math.radians(part.rotation), []
    for q in part.pads:
        if y_up:
            out.append((part.x_mm + q.x * math.cos(t) - q.y * math.sin(t), part.y_mm + q.x * math.sin(t) +
                        q.y * math.cos(t)))
        else:
            out.append((part.x_mm + q.x * math.cos(t) + q.y * math.sin(t),
                        -(part.y_mm - q.x * math.sin(t) + q.y * math.cos(t))))
    return out


def test_kicad_9s_own_board_odbpp_and_ipc2581_exports_place_every_bottom_pad_where_pcbnew_has_it() -> None:
    """tests/cad/bottom-kicad9.*, made by KiCad 9.0.8's pcbnew and exported by its kicad-cli (make_bottom_kicad9.py):
    SOT-23s, SOIC-8s and LEDs with unequal pads on both sides at every quarter turn. Each reader's pads, placed by the
    design's convention, land on pcbnew's own pad centres (0.01 mm: the ODB++ export's default precision). KiCad 9
    writes an ODB++ bottom package already mirrored, and its IPC-2581 export draws some packages one way and some the
    other, and places a few parts' packages off their own copper: read by the pads the files place, not by a fixed
    order."""
    from inspector.board.ipc2581 import read_ipc2581
    from inspector.board.odbpp import read_odbpp

    cad = Path(__file__).parent / "cad"
    truth = json.loads((cad / "bottom-kicad9.pads.json").read_text(encoding="utf-8"))["parts"]
    assert sum(t["side"] == "bottom" for t in truth.values()) == 12
    designs = (read_kicad(cad / "bottom-kicad9.kicad_pcb"), read_odbpp(cad / "bottom-kicad9-odb.zip"),
               read_ipc2581(cad / "bottom-kicad9-ipc2581.xml"))
    # KiCad 9's IPC-2581 numbers every package (SOT-23_2): read as the footprint the other two formats name
    packages = [{p.ref: p.package for p in d.parts} for d in designs]
    assert packages[0] == packages[1] == packages[2] and set(packages[0].values()) == {
        "SOT-23", "SOIC-8_3.9x4.9mm_P1.27mm", "LED_0603_1608Metric"}
    assert "every package's name ends in its number in the file (_1 to _3, as KiCad 9 numbers them): read without " \
        "it, 3 packages as 3 footprints" in designs[2].notes
    for design in designs:
        assert {p.ref for p in design.parts} == set(truth), design.format
        for part in design.parts:
            got, want = sorted(_pads_placed(part, design.y_up)), sorted(map(tuple, truth[part.ref]["pads"]))
            assert part.side == truth[part.ref]["side"] and len(got) == len(want), (design.format, part.ref)
            assert max(math.dist(a, b) for a, b in zip(got, want)) <= 0.01, (design.format, part.ref, got, want)


# an Eagle 9 board as Eagle writes one, cut to what the test needs: its design rules' stop frame, and fiducial
# packages in the three ways libraries open the mask: a filled circle on tStop (29) over a pad that says stop="no"
# (SparkFun's), a ring drawn on tStop (its outer edge bounds the opening), and the design rules' frame alone
EAGLE = eagle_board("""<package name="0603">
<smd name="1" x="-0.75" y="0" dx="0.6" dy="0.9" layer="1"/>
<smd name="2" x="0.75" y="0" dx="0.6" dy="0.9" layer="1"/>
<rectangle x1="-0.762" y1="-0.381" x2="0.762" y2="0.381" layer="51"/>
</package>
<package name="FIDUCIAL-1X2">
<smd name="1" x="0" y="0" dx="1" dy="1" layer="1" roundness="100" stop="no" cream="no"/>
<circle x="0" y="0" radius="1" width="0" layer="29"/>
</package>
<package name="FIDUCIAL_1MM_RING">
<smd name="1" x="0" y="0" dx="1" dy="1" layer="1" roundness="100" stop="no" cream="no"/>
<circle x="0" y="0" radius="1.25" width="0.5" layer="29"/>
</package>
<package name="FIDUCIAL_1MM">
<smd name="1" x="0" y="0" dx="1" dy="1" layer="1" roundness="100" cream="no"/>
</package>
<package name="FIDUCIAL_COVERED">
<smd name="1" x="0" y="0" dx="1" dy="1" layer="1" roundness="100" stop="no" cream="no"/>
</package>
""", """<element name="R1" library="plant" package="0603" value="10k" x="20" y="15"/>
<element name="FID1" library="plant" package="FIDUCIAL-1X2" value="" x="3" y="3"/>
<element name="FID2" library="plant" package="FIDUCIAL_1MM_RING" value="" x="37" y="27" rot="R90"/>
<element name="FID3" library="plant" package="FIDUCIAL_1MM" value="" x="37" y="3"/>
<element name="FID4" library="plant" package="FIDUCIAL_COVERED" value="" x="3" y="27"/>
""", """<designrules name="default">
<param name="mvStopFrame" value="1"/>
<param name="mlMinStopFrame" value="4mil"/>
<param name="mlMaxStopFrame" value="4mil"/>
</designrules>
""")


def test_an_eagle_fiducials_ring_comes_from_its_stop_layer_or_the_design_rules(tmp_path: Path) -> None:
    """An Eagle fiducial's bare ring is its mask opening: what its package draws on tStop (a filled circle, or a
    ring to its outer edge) united with the design rules' stop frame (unless the pad says stop="no"); a pad whose
    mask is not opened at all keeps the default ring. A rule with a unit Eagle does not write is refused by name."""
    from inspector.board.eagle import read_eagle

    (tmp_path / "f.brd").write_text(EAGLE, encoding="utf-8")
    design = read_eagle(tmp_path / "f.brd")
    margins = {p.ref: p.pads[0].mask_margin for p in design.parts if p.fiducial}
    assert margins == {"FID1": 0.5, "FID2": 1.0, "FID3": 0.1016, "FID4": None}
    assert all(p.mask_margin == 0.1016 for p in next(p for p in design.parts if p.ref == "R1").pads)
    imported = import_design(design, load_library(), 20.0, recipe="f")
    marks = {m.name: (m.size, m.ring) for m in parse_rules(imported.rules_text, "f.yaml").fiducials.marks}
    assert marks == {"FID1": (20, 40), "FID2": (20, 60), "FID3": (20, 24), "FID4": (20, None)}
    # a wider frame in other units: 10 % of the pad's side, held between 0.15 mm and 0.006 in (0.1524 mm)
    wider = (EAGLE.replace('"mvStopFrame" value="1"', '"mvStopFrame" value="0.1"')
             .replace('"mlMinStopFrame" value="4mil"', '"mlMinStopFrame" value="0.15mm"')
             .replace('"mlMaxStopFrame" value="4mil"', '"mlMaxStopFrame" value="0.006in"'))
    (tmp_path / "w.brd").write_text(wider, encoding="utf-8")
    assert next(p for p in read_eagle(tmp_path / "w.brd").parts if p.ref == "FID3").pads[0].mask_margin == 0.15
    (tmp_path / "bad.brd").write_text(EAGLE.replace('"4mil"', '"4 furlongs"', 1), encoding="utf-8")
    with pytest.raises(CadError, match=r"bad.brd: design rule mlMinStopFrame is '4 furlongs'; Eagle writes a length"):
        read_eagle(tmp_path / "bad.brd")


def test_an_ipc2581_fiducials_ring_comes_from_its_solder_mask_layer(tmp_path: Path) -> None:
    """IPC-2581 keeps a mask opening as a flash on a SOLDERMASK layer: tied to the mark by its PinRef, or (no
    PinRef) lying on it, sized by its own primitive or its padstack's pad on that layer. A fiducial without one
    keeps the default ring."""
    from inspector.board.ipc2581 import read_ipc2581

    text = IPC2581.replace('<EntryStandard id="CIRCLE_1"><Circle diameter="1"/></EntryStandard>',
                           '<EntryStandard id="CIRCLE_1"><Circle diameter="1"/></EntryStandard>\n'
                           '      <EntryStandard id="CIRCLE_2"><Circle diameter="2"/></EntryStandard>\n'
                           '      <EntryStandard id="CIRCLE_3"><Circle diameter="3"/></EntryStandard>')
    text = text.replace('<Layer name="B.Cu" layerFunction="CONDUCTOR" side="BOTTOM" polarity="POSITIVE"/>',
                        '<Layer name="B.Cu" layerFunction="CONDUCTOR" side="BOTTOM" polarity="POSITIVE"/>\n'
                        '      <Layer name="F.Mask" layerFunction="SOLDERMASK" side="TOP" polarity="POSITIVE"/>\n'
                        '      <PadStackDef name="FID_MASK3"><PadstackPadDef layerRef="F.Mask" padUse="REGULAR">'
                        '<Location x="0" y="0"/><StandardPrimitiveRef id="CIRCLE_3"/></PadstackPadDef></PadStackDef>')
    more = """<Component refDes="FID2" packageRef="Fiducial_1mm_Mask2mm" part="FID" layerRef="F.Cu" mountType="SMT">
          <Location x="37" y="27"/></Component>
        <Component refDes="FID3" packageRef="Fiducial_1mm_Mask2mm" part="FID" layerRef="F.Cu" mountType="SMT">
          <Location x="37" y="3"/></Component>
        <LayerFeature layerRef="F.Mask">
          <Set><Pad><StandardPrimitiveRef id="CIRCLE_2"/><PinRef pin="1" componentRef="FID1"/></Pad></Set>
          <Set><Pad padstackDefRef="FID_MASK3"><Location x="37.01" y="27"/></Pad></Set>
          <Set><Pad><Location x="20" y="20"/><StandardPrimitiveRef id="CIRCLE_3"/></Pad></Set>
        </LayerFeature>
      </Step>"""
    path = tmp_path / "fid.xml"
    path.write_text(text.replace("</Step>", more), encoding="utf-8")
    design = read_ipc2581(path)
    assert {p.ref: p.pads[0].mask_margin for p in design.parts if p.fiducial} == {"FID1": 0.5, "FID2": 1.0,
                                                                                   "FID3": None}
    imported = import_design(design, load_library(), 20.0, recipe="fid")
    marks = {m.name: (m.size, m.ring) for m in parse_rules(imported.rules_text, "f.yaml").fiducials.marks}
    assert marks == {"FID1": (20, 40), "FID2": (20, 60), "FID3": (20, None)}


def test_a_large_package_gets_a_classifier_input_of_its_own(tmp_path: Path) -> None:
    """At 25 px/mm the SOIC's window is over four of the starter input's 32 px long: its leads' pitch would be lost,
    so its type gets a 64 px input; the chips keep the rule set's. The input is part of what its expert trains on."""
    (tmp_path / "b.kicad_pcb").write_text(KICAD5)
    r = cli("board", "import", str(tmp_path / "b.kicad_pcb"), "--out", str(tmp_path / "b.yaml"), "--px-per-mm", "25")
    assert r.returncode == 0, r.stderr
    rules = load_rules(tmp_path / "b.yaml")
    sizes = {c.name: c.input_size for c in rules.components}
    assert sizes["SOIC-8_3.9x4.9mm_P1.27mm"] == 64 and sizes["R_0805_2012Metric"] is None
    specs = rules.expert_specs()
    assert specs["cls-SOIC-8_3.9x4.9mm_P1.27mm"]["input_size"] == 64
    assert specs["cls-R_0805_2012Metric"]["input_size"] == 32
    text = (tmp_path / "b.yaml").read_text(encoding="utf-8")
    (tmp_path / "same.yaml").write_text(text.replace("    input_size: 64\n", ""), encoding="utf-8")
    assert load_rules(tmp_path / "same.yaml").training_version != rules.training_version
    from inspector.training.demo_zoo import check_shared_types

    with pytest.raises(ValueError, match="one classifier has one input"):  # a type shared by two recipes: one input
        check_shared_types([rules, load_rules(tmp_path / "same.yaml")])
    (tmp_path / "bad.yaml").write_text(text.replace("    input_size: 64\n", "    input_size: 7\n"), encoding="utf-8")
    with pytest.raises(ValueError, match="input_size.*16 to 256"):
        load_rules(tmp_path / "bad.yaml")


def test_an_ipc2581_package_listing_its_mounting_pads_once_gets_both_from_the_copper() -> None:
    """KiCad 9's IPC-2581 export lists a connector's two mounting pads, both numbered MP, as one pin of its package,
    while its copper layers flash both: the second is put back where the copper has it, so the IPC-2581 part has
    every pad the board file and the ODB++ job give it, at the same places (tests/cad/bodies-kicad9's J1, a JST
    connector)."""
    from inspector.board.ipc2581 import read_ipc2581
    from inspector.board.odbpp import read_odbpp

    cad = Path(__file__).parent / "cad"
    designs = (read_kicad(cad / "bodies-kicad9.kicad_pcb"), read_odbpp(cad / "bodies-kicad9-odb.zip"),
               read_ipc2581(cad / "bodies-kicad9-ipc2581.xml"))
    placed = [sorted(_pads_placed(next(p for p in d.parts if p.ref == "J1"), d.y_up)) for d in designs]
    assert len(placed[0]) == 6 and len(placed[1]) == 6 and len(placed[2]) == 6
    for got in placed[1:]:
        assert max(math.dist(a, b) for a, b in zip(got, placed[0])) <= 0.02
    assert "1 part(s) whose package lists one pin number once where the copper flashes it several times (a " \
        "connector's mounting pads): the other pads added where the copper has them: J1" in designs[2].notes


def test_an_ipc2581_pin_that_is_a_bare_hole_is_no_pad(tmp_path: Path) -> None:
    """KiCad 9 lists a connector's unplated locating pegs as pins (`NPTH0`, MECHANICAL, THRU) that no copper layer
    flashes: a bare hole, so no land and no reason to call the SMD connector through-hole; a mechanical pin the
    copper does flash stays a pad; a part of bare holes alone is left out, with nothing to solder."""
    from inspector.board.ipc2581 import read_ipc2581

    text = (Path(__file__).parent / "cad" / "bodies-kicad9-ipc2581.xml").read_text(encoding="utf-8")
    peg = ('<Pin number="NPTH0" electricalType="MECHANICAL" type="THRU"><Location x="0.0" y="0.5"/>'
           '<StandardPrimitiveRef id="ROUNDRECT_7"/></Pin>')
    path = tmp_path / "pegs.xml"
    path.write_text(text.replace('          <Pin number="MP" electricalType="ELECTRICAL" type="SURFACE">',
                                 peg + '<Pin number="MP" electricalType="ELECTRICAL" type="SURFACE">', 1),
                    encoding="utf-8")
    j1 = next(p for p in read_ipc2581(path).parts if p.ref == "J1")
    assert len(j1.pads) == 6 and not j1.through_hole
    plated = tmp_path / "plated.xml"
    plated.write_text(path.read_text(encoding="utf-8").replace(
        '<PinRef componentRef="J1" pin="1"/>', '<PinRef componentRef="J1" pin="NPTH0"/>', 1), encoding="utf-8")
    j1 = next(p for p in read_ipc2581(plated).parts if p.ref == "J1")
    assert len(j1.pads) == 7 and j1.through_hole
    # a part whose every pin is such a hole (a mounting hole) has nothing to solder
    start = text.index('<Package name="R_0603_1608Metric_6"')
    end = text.index("</Package>", start)
    holes = text[:start] + re.sub(r'<Pin number="(\d)" electricalType="ELECTRICAL" type="SURFACE">',
                                  r'<Pin number="NPTH\1" electricalType="MECHANICAL" type="THRU">',
                                  text[start:end]) + text[end:]
    path.write_text(holes, encoding="utf-8")
    r1 = next(p for p in read_ipc2581(path).parts if p.ref == "R1")
    assert not r1.pads and r1.excluded == "nothing to solder (its pins are bare holes: a mounting hole)"


def test_an_eagle_body_drawn_with_curved_wires_or_a_polygon_is_measured_along_them(tmp_path: Path) -> None:
    """Eagle draws a round body (an LED's, a can's) as wires with a `curve`, an arc of that many degrees from one
    end to the other, and some bodies as a polygon: the body is the arcs' and the polygon's box, not the box of the
    wires' two ends."""
    from inspector.board.eagle import read_eagle

    packages = """<package name="LED5MM">
<pad name="A" x="-1.27" y="0" drill="0.8"/>
<pad name="K" x="1.27" y="0" drill="0.8"/>
<wire x1="2.5" y1="0" x2="-2.5" y2="0" width="0.1" layer="51" curve="180"/>
<wire x1="-2.5" y1="0" x2="2.5" y2="0" width="0.1" layer="51" curve="180"/>
</package>
<package name="WEDGE">
<smd name="1" x="0" y="0" dx="0.6" dy="0.6" layer="1"/>
<polygon width="0.1" layer="51"><vertex x="-1" y="-1"/><vertex x="3" y="-1"/><vertex x="-1" y="2"/></polygon>
</package>"""
    elements = """<element name="D1" library="plant" package="LED5MM" value="RED" x="10" y="10"/>
<element name="U1" library="plant" package="WEDGE" value="X" x="25" y="10"/>"""
    (tmp_path / "round.brd").write_text(eagle_board(packages, elements), encoding="utf-8")
    parts = {p.ref: p for p in read_eagle(tmp_path / "round.brd").parts}
    assert parts["D1"].body == pytest.approx((-2.5, -2.5, 2.5, 2.5), abs=1e-6)
    assert parts["U1"].body == pytest.approx((-1.0, -1.0, 3.0, 2.0))


def test_an_ipc2581_custom_pad_is_its_outlines_box_where_its_copper_is(tmp_path: Path) -> None:
    """A custom pad (a `Contour` in the standard dictionary: KiCad's QFN pads with a rounded end, an antenna pad
    drawn from one end) is sized by its outline's box and placed where that box is, not dropped."""
    from inspector.board.ipc2581 import read_ipc2581

    text = (Path(__file__).parent / "cad" / "bodies-kicad9-ipc2581.xml").read_text(encoding="utf-8")
    custom = ('<EntryStandard id="CUSTOM_T"><Contour><Polygon><PolyBegin x="0.0" y="-0.2"/>'
              '<PolyStepSegment x="1.0" y="-0.2"/><PolyStepSegment x="1.0" y="0.2"/>'
              '<PolyStepSegment x="0.0" y="0.2"/><PolyStepSegment x="0.0" y="-0.2"/></Polygon></Contour>'
              '</EntryStandard>')
    was = '<StandardPrimitiveRef id="ROUNDRECT_5"/>'
    pin = text.index(was, text.index('<Package name="R_0603_1608Metric_6"'))
    text = text[:pin] + '<StandardPrimitiveRef id="CUSTOM_T"/>' + text[pin + len(was):]
    dictionary = '<DictionaryStandard units="MILLIMETER">'
    text = text.replace(dictionary, dictionary + custom, 1)
    path = tmp_path / "custom.xml"
    path.write_text(text, encoding="utf-8")
    r1 = next(p for p in read_ipc2581(path).parts if p.ref == "R1")
    assert len(r1.pads) == 2
    first = min(r1.pads, key=lambda q: q.x)
    assert (first.x, first.y, first.w, first.h) == pytest.approx((-0.325, 0.0, 1.0, 0.4))


def test_a_rule_sets_provenance_names_each_input_by_its_bytes(tmp_path: Path) -> None:
    """The head of an imported rule set names each input with a hash of its bytes: a file's, or a folder's (an ODB++
    job, a Gerber set: its files' names and bytes), which a changed byte changes and a copy elsewhere keeps."""
    from inspector.board.provenance import carried, fingerprint, provenance

    for name, text in (("a.gbr", "G04 top*\n"), ("b.drl", "M48\n")):
        (tmp_path / "set" / "sub").mkdir(parents=True, exist_ok=True)
        (tmp_path / "set" / "sub" / name).write_text(text)
    first = fingerprint(tmp_path / "set")
    import shutil

    shutil.copytree(tmp_path / "set", tmp_path / "copy")
    assert fingerprint(tmp_path / "copy") == first and len(first) == 12
    (tmp_path / "copy" / "sub" / "b.drl").write_text("M48\nT1C1.0\n")
    assert fingerprint(tmp_path / "copy") != first
    (tmp_path / "bom.csv").write_text("Designator,Qty\nR1,1\n")
    head = provenance({"design": tmp_path / "set", "BOM": tmp_path / "bom.csv", "library": None}, "side top")
    bom = fingerprint(tmp_path / "bom.csv")
    assert head == f"# made from: design set (sha256 {first}), BOM bom.csv (sha256 {bom})\n# import options: side top\n"
    assert carried("# imported by x\n" + head + "recipe: r\n# made from: not the head\n") == head


def test_a_kicad_pad_drawn_off_its_hole_is_a_land_where_its_copper_is() -> None:
    """KiCad's TO-92_HandSolder draws each pad 0.4 mm off its hole (`(drill 0.75 (offset 0 0.4))`): the land is the
    copper, where KiCad's own Gerbers put it, at every turn and on the bottom (tests/cad/make_offset_kicad9.py);
    it was read at the hole."""
    stem = Path(__file__).parent / "cad" / "offset-kicad9"
    board = read_design(Path(f"{stem}.kicad_pcb"), None)
    copper = read_design(Path(f"{stem}-pos.csv"), None, gerber=Path(f"{stem}-gerbers-rs274x.zip"))

    def lands(design) -> dict[str, list[tuple[float, float]]]:  # noqa: ANN001 - image frame (y down), mm
        out = {}
        for p in design.parts:
            t, flip = math.radians(p.rotation), -1 if design.y_up else 1
            out[p.ref] = sorted((round(p.x_mm + x * math.cos(t) + flip * y * math.sin(t), 2),
                                 round(flip * p.y_mm - x * math.sin(t) + flip * y * math.cos(t), 2))
                                for x, y in dict.fromkeys((pad.x, pad.y) for pad in p.pads))
        return out

    first = next(p for p in board.parts if p.ref == "Q1")
    assert sorted((pad.x, pad.y) for pad in first.pads) == [(0.0, 0.4), (1.27, -1.67), (2.54, 0.4)]
    read, drawn = lands(board), lands(copper)
    assert sorted(read) == sorted(drawn) == ["Q1", "Q2", "Q3", "Q4", "Q5"]
    for ref in read:
        assert len(read[ref]) == len(drawn[ref]) == 3
        assert all(math.dist(a, b) < 0.02 for a, b in zip(read[ref], drawn[ref])), (ref, read[ref], drawn[ref])
