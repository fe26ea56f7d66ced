"""A part's body from its file's assembly drawing (inspector/board/drawn_bodies.py, odbpp_drawings.py,
ipc2581_drawings.py): KiCad writes an ODB++ or IPC-2581 package's outline from its courtyard, and the body is read
from the fabrication layer instead. Checked on tests/cad/bodies-kicad9.*, KiCad 9's own library footprints placed
and exported by KiCad 9 (make_bodies_kicad9.py), against pcbnew's own box of each part's drawing, and on small
hand-written features files for what the export does not show."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from inspector.board.design import CadError, PlacedPart, arc_points, turned
from inspector.board.drawn_bodies import Drawing, drawn_boxes
from inspector.board.ipc2581 import read_ipc2581
from inspector.board.kicad import read_kicad
from inspector.board.library import load_library
from inspector.board.odbpp import read_odbpp
from inspector.board.odbpp_drawings import body_layers, drawings
from inspector.board.to_rules import import_design

from .kicad9_jobs import edited_job

CAD = Path(__file__).parent / "cad"


def _placed_box(part: PlacedPart, y_up: bool) -> list[float]:
    """The part's body on the board (y up), as the box holding its corners."""
    x0, y0, x1, y1 = part.body
    pts = []
    for fx, fy in ((x0, y0), (x1, y0), (x1, y1), (x0, y1)):
        dx, dy = turned(fx, fy if y_up else -fy, part.rotation)
        pts.append((part.x_mm + dx, (part.y_mm if y_up else -part.y_mm) + dy))
    return [min(p[0] for p in pts), min(p[1] for p in pts), max(p[0] for p in pts), max(p[1] for p in pts)]


def _designs() -> tuple:
    return (read_kicad(CAD / "bodies-kicad9.kicad_pcb"), read_odbpp(CAD / "bodies-kicad9-odb.zip"),
            read_ipc2581(CAD / "bodies-kicad9-ipc2581.xml"))


def test_kicad_9s_exports_give_every_part_the_body_its_fabrication_layer_draws() -> None:
    """Every reader's body lands on pcbnew's box of the part's fabrication drawing (0.02 mm: the ODB++ export's
    precision), on both sides and at every quarter turn: chip outlines drawn as rectangles and lines, a polarised
    can's chamfered polygon, an LED's arc and circle, a connector whose drawing reaches past its courtyard, the
    reference drawn as text on the layer beside each. The SOIC at 45 degrees has the body of the same footprint
    at a quarter turn."""
    truth = json.loads((CAD / "bodies-kicad9.bodies.json").read_text(encoding="utf-8"))["parts"]
    for design in _designs():
        parts = {p.ref: p for p in design.parts}
        assert set(parts) == set(truth), design.format
        for ref, part in parts.items():
            if ref == "U3":
                continue
            got = _placed_box(part, design.y_up)
            assert max(abs(a - b) for a, b in zip(got, truth[ref]["fab"])) <= 0.02, (design.format, ref, got)
        u1, u3 = parts["U1"].body, parts["U3"].body
        assert parts["U3"].rotation % 360 in (45.0, 315.0)
        assert abs((u3[2] - u3[0]) - (u1[2] - u1[0])) <= 0.02 and abs((u3[3] - u3[1]) - (u1[3] - u1[1])) <= 0.02
    kicad, odb, ipc = _designs()
    assert "steps/pcb: the top parts' bodies are their assembly drawing (document layer f.fab): 11 of 11" in odb.notes
    assert "steps/pcb: the bottom parts' bodies are their assembly drawing (document layer b.fab): 5 of 5" in odb.notes
    assert ("step bodies-kicad9: the top parts' bodies are their assembly drawing (ASSEMBLY layer F.Fab): 11 of 11"
            in ipc.notes)


def _without_fab(tmp_path: Path) -> Path:
    return edited_job(tmp_path / "nofab.zip",
                      lambda name, data: None if "/f.fab/" in name or "/b.fab/" in name else data)


def test_without_its_assembly_drawing_a_job_keeps_the_courtyard_and_says_so(tmp_path: Path) -> None:
    """The same job without its fabrication layers: the bodies are the package outlines KiCad writes from the
    courtyards (larger than the parts), the import says nothing drew them, and the capacitor beside the header,
    whose courtyards overlap, is refused by the rule validator; with the drawings both are inspected, as from the
    board file."""
    bare = read_odbpp(_without_fab(tmp_path))
    truth = json.loads((CAD / "bodies-kicad9.bodies.json").read_text(encoding="utf-8"))["parts"]
    c3 = next(p for p in bare.parts if p.ref == "C3")
    got = _placed_box(c3, True)
    assert got[0] < truth["C3"]["fab"][0] - 0.2 and got[2] > truth["C3"]["fab"][2] + 0.2  # a courtyard, not a body
    assert any("nothing in the file draws the top parts' bodies" in n for n in bare.notes)
    library = load_library(None)
    inspected = {}
    for name, design in (("board file", _designs()[0]), ("ODB++", _designs()[1]), ("bare ODB++", bare)):
        fates = import_design(design, library, 10.0, "top").fates
        inspected[name] = {f.ref for f in fates if f.inspected}
    assert {"C3", "J2"} <= inspected["board file"] and inspected["ODB++"] == inspected["board file"]
    assert "C3" not in inspected["bare ODB++"] or "J2" not in inspected["bare ODB++"]


FEATURES = """UNITS=MM
$0 r100
$1 donut_rc1700x900x100xr50
$2 rect1000x400
$3 userdefined_logo
@0 .string
&0 R1
L 9.0 -0.4 11.0 -0.4 0 P 0
L 11.0 -0.4 11.0 0.4 0 P 0
L 11.0 0.4 9.0 0.4 0 P 0
L 9.0 0.4 9.0 -0.4 0 P 0
L 8.6 0.0 11.4 0.0 0 P 0 ;0=0
L 9.2 -0.9 10.8 -0.9 0 N 0
P 20.0 0.0 1 P 0 8 90.0
P 30.0 0.0 2 P 0 1
P 40.0 0.0 3 P 0 0
S P 0
OB 49.0 -1.0 I
OS 51.0 -1.0
OC 51.0 1.0 51.0 0.0 N
OS 49.0 1.0
OE
SE
"""


def _part(ref: str, x: float, outline: tuple[float, float, float, float], rotation: float = 0.0) -> PlacedPart:
    return PlacedPart(ref, "", "pkg", x, 0.0, rotation, "top", body=outline)


def test_an_odbpp_features_file_gives_its_drawings_without_text_or_erasures() -> None:
    """Four strokes meeting end to end are one outline; the reference stroked as text (the `.string` attribute) and
    a negative line are not drawings; a rectangle drawn as a line (donut_rc) is its middle line, turned by the pad's
    angle (orient 8); a filled rect turned a quarter (orient 1); a user's own symbol is passed over; a surface's
    arc bulges past its ends."""
    drawn = drawings(FEATURES.splitlines(), 1.0, "features")
    parts = [_part("R1", 10.0, (-1.5, -1.0, 1.5, 1.0)), _part("D1", 20.0, (-1.5, -1.5, 1.5, 1.5)),
             _part("C1", 30.0, (-1.0, -1.0, 1.0, 1.0)), _part("S1", 50.0, (-2.0, -2.0, 2.0, 2.0))]
    boxes, held, total = drawn_boxes(parts, drawn)
    assert total == 4 and held == 4  # the outline, the two pads, the surface (the logo symbol is no drawing)
    assert boxes["R1"] == pytest.approx((-1.0, -0.4, 1.0, 0.4))
    assert boxes["D1"] == pytest.approx((-0.4, -0.8, 0.4, 0.8))
    assert boxes["C1"] == pytest.approx((-0.2, -0.5, 0.2, 0.5))
    assert boxes["S1"] == pytest.approx((-1.0, -1.0, 2.0, 1.0), abs=0.01)


@pytest.mark.parametrize(("line", "said"), [("OS 51.0", "expected 2 numbers, read '51.0'"),
                                            ("OC 51.0 1.0 x 0.0 N", "expected 4 numbers, read '51.0 1.0 x 0.0'"),
                                            ("P 20.0 0.0 1 P 0 8 ninety", "expected 1 number, read 'ninety'")])
def test_a_malformed_drawing_line_is_refused_naming_its_line(line: str, said: str) -> None:
    """A surface's point, an arc or a pad's free angle that is not numbers stops the import at its line (it was
    passed over, or raised Python's own error)."""
    rows = FEATURES.splitlines()
    n = next(i for i, r in enumerate(rows) if r.split()[0] == line.split()[0] and (line[0] != "P" or " 8 " in r))
    rows[n] = line
    with pytest.raises(CadError, match=f"^features:{n + 1}: {said}$"):
        drawings(rows, 1.0, "features")


def test_a_drawing_goes_to_the_part_it_lies_over_the_smallest_where_several_cover_it() -> None:
    """A small part's outline inside a large neighbour's courtyard is the small part's; the large part's own outline,
    which only partly lies over the small one, is the large one's; a drawing lying over no part is nobody's, and a
    lone line is no body."""
    header = _part("J1", 0.0, (-6.0, -2.0, 6.0, 2.0))
    cap = _part("C1", 5.0, (-1.0, -0.6, 1.0, 0.6), rotation=90.0)

    def box(x0: float, y0: float, x1: float, y1: float) -> Drawing:
        return Drawing(((x0, y0), (x1, y0), (x1, y1), (x0, y1), (x0, y0)), stroke=True)

    drawn = [box(4.6, -0.8, 5.4, 0.8), box(-5.5, -1.5, 5.5, 1.5), box(20.0, 20.0, 22.0, 22.0),
             Drawing(((-1.0, 1.9), (1.0, 1.9)), ref=None, stroke=True)]
    boxes, held, total = drawn_boxes([header, cap], drawn)
    assert boxes["C1"] == pytest.approx((-0.8, -0.4, 0.8, 0.4))  # in its own frame: turned a quarter back
    assert boxes["J1"] == pytest.approx((-5.5, -1.5, 5.5, 1.9))  # the lone line over it joins its own drawings
    assert (held, total) == (3, 4)
    alone, _h, _t = drawn_boxes([header], [Drawing(((-1.0, 1.9), (1.0, 1.9)), stroke=True)])
    assert alone == {}


def test_a_layer_is_a_sides_drawing_only_where_its_drawings_lie_on_that_sides_parts() -> None:
    """Of a job's document layers, the one whose drawings lie on the top parts draws their bodies; a notes layer
    whose drawings lie mostly off the parts, and a layer that draws the outlines again (a courtyard), are not
    taken; no layer is taken for a side none draws."""
    parts = [_part(f"R{i}", 10.0 * i, (-1.5, -1.0, 1.5, 1.0)) for i in range(1, 5)]
    parts.append(PlacedPart("B1", "", "pkg", 100.0, 0.0, 0.0, "bottom", body=(-1.5, -1.0, 1.5, 1.0)))

    def rect(x: float, half_w: float, half_h: float) -> Drawing:
        return Drawing(((x - half_w, -half_h), (x + half_w, -half_h), (x + half_w, half_h), (x - half_w, half_h)))

    layers = {"fab": [rect(10.0 * i, 1.0, 0.5) for i in range(1, 5)],
              "notes": [rect(10.0, 0.5, 0.5)] + [rect(200.0 + 10 * i, 1.0, 1.0) for i in range(5)],
              "courtyard": [rect(10.0 * i, 1.5, 1.0) for i in range(1, 5)]}
    chosen = body_layers(parts, layers)
    assert set(chosen) == {"top"} and chosen["top"][0] == "fab" and len(chosen["top"][1]) == 4


def test_a_kicad_arc_is_measured_along_it_in_both_ways_kicad_writes_one() -> None:
    """KiCad 6+ names an arc by start, mid and end; KiCad 5 by its centre (`start`), first point (`end`) and sweep
    (`angle`). Both give the half circle's box, not the three points' (nor the centre's)."""
    from inspector.board.kicad import _arc, parse

    new = parse('(kicad_pcb (fp_arc (start -1 0) (mid 0 -1) (end 1 0) (layer "F.Fab")))', "x")[1]
    old = parse("(kicad_pcb (fp_arc (start 0 0) (end -1 0) (angle 180) (layer F.Fab)))", "x")[1]
    for arc in (new, old):
        pts = _arc(arc)
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        assert (min(xs), max(xs)) == pytest.approx((-1.0, 1.0)) and max(abs(y) for y in ys) == pytest.approx(1.0)
        assert max(ys) - min(ys) == pytest.approx(1.0, abs=1e-6)  # one half only
    assert arc_points((1.0, 0.0), (0.0, 1.0), (0.0, 0.0), clockwise=False)[-1] == (0.0, 1.0)


def test_a_damaged_drawing_layer_is_named_and_the_parts_stand_without_it(tmp_path: Path) -> None:
    """A document layer whose features file cannot be read does not stop the import: its file and line are named in
    the notes, and the parts keep their package outlines on that side (the other side's layer is still read)."""
    job = edited_job(tmp_path / "damaged.zip", lambda name, data: data.replace(
        b"\nL ", b"\nL 1.0 two 3.0 4.0 0 P 0\nL ", 1) if name.endswith("/f.fab/features") else data)
    design = read_odbpp(job)
    damaged = [n for n in design.notes if "is not read for the parts' bodies" in n]
    assert len(damaged) == 1 and "f.fab/features:" in damaged[0] and "expected 4 numbers" in damaged[0]
    assert any("nothing in the file draws the top parts' bodies" in n for n in design.notes)
    assert "steps/pcb: the bottom parts' bodies are their assembly drawing (document layer b.fab): 5 of 5" in \
        design.notes


def test_an_unreadable_ipc2581_assembly_drawing_leaves_the_package_outlines(tmp_path: Path) -> None:
    """A drawing on an IPC-2581 ASSEMBLY layer with a value that is no number: the import goes on with the packages'
    outlines as bodies and says why."""
    text = (CAD / "bodies-kicad9-ipc2581.xml").read_text(encoding="utf-8")
    head, _, tail = text.partition('<LayerFeature layerRef="F.Fab">')
    path = tmp_path / "damaged.xml"
    path.write_text(head + '<LayerFeature layerRef="F.Fab">' + tail.replace('<Location x="', '<Location x="x', 1),
                    encoding="utf-8")
    design = read_ipc2581(path)
    assert len(design.parts) == 16
    said = [n for n in design.notes if "an ASSEMBLY layer's drawing cannot be read" in n]
    assert len(said) == 1 and "<Location> has x=" in said[0]
