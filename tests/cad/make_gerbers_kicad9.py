"""Makes the Gerber fixtures from tests/cad/bodies-kicad9.kicad_pcb with KiCad 9's own `kicad-cli`: the board's
fabrication set as a plant gets it beside its placement file.

- bodies-kicad9-gerbers.zip: Gerber X2 (KiCad's default: file functions, pads tied to their parts by `%TO.P`);
- bodies-kicad9-gerbers-rs274x.zip: plain RS-274X, as older CAM tools write it: no attributes (KiCad's `--no-x2
  --no-netlist` still writes them as `G04 #@!` comments, which are taken out here), no aperture macros (pads as
  regions), so the layers are known by their names alone and pads go to parts by place;
- bodies-kicad9-gerbers-x3.zip: the X2 set with Gerber X3's component layers (`export pos --format gerber`, a
  file a side): the placement in the set itself;
- bodies-kicad9-pos.csv: KiCad's placement file, both sides, mm.

Only the layers an import reads are kept (both copper, mask and paste layers, the edge). Needs KiCad 9 (see
make_bottom_kicad9.py); not run by the tests."""
import subprocess
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).parent
STEM = "bodies-kicad9"
LAYERS = "F.Cu,B.Cu,F.Mask,B.Mask,F.Paste,B.Paste,Edge.Cuts"


def export(out: Path, *flags: str) -> list[Path]:
    subprocess.run(["kicad-cli", "pcb", "export", "gerbers", "--layers", LAYERS, *flags, "-o", str(out),
                    str(HERE / f"{STEM}.kicad_pcb")], check=True, capture_output=True)
    return sorted(p for p in out.iterdir() if p.suffix != ".gbrjob")


def zipped(files: list[Path], name: str, strip_attributes: bool) -> None:
    with zipfile.ZipFile(HERE / name, "w", zipfile.ZIP_DEFLATED) as z:
        for f in files:
            text = f.read_text()
            if strip_attributes:
                text = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("G04 #@!"))
            z.writestr(f.name, text)


with tempfile.TemporaryDirectory() as tmp:
    x2, plain = Path(tmp, "x2"), Path(tmp, "plain")
    zipped(export(x2), f"{STEM}-gerbers.zip", False)
    for side, name in (("front", "top"), ("back", "bottom")):
        subprocess.run(["kicad-cli", "pcb", "export", "pos", "--format", "gerber", "--side", side, "-o",
                        str(x2 / f"{STEM}-{name}-pos.gbr"), str(HERE / f"{STEM}.kicad_pcb")], check=True,
                       capture_output=True)
    zipped(export(x2), f"{STEM}-gerbers-x3.zip", False)
    zipped(export(plain, "--no-x2", "--no-netlist", "--disable-aperture-macros"), f"{STEM}-gerbers-rs274x.zip", True)
subprocess.run(["kicad-cli", "pcb", "export", "pos", "--format", "csv", "--units", "mm", "--side", "both", "-o",
                str(HERE / f"{STEM}-pos.csv"), str(HERE / f"{STEM}.kicad_pcb")], check=True, capture_output=True)
