"""Writes tests/cad/holes-kicad9.*: a board whose copper puts a pad over a pad on the other side without a part's
lead through it, beside one through-hole part, placed with pcbnew's API from KiCad 9's own library:

- J1, a 1x3 pin header: the one through-hole part (1.0 mm holes);
- U1, a QFN with thermal vias in its exposed pad (0.2 mm plated holes, their copper on both sides): surface mount;
- R1 on the top and R2 on the bottom at the same place: two 0603s stacked, each pad over the other side's;
- C1, a 0603 with a 0.3 mm via in its pad (via-in-pad);
- J2, a USB-C socket: 16 surface pins and 4 plated legs in oval holes (KiCad's drill file writes them as G85
  slots), a hybrid the placement machine puts in paste (KiCad's footprint calls it SMD).

Exports, by KiCad's own `kicad-cli`: holes-kicad9-gerbers.zip (Gerber X2 and the Excellon drill files, plated and
not plated apart), holes-kicad9-gerbers-rs274x.zip (plain RS-274X and Excellon, the `#@!` attribute comments taken
out, as make_gerbers_kicad9.py writes its own) and holes-kicad9-pos.csv (the placement file). The footprints are the
KiCad library's (CC-BY-SA 4.0, whose exception leaves designs made with them free).

Not run by the tests: KiCad is not a dependency of the product. Regenerate with KiCad 9 and its footprint library
installed (Debian 12: bookworm-backports' kicad and kicad-footprints 9.0.8):
    /usr/bin/python3 tests/cad/make_holes_kicad9.py
"""
import subprocess
import tempfile
import zipfile
from pathlib import Path

import pcbnew
from kicad_exports import edge

HERE = Path(__file__).parent
STEM = "holes-kicad9"
LIBRARY = Path("/usr/share/kicad/footprints")
MM = pcbnew.FromMM
LAYERS = "F.Cu,B.Cu,F.Mask,B.Mask,F.Paste,B.Paste,Edge.Cuts"
PARTS = [("J1", "Connector_PinHeader_2.54mm", "PinHeader_1x03_P2.54mm_Vertical", 4, 4, 0, "top"),
         ("U1", "Package_DFN_QFN", "QFN-16-1EP_3x3mm_P0.5mm_EP1.75x1.75mm_ThermalVias", 15, 6, 0, "top"),
         ("R1", "Resistor_SMD", "R_0603_1608Metric", 9, 13, 0, "top"),
         ("R2", "Resistor_SMD", "R_0603_1608Metric", 9, 13, 0, "bottom"),
         ("C1", "Capacitor_SMD", "C_0603_1608Metric", 16, 13, 0, "top"),
         ("J2", "Connector_USB", "USB_C_Receptacle_HRO_TYPE-C-31-M-12", 6, 21, 0, "top")]


def main() -> None:
    board = pcbnew.BOARD()
    for ends in ((0, 0, 22, 0), (22, 0, 22, 26), (22, 26, 0, 26), (0, 26, 0, 0)):
        edge(board, ends)
    for ref, lib, name, x, y, turn, side in PARTS:
        fp = pcbnew.FootprintLoad(str(LIBRARY / f"{lib}.pretty"), name)
        fp.SetReference(ref)
        board.Add(fp)
        fp.SetPosition(pcbnew.VECTOR2I(MM(x), MM(y)))
        fp.SetOrientationDegrees(turn)
        if side == "bottom":
            fp.Flip(fp.GetPosition(), pcbnew.FLIP_DIRECTION_LEFT_RIGHT)
    c1 = board.FindFootprintByReference("C1")
    via = pcbnew.PCB_VIA(board)
    via.SetPosition(c1.FindPadByNumber("1").GetPosition())
    via.SetDrill(MM(0.3))
    via.SetWidth(MM(0.6))
    board.Add(via)
    pcb = HERE / f"{STEM}.kicad_pcb"
    board.Save(str(pcb))
    for extra in (".kicad_pro", ".kicad_prl"):
        pcb.with_suffix(extra).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, flags, plain in (("gerbers", [], False),
                                   ("gerbers-rs274x", ["--no-x2", "--no-netlist", "--disable-aperture-macros"], True)):
            out = Path(tmp, name)
            subprocess.run(["kicad-cli", "pcb", "export", "gerbers", "--layers", LAYERS, *flags, "-o", str(out),
                            str(pcb)], check=True, capture_output=True)
            subprocess.run(["kicad-cli", "pcb", "export", "drill", "--excellon-separate-th", "-o", f"{out}/",
                            str(pcb)], check=True, capture_output=True)
            with zipfile.ZipFile(HERE / f"{STEM}-{name}.zip", "w", zipfile.ZIP_DEFLATED) as z:
                for f in sorted(p for p in out.iterdir() if p.suffix != ".gbrjob"):
                    text = f.read_text()
                    if plain:
                        text = "".join(line for line in text.splitlines(keepends=True) if "#@!" not in line)
                    z.writestr(f.name, text)
    subprocess.run(["kicad-cli", "pcb", "export", "pos", "--format", "csv", "--units", "mm", "--side", "both", "-o",
                    str(HERE / f"{STEM}-pos.csv"), str(pcb)], check=True, capture_output=True)


if __name__ == "__main__":
    main()
