"""Writes tests/cad/bodies-kicad9.*: a small board of KiCad 9's own library footprints (their fabrication drawings
as the library draws them: outlines of lines and polygons, arcs and circles, the reference as text on the layer,
courtyards around them), placed with pcbnew's API on both sides at every quarter turn and one at 45 degrees, two
of them with overlapping courtyards; KiCad 9's ODB++ and IPC-2581 exports of it; and pcbnew's own box of each
part's fabrication drawing (bodies-kicad9.bodies.json: board frame, mm, y up; lines measured along their middle)
for tests/test_drawn_bodies.py to check the readers' bodies against. The footprints are the KiCad library's
(CC-BY-SA 4.0, whose exception leaves designs made with them free).

Not run by the tests: KiCad is not a dependency of the product. Regenerate with KiCad 9 and its footprint library
installed (Debian 12: bookworm-backports' kicad and kicad-footprints 9.0.8, whose Python module the system
interpreter imports):
    /usr/bin/python3 tests/cad/make_bodies_kicad9.py
"""
import json
from pathlib import Path

import pcbnew
from kicad_exports import edge, save_and_export

HERE = Path(__file__).parent
LIBRARY = Path("/usr/share/kicad/footprints")
MM = pcbnew.FromMM
FAB = (pcbnew.F_Fab, pcbnew.B_Fab)

# (reference, library, footprint, x, y, turn, bottom): rows of parts, the last two beside each other closer than
# their courtyards allow
PARTS = [
    ("R1", "Resistor_SMD", "R_0603_1608Metric", 6, 5, 0, False),
    ("C1", "Capacitor_SMD", "C_0805_2012Metric", 14, 5, 90, False),
    ("Q1", "Package_TO_SOT_SMD", "SOT-23", 22, 5, 180, False),
    ("U1", "Package_SO", "SOIC-8_3.9x4.9mm_P1.27mm", 32, 6, 270, False),
    ("U2", "Package_DFN_QFN", "QFN-16-1EP_3x3mm_P0.5mm_EP1.75x1.75mm", 44, 6, 0, False),
    ("C2", "Capacitor_SMD", "CP_Elec_6.3x5.4", 8, 16, 90, False),
    ("D1", "LED_THT", "LED_D5.0mm", 20, 16, 0, False),
    ("J1", "Connector_JST", "JST_SH_SM04B-SRSS-TB_1x04-1MP_P1.00mm_Horizontal", 34, 17, 180, False),
    ("U3", "Package_SO", "SOIC-8_3.9x4.9mm_P1.27mm", 48, 17, 45, False),
    ("J2", "Connector_PinHeader_2.54mm", "PinHeader_1x04_P2.54mm_Vertical", 8, 26, 90, False),
    ("C3", "Capacitor_SMD", "C_0603_1608Metric", 17.2, 27.3, 0, False),
    ("R2", "Resistor_SMD", "R_0603_1608Metric", 6, 34, 0, True),
    ("Q2", "Package_TO_SOT_SMD", "SOT-23", 14, 34, 90, True),
    ("U4", "Package_SO", "SOIC-8_3.9x4.9mm_P1.27mm", 24, 35, 180, True),
    ("C4", "Capacitor_SMD", "CP_Elec_6.3x5.4", 36, 35, 270, True),
    ("U5", "Package_DFN_QFN", "QFN-16-1EP_3x3mm_P0.5mm_EP1.75x1.75mm", 46, 34, 90, True),
]


def fab_box(fp: pcbnew.FOOTPRINT) -> list[float]:
    """The box of the footprint's drawn shapes on its fabrication layer, board frame, mm, y up: KiCad's own box of
    each shape with half its line's width taken off (a line measured along its middle, as the readers do)."""
    xs, ys = [], []
    for item in fp.GraphicalItems():
        if isinstance(item, pcbnew.PCB_SHAPE) and item.GetLayer() in FAB:
            box, half = item.GetBoundingBox(), item.GetWidth() / 2
            xs += [pcbnew.ToMM(box.GetLeft() + half), pcbnew.ToMM(box.GetRight() - half)]
            ys += [-pcbnew.ToMM(box.GetBottom() - half), -pcbnew.ToMM(box.GetTop() + half)]
    return [round(min(xs), 4), round(min(ys), 4), round(max(xs), 4), round(max(ys), 4)]


def main() -> None:
    board = pcbnew.BOARD()
    for ends in ((0, 0, 56, 0), (56, 0, 56, 42), (56, 42, 0, 42), (0, 42, 0, 0)):
        edge(board, ends)
    for ref, lib, name, x, y, turn, bottom in PARTS:
        fp = pcbnew.FootprintLoad(str(LIBRARY / f"{lib}.pretty"), name)
        fp.SetReference(ref)
        board.Add(fp)
        fp.SetPosition(pcbnew.VECTOR2I(MM(x), MM(y)))
        fp.SetOrientationDegrees(turn)
        if bottom:
            fp.Flip(fp.GetPosition(), pcbnew.FLIP_DIRECTION_TOP_BOTTOM)
    board = save_and_export(board, "bodies-kicad9")
    parts = {fp.GetReference(): {"side": "bottom" if fp.IsFlipped() else "top",
                                 "turn": fp.GetOrientationDegrees(), "fab": fab_box(fp)}
             for fp in sorted(board.GetFootprints(), key=lambda f: f.GetReference())}
    (HERE / "bodies-kicad9.bodies.json").write_text(json.dumps({"kicad": pcbnew.Version(), "parts": parts},
                                                               indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
