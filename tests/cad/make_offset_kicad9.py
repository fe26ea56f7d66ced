"""Writes tests/cad/offset-kicad9.*: through-hole pads whose copper is offset from their hole, placed with pcbnew's
API: KiCad 9's own TO-92_HandSolder footprint (its enlarged pads drawn 0.4 mm off their 0.75 mm holes,
`(drill 0.75 (offset 0 0.4))`), as the kicad-demos' complex_hierarchy board carries it from KiCad's library, at
four turns on the top (Q1-Q4) and one on the bottom (Q5).

Exports, by KiCad's own `kicad-cli`: offset-kicad9-gerbers-rs274x.zip (plain RS-274X and Excellon, the `#@!` attribute
comments taken out) and offset-kicad9-pos.csv (the placement file): the copper where pcbnew draws it, which a land
read from the board file must match. The footprint is the KiCad library's (CC-BY-SA 4.0, whose exception leaves
designs made with them free).

Not run by the tests: KiCad is not a dependency of the product. Regenerate with KiCad 9 and its demos installed
(Debian 12: bookworm-backports' kicad and kicad-demos 9.0.8; the demos unpacked under DEMOS):
    /usr/bin/python3 tests/cad/make_offset_kicad9.py [DEMOS]
"""
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pcbnew
from kicad_exports import edge

HERE = Path(__file__).parent
STEM = "offset-kicad9"
DEMOS = Path(sys.argv[1] if len(sys.argv) > 1 else "/usr/share/kicad/demos")
MM = pcbnew.FromMM
LAYERS = "F.Cu,B.Cu,F.Mask,B.Mask,F.Paste,B.Paste,Edge.Cuts"
PLACES = [("Q1", 5, 5, 0, "top"), ("Q2", 12, 5, 90, "top"), ("Q3", 19, 5, 180, "top"), ("Q4", 5, 13, 270, "top"),
          ("Q5", 14, 14, 30, "bottom")]


def main() -> None:
    demo = pcbnew.LoadBoard(str(DEMOS / "complex_hierarchy" / "complex_hierarchy.kicad_pcb"))
    source = demo.FindFootprintByReference("Q201")
    assert source.GetFPID().GetLibItemName() == "TO-92_HandSolder"
    board = pcbnew.BOARD()
    for ends in ((0, 0, 24, 0), (24, 0, 24, 20), (24, 20, 0, 20), (0, 20, 0, 0)):
        edge(board, ends)
    for ref, x, y, turn, side in PLACES:
        fp = pcbnew.FOOTPRINT(source)
        fp.SetParent(board)
        fp.SetReference(ref)
        board.Add(fp)
        fp.SetOrientationDegrees(0)
        fp.SetPosition(pcbnew.VECTOR2I(MM(x), MM(y)))
        fp.SetOrientationDegrees(turn)
        if side == "bottom":
            fp.Flip(fp.GetPosition(), pcbnew.FLIP_DIRECTION_LEFT_RIGHT)
    pcb = HERE / f"{STEM}.kicad_pcb"
    board.Save(str(pcb))
    for extra in (".kicad_pro", ".kicad_prl"):
        pcb.with_suffix(extra).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "gerbers")
        subprocess.run(["kicad-cli", "pcb", "export", "gerbers", "--layers", LAYERS, "--no-x2", "--no-netlist",
                        "--disable-aperture-macros", "-o", str(out), str(pcb)], check=True, capture_output=True)
        subprocess.run(["kicad-cli", "pcb", "export", "drill", "--excellon-separate-th", "-o", f"{out}/", str(pcb)],
                       check=True, capture_output=True)
        with zipfile.ZipFile(HERE / f"{STEM}-gerbers-rs274x.zip", "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(p for p in out.iterdir() if p.suffix != ".gbrjob"):
                z.writestr(f.name, "".join(line for line in f.read_text().splitlines(keepends=True)
                                           if "#@!" not in line))
    subprocess.run(["kicad-cli", "pcb", "export", "pos", "--format", "csv", "--units", "mm", "--side", "both", "-o",
                    str(HERE / f"{STEM}-pos.csv"), str(pcb)], check=True, capture_output=True)


if __name__ == "__main__":
    main()
