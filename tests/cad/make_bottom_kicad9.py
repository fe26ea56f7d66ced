"""Writes tests/cad/bottom-kicad9.*: a small board made with KiCad 9's own pcbnew API, its parts on both sides at every
quarter turn (footprints with no symmetry a mirror could hide), and KiCad 9's ODB++ and IPC-2581 exports of it, with
pcbnew's own pad centres beside them (bottom-kicad9.pads.json, mm, y up) for tests/test_board_import.py to check the
readers against.

Not run by the tests: KiCad is not a dependency of the product. Regenerate with KiCad 9 installed (Debian 12:
bookworm-backports' kicad 9.0.8, whose Python module the system interpreter imports):
    /usr/bin/python3 tests/cad/make_bottom_kicad9.py
"""
import json
from pathlib import Path

import pcbnew
from kicad_exports import save_and_export

HERE = Path(__file__).parent
MM = pcbnew.FromMM

SOT23 = {"name": "SOT-23", "body": (-1.45, -0.65, 1.45, 0.65),
         "pads": [("1", -0.95, 1.0, 0.6, 0.7), ("2", 0.95, 1.0, 0.6, 0.7), ("3", 0.0, -1.0, 0.6, 0.7)]}
SOIC8 = {"name": "SOIC-8_3.9x4.9mm_P1.27mm",
         "pads": [(str(i + 1), -2.475, -1.905 + 1.27 * i, 1.95, 0.6) for i in range(4)] +
                 [(str(i + 5), 2.475, 1.905 - 1.27 * i, 1.95, 0.6) for i in range(4)],
         "body": (-1.95, -2.45, 1.95, 2.45)}
LED = {"name": "LED_0603_1608Metric",  # a chip whose two pads differ: the cathode's is smaller
       "pads": [("1", -0.7875, 0.0, 0.875, 0.95), ("2", 0.8, 0.0, 0.6, 0.95)], "body": (-0.8, -0.4, 0.8, 0.4)}


def shape(parent: object, kind: int, layer: int, ends: tuple[float, float, float, float]) -> pcbnew.PCB_SHAPE:
    """A drawn segment or rectangle from (x0, y0) to (x1, y1), mm."""
    drawn = pcbnew.PCB_SHAPE(parent, kind)
    drawn.SetLayer(layer)
    drawn.SetStart(pcbnew.VECTOR2I(MM(ends[0]), MM(ends[1])))
    drawn.SetEnd(pcbnew.VECTOR2I(MM(ends[2]), MM(ends[3])))
    drawn.SetWidth(MM(0.1))
    return drawn


def place(board: pcbnew.BOARD, ref: str, kind: dict, x: float, y: float, turn: float, bottom: bool) -> None:
    fp = pcbnew.FOOTPRINT(board)
    fp.SetFPID(pcbnew.LIB_ID("Made", kind["name"]))
    fp.SetReference(ref)
    fp.SetValue(kind["name"])
    fp.Reference().SetVisible(False)  # their text, stroked into the exports, would make the files ten times larger
    fp.Value().SetVisible(False)
    for number, px, py, w, h in kind["pads"]:
        pad = pcbnew.PAD(fp)
        pad.SetNumber(number)
        pad.SetAttribute(pcbnew.PAD_ATTRIB_SMD)
        pad.SetShape(pcbnew.PAD_SHAPE_RECT)
        pad.SetSize(pcbnew.VECTOR2I(MM(w), MM(h)))
        pad.SetLayerSet(pad.SMDMask())
        pad.SetFPRelativePosition(pcbnew.VECTOR2I(MM(px), MM(py)))
        fp.Add(pad)
    fp.Add(shape(fp, pcbnew.SHAPE_T_RECTANGLE, pcbnew.F_Fab, kind["body"]))
    board.Add(fp)
    fp.SetPosition(pcbnew.VECTOR2I(MM(x), MM(y)))
    fp.SetOrientationDegrees(turn)
    if bottom:
        fp.Flip(fp.GetPosition(), pcbnew.FLIP_DIRECTION_TOP_BOTTOM)


def main() -> None:
    board = pcbnew.BOARD()
    for x0, y0, x1, y1 in ((0, 0, 60, 0), (60, 0, 60, 40), (60, 40, 0, 40), (0, 40, 0, 0)):
        board.Add(shape(board, pcbnew.SHAPE_T_SEGMENT, pcbnew.Edge_Cuts, (x0, y0, x1, y1)))
    n = 0
    for side, bottom in (("top", False), ("bottom", True)):
        for turn in (0, 90, 180, 270):
            for kind, prefix in ((SOT23, "Q"), (SOIC8, "U"), (LED, "D")):
                n += 1
                x = 6 + 12 * (turn // 90)
                y = {"Q": 5, "U": 13, "D": 20}[prefix] + (0 if side == "top" else 18)
                place(board, f"{prefix}{n}", kind, x, y, turn, bottom)
    board = save_and_export(board, "bottom-kicad9")
    pads = {fp.GetReference(): {"side": "bottom" if fp.IsFlipped() else "top",
                                "pads": [[round(pcbnew.ToMM(p.GetPosition().x), 4),
                                          round(-pcbnew.ToMM(p.GetPosition().y), 4)] for p in fp.Pads()]}
            for fp in sorted(board.GetFootprints(), key=lambda f: f.GetReference())}
    (HERE / "bottom-kicad9.pads.json").write_text(json.dumps({"kicad": pcbnew.Version(), "parts": pads}, indent=1),
                                                  encoding="utf-8")


if __name__ == "__main__":
    main()
