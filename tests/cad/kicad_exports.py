"""What the fixture makers here share: a pcbnew board saved as tests/cad/STEM.kicad_pcb and exported by KiCad 9's
own `kicad-cli` as STEM-odb.zip and STEM-ipc2581.xml, then loaded back as pcbnew saved it (the truth beside them
is read from that). Needs KiCad 9 (see make_bottom_kicad9.py); not run by the tests."""
import subprocess
from pathlib import Path

import pcbnew

HERE = Path(__file__).parent


def save_and_export(board: pcbnew.BOARD, stem: str) -> pcbnew.BOARD:
    """The board written and exported under `stem`, as pcbnew loads it back."""
    pcb = HERE / f"{stem}.kicad_pcb"
    board.Save(str(pcb))
    for extra in (".kicad_pro", ".kicad_prl"):
        pcb.with_suffix(extra).unlink(missing_ok=True)
    subprocess.run(["kicad-cli", "pcb", "export", "odb", "--compression", "zip", "--precision", "2", "-o",
                    str(HERE / f"{stem}-odb.zip"), str(pcb)], check=True)
    subprocess.run(["kicad-cli", "pcb", "export", "ipc2581", "-o", str(HERE / f"{stem}-ipc2581.xml"), str(pcb)],
                   check=True)
    return pcbnew.LoadBoard(str(pcb))


def edge(board: pcbnew.BOARD, ends: tuple[float, float, float, float]) -> None:
    """A line of the board's edge (Edge.Cuts) from (x0, y0) to (x1, y1), mm."""
    drawn = pcbnew.PCB_SHAPE(board, pcbnew.SHAPE_T_SEGMENT)
    drawn.SetLayer(pcbnew.Edge_Cuts)
    drawn.SetStart(pcbnew.VECTOR2I(pcbnew.FromMM(ends[0]), pcbnew.FromMM(ends[1])))
    drawn.SetEnd(pcbnew.VECTOR2I(pcbnew.FromMM(ends[2]), pcbnew.FromMM(ends[3])))
    drawn.SetWidth(pcbnew.FromMM(0.1))
    board.Add(drawn)
