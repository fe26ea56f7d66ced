"""Writes tests/cad/dense-kicad9.*: a row of 0402 resistors 1.2 mm apart (closer than a pad's reach of its
neighbour, as on a dense board) and a column of 0402 capacitors beside them, placed with pcbnew's API from KiCad 9's
own library, with KiCad's plain RS-274X Gerbers of it (dense-kicad9-gerbers-rs274x.zip: no attributes, no aperture
macros, the `G04 #@!` comments taken out, as make_gerbers_kicad9.py writes its own) and its placement file
(dense-kicad9-pos.csv). The footprints are the KiCad library's (CC-BY-SA 4.0, whose exception leaves designs made
with them free).

Not run by the tests: KiCad is not a dependency of the product. Regenerate with KiCad 9 and its footprint library
installed (Debian 12: bookworm-backports' kicad and kicad-footprints 9.0.8):
    /usr/bin/python3 tests/cad/make_dense_kicad9.py
"""
import subprocess
import tempfile
import zipfile
from pathlib import Path

import pcbnew
from kicad_exports import edge

HERE = Path(__file__).parent
STEM = "dense-kicad9"
LIBRARY = Path("/usr/share/kicad/footprints")
MM = pcbnew.FromMM
LAYERS = "F.Cu,B.Cu,F.Mask,B.Mask,F.Paste,B.Paste,Edge.Cuts"
PARTS = [(f"R{k + 1}", "Resistor_SMD", "R_0402_1005Metric", 5 + 1.2 * k, 5, 0) for k in range(6)] + [
    (f"C{k + 1}", "Capacitor_SMD", "C_0402_1005Metric", 13.5, 4 + 1.0 * k, 0) for k in range(4)]


def main() -> None:
    board = pcbnew.BOARD()
    for ends in ((0, 0, 18, 0), (18, 0, 18, 10), (18, 10, 0, 10), (0, 10, 0, 0)):
        edge(board, ends)
    for ref, lib, name, x, y, turn in PARTS:
        fp = pcbnew.FootprintLoad(str(LIBRARY / f"{lib}.pretty"), name)
        fp.SetReference(ref)
        board.Add(fp)
        fp.SetPosition(pcbnew.VECTOR2I(MM(x), MM(y)))
        fp.SetOrientationDegrees(turn)
    pcb = HERE / f"{STEM}.kicad_pcb"
    board.Save(str(pcb))
    for extra in (".kicad_pro", ".kicad_prl"):
        pcb.with_suffix(extra).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["kicad-cli", "pcb", "export", "gerbers", "--layers", LAYERS, "--no-x2", "--no-netlist",
                        "--disable-aperture-macros", "-o", tmp, str(pcb)], check=True, capture_output=True)
        with zipfile.ZipFile(HERE / f"{STEM}-gerbers-rs274x.zip", "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(p for p in Path(tmp).iterdir() if p.suffix != ".gbrjob"):
                z.writestr(f.name, "".join(line for line in f.read_text().splitlines(keepends=True)
                                           if not line.startswith("G04 #@!")))
    subprocess.run(["kicad-cli", "pcb", "export", "pos", "--format", "csv", "--units", "mm", "--side", "both", "-o",
                    str(HERE / f"{STEM}-pos.csv"), str(pcb)], check=True, capture_output=True)


if __name__ == "__main__":
    main()
