"""ODB++ jobs: a folder, a step's folder, a .tgz or a .zip of it, files kept with Unix compress, bad records named.

The jobs here are written to the format's layout by hand, to reach what an exporter's own job may not hold (files kept
with Unix compress, inches, panels, bad records); KiCad 9.0.8's own export of a board it made is read in
tests/test_board_import.py (tests/cad/bottom-kicad9-odb.zip). The hand-written job: the matrix, misc/info, a board
step (eda/data, two component layers, its profile) and a panel step that places nothing of its own (its `stephdr`,
where a test gives it one, places copies of the board). tests/cad/odbpp-eda-data.Z is this file's EDA_DATA as
ncompress 4.2.4's `compress` wrote it.
"""
from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from inspector.board.design import CadError
from inspector.board.odbpp import read_odbpp
from inspector.routing.rules import load_rules

from .kicad9_jobs import edited_job

MATRIX = """STEP {
   COL=1
   NAME=PCB
}

STEP {
   COL=2
   NAME=PANEL
}

LAYER {
   ROW=1
   CONTEXT=BOARD
   TYPE=COMPONENT
   NAME=COMP_+_TOP
   POLARITY=POSITIVE
}

LAYER {
   ROW=2
   CONTEXT=BOARD
   TYPE=SIGNAL
   NAME=TOP
   POLARITY=POSITIVE
}

LAYER {
   ROW=3
   CONTEXT=BOARD
   TYPE=COMPONENT
   NAME=COMP_+_BOT
   POLARITY=POSITIVE
}
"""

INFO = """UNITS=MM
ODB_VERSION_MAJOR=8
ODB_VERSION_MINOR=1
JOB_NAME=board
"""


def _soic_pins() -> str:
    rows = []
    for i, y in enumerate((1.905, 0.635, -0.635, -1.905)):
        rows.append(f"PIN {i + 1} S -2.475 {y} 0 E S\nRC -3.45 {y - 0.3:.3f} 1.95 0.6")
    for i, y in enumerate((-1.905, -0.635, 0.635, 1.905)):
        rows.append(f"PIN {i + 5} S 2.475 {y} 0 E S\nRC 1.5 {y - 0.3:.3f} 1.95 0.6")
    return "\n".join(rows)


EDA_DATA = f"""# written by hand to ODB++ 8.1's layout
HDR inspector tests
UNITS=MM
LYR top
#
#NET 0
NET $NONE$
#
# PKG 0
PKG R_0402_1005Metric 1.02 -0.93 -0.47 0.93 0.47;
RC -0.5 -0.25 1.0 0.5
PIN 1 S -0.51 0 0 E S
RC -0.8 -0.27 0.58 0.54
FID C 0 12
PIN 2 S 0.51 0 0 E S
RC 0.22 -0.27 0.58 0.54
VND key=value 'a vendor record'
#
# PKG 1
PKG SOIC-8_3.9x4.9mm_P1.27mm 1.27 -3.7 -2.7 3.7 2.7;
CT
OB -1.95 -2.45 I
OS 1.95 -2.45
OS 1.95 2.45
OS -1.95 2.45
OS -1.95 -2.45
OE
CE
{_soic_pins()}
#
# PKG 2
PKG Fiducial_1mm_Mask2mm 1.0 -1 -1 1 1;
CR 0 0 1
PIN 1 S 0 0 0 E S
CR 0 0 0.5
#
# PKG 3
PKG PinHeader_1x02_P2.54mm_Vertical 2.54 -1.33 -3.87 1.33 1.33;
RC -1.27 -3.81 2.54 5.08
PIN 1 T 0 0 0 E T
SQ 0 0 0.85
PIN 2 T 0 -2.54 0 E T
CR 0 -2.54 0.85
#
# PKG 4
PKG C_0603_1608Metric 1.6 -1.48 -0.73 1.48 0.73;
RC -0.8 -0.4 1.6 0.8
PIN 1 S -0.775 0 0 E S
RC -1.225 -0.475 0.9 0.95
PIN 2 S 0.775 0 0 E S
RC 0.325 -0.475 0.9 0.95
#
"""

TOP = """UNITS=MM
#
#Component attribute names
#
@0 .no_pop
@1 .comp_height
#
# CMP 0
CMP 0 10.0 20.0 270.0 N R1 RES-10K-0402 ;1=0.35;ID=11
PRP Value '10k'
TOP 0 10.0 19.49 270.0 N 1 0 1
TOP 1 10.0 20.51 270.0 N 2 0 2
#
# CMP 1
CMP 1 25.0 15.0 0 N U1 IC-LM358 ;ID=12
PRP Value 'LM358'
#
# CMP 2
CMP 0 30.0 25.0 0 N R2 RES-1K-0402 ;0,1=0.35;ID=13
PRP Value '1k'
#
# CMP 3
CMP 2 3.0 3.0 0 N FID1 FIDUCIAL ;ID=14
#
# CMP 4
CMP 3 5.0 15.0 90 N J1 HDR-2 ;ID=15
#
# CMP 5
CMP 4 18.0 8.0 0 N C1 CAP-100N-0603 ;ID=16
PRP Value '100n'
#
"""

BOTTOM = """UNITS=MM
# CMP 0
CMP 0 35.0 5.0 90 M R3 RES-10K-0402 ;ID=21
PRP Value '10k'
#
"""

PROFILE = """UNITS=MM
#
S P 0
OB 0 0 I
OS 40 0
OS 40 30
OS 0 30
OS 0 0
OE
SE
"""

PANEL_PROFILE = PROFILE.replace("40", "120").replace("30", "90")
TOP_FILE = "steps/pcb/layers/comp_+_top/components"
BOTTOM_FILE = "steps/pcb/layers/comp_+_bot/components"


def write_job(root: Path, swap: dict[str, str] | None = None) -> Path:
    """The job under `root`/board; `swap` gives a file (by its path in the job) other text, or with "" leaves it out,
    or adds one."""
    files = {"matrix/matrix": MATRIX, "misc/info": INFO, "steps/pcb/eda/data": EDA_DATA,
             "steps/pcb/layers/comp_+_top/components": TOP, "steps/pcb/layers/comp_+_bot/components": BOTTOM,
             "steps/pcb/profile": PROFILE, "steps/panel/profile": PANEL_PROFILE}
    job = root / "board"
    for name, text in {**files, **(swap or {})}.items():
        if text:
            (job / name).parent.mkdir(parents=True, exist_ok=True)
            (job / name).write_text(text, encoding="utf-8")
    return job


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inspector.cli", *args], capture_output=True, text=True, timeout=300)


def test_a_job_folder_gives_its_parts_footprints_bom_and_outline(tmp_path: Path) -> None:
    design = read_odbpp(write_job(tmp_path))
    by = {p.ref: p for p in design.parts}
    assert design.outline == (0, 0, 40, 30) and design.y_up and design.format == "ODB++ (step pcb)"
    # R3 sits on the bottom with no toeprints to say how its job means the mirror flag: the default, and a note;
    # the job has no document layer drawing bodies: a note for each side that the outlines are the bodies
    assert len(design.notes) == 3 and design.notes[0].startswith(
        "steps/pcb: the file does not say where its bottom parts' pins land") and "TOP records" in design.notes[0]
    assert [n.split(": ", 1)[1].split(" parts'")[0] for n in design.notes[1:]] == [
        "nothing in the file draws the top", "nothing in the file draws the bottom"]
    # 270 degrees clockwise is 90 counter-clockwise, the neutral design's direction
    assert (by["R1"].x_mm, by["R1"].y_mm, by["R1"].rotation, by["R1"].side, by["R1"].value) == (10, 20, 90, "top",
                                                                                               "10k")
    assert by["R1"].package == "R_0402_1005Metric" and by["R1"].body == (-0.5, -0.25, 0.5, 0.25)
    assert sorted(tuple(round(v, 6) for v in (p.x, p.y, p.w, p.h)) for p in by["R1"].pads) == [
        (-0.51, 0, 0.58, 0.54), (0.51, 0, 0.58, 0.54)]
    assert by["U1"].body == (-1.95, -2.45, 1.95, 2.45) and len(by["U1"].pads) == 8 and by["U1"].value == "LM358"
    assert by["R2"].excluded == "not placed (its .no_pop attribute)" and by["R1"].excluded is None
    assert by["FID1"].fiducial and by["J1"].through_hole and not by["R1"].through_hole
    assert sorted((round(p.w, 6), round(p.h, 6), p.smd) for p in by["J1"].pads) == [(1.7, 1.7, False)] * 2
    # with no toeprints, as KiCad 9 writes a job: the package drawn as seen from the top, turned 90 clockwise
    assert (by["R3"].side, by["R3"].rotation, by["R3"].x_mm) == ("bottom", 270, 35)
    # the same job from one of its steps' folders, and packed as it travels
    assert read_odbpp(tmp_path / "board" / "steps" / "pcb").parts == design.parts
    with tarfile.open(tmp_path / "board.tgz", "w:gz") as t:
        t.add(tmp_path / "board", arcname="board")
    with zipfile.ZipFile(tmp_path / "board.zip", "w") as z:
        for f in (tmp_path / "board").rglob("*"):
            z.write(f, f.relative_to(tmp_path).as_posix())
    assert read_odbpp(tmp_path / "board.tgz").parts == design.parts
    assert read_odbpp(tmp_path / "board.zip").parts == design.parts


def test_files_kept_with_unix_compress_and_other_units_are_read(tmp_path: Path) -> None:
    packed = (Path(__file__).parent / "cad" / "odbpp-eda-data.Z").read_bytes()
    from unlzw3 import unlzw

    assert unlzw(packed).decode() == EDA_DATA  # the fixture is this file's EDA_DATA, compressed
    plain = read_odbpp(write_job(tmp_path / "plain"))
    job = write_job(tmp_path / "packed", {"steps/pcb/eda/data": ""})
    (job / "steps" / "pcb" / "eda").mkdir()
    (job / "steps" / "pcb" / "eda" / "data.Z").write_bytes(packed)
    assert read_odbpp(job).parts == plain.parts
    (job / "steps" / "pcb" / "eda" / "data.Z").write_bytes(packed[:40])
    with pytest.raises(CadError, match=r"eda/data\.Z: not a file of Unix compress"):
        read_odbpp(job)
    inches = read_odbpp(write_job(tmp_path / "inch", {TOP_FILE: TOP.replace("UNITS=MM", "UNITS=INCH")}))
    assert next(p for p in inches.parts if p.ref == "U1").x_mm == pytest.approx(25.0 * 25.4)
    bare = read_odbpp(write_job(tmp_path / "bare", {"misc/info": "JOB_NAME=board\n",
                                                    "steps/pcb/profile": PROFILE.replace("UNITS=MM\n", "")}))
    assert bare.outline == pytest.approx((0, 0, 40 * 25.4, 30 * 25.4))
    assert any("profile has no UNITS line" in n and "inches" in n for n in bare.notes)


# the matrix of a job with its solder mask layers above and below the copper (their rows give their sides), and
# those layers' features: each fiducial's opening flashed at its place (a bottom mark's on the bottom mask; a top
# flash at the same place is another side's and not its), a land's opening beside it
MASKED_MATRIX = MATRIX.replace("""LAYER {
   ROW=2""", """LAYER {
   ROW=2
   CONTEXT=BOARD
   TYPE=SOLDER_MASK
   NAME=SMT
   POLARITY=POSITIVE
}

LAYER {
   ROW=4
   CONTEXT=BOARD
   TYPE=SOLDER_MASK
   NAME=SMB
   POLARITY=POSITIVE
}

LAYER {
   ROW=2.5""").replace("ROW=2.5", "ROW=3").replace("""   ROW=3
   CONTEXT=BOARD
   TYPE=COMPONENT""", """   ROW=5
   CONTEXT=BOARD
   TYPE=COMPONENT""")
TOP_MASK = """UNITS=MM
#
#Feature symbol names
#
$0 r2000
$1 rect1000x1050
$2 r2500
#
#Layer features
#
P 3.0 3.0 0 P 0 8 0;0=0
P 17.225 8.0 1 P 0 8 0
P 35.0 25.0 2 P 0 8 0
P 37.0 27.0 0 P 0 8 0
"""
BOTTOM_MASK = """UNITS=INCH
$0 r3000 M
$1 r118.11
P 1.37795 0.98425 0 P 0 8 0
P 1.37795 0.98425 1 N 0 8 0
"""
MASKED = {"matrix/matrix": MASKED_MATRIX, "steps/pcb/layers/smt/features": TOP_MASK,
          "steps/pcb/layers/smb/features": BOTTOM_MASK,
          TOP_FILE: TOP + "CMP 2 37.0 27.0 0 N FID2 FIDUCIAL ;ID=17\n",
          BOTTOM_FILE: BOTTOM + "CMP 2 35.0 25.0 0 M FID9 FIDUCIAL ;ID=22\n"}


def test_a_fiducials_ring_comes_from_its_sides_solder_mask_layer(tmp_path: Path) -> None:
    """A fiducial's bare ring is the opening its side's mask layer flashes on it (the matrix's rows say which mask
    is the top's), in the features file's own units (microns in a metric file; mils in an inch one); the same from
    the job packed as it travels. A pad record that names a symbol the file does not list is refused by its line."""
    assert "TYPE=SOLDER_MASK\n   NAME=SMT" in MASKED_MATRIX and "ROW=5" in MASKED_MATRIX
    job = write_job(tmp_path, MASKED)
    design = read_odbpp(job)
    by = {p.ref: p for p in design.parts}
    assert (by["FID1"].pads[0].mask_margin, by["FID9"].side) == (0.5, "bottom")
    assert by["FID9"].pads[0].mask_margin == 1.0  # 3000 microns by the symbol's own M, in an inch file
    inch_symbols = write_job(tmp_path / "mil", {**MASKED, "steps/pcb/layers/smb/features": BOTTOM_MASK.replace(
        " 0 P 0 8 0", " 1 P 0 8 0")})
    assert next(p for p in read_odbpp(inch_symbols).parts if p.ref == "FID9").pads[0].mask_margin == pytest.approx(
        1.0, abs=1e-5)  # 118.11 mil
    assert by["C1"].pads[0].mask_margin is None  # only a fiducial's opening is read
    assert read_odbpp(write_job(tmp_path / "plain")).parts[3].pads[0].mask_margin is None  # no mask layers: default
    with tarfile.open(tmp_path / "board.tgz", "w:gz") as t:
        t.add(job, arcname="board")
    assert read_odbpp(tmp_path / "board.tgz").parts == design.parts
    r = cli("board", "import", str(tmp_path / "board.tgz"), "--out", str(tmp_path / "b.yaml"), "--px-per-mm", "20")
    assert r.returncode == 0, r.stderr
    assert {(m.name, m.size, m.ring) for m in load_rules(tmp_path / "b.yaml").fiducials.marks} == {("FID1", 20, 40),
                                                                                                 ("FID2", 20, 40)}
    bad = write_job(tmp_path / "bad", {**MASKED, "steps/pcb/layers/smt/features": TOP_MASK.replace("P 3.0 3.0 0",
                                                                                                  "P 3.0 3.0 7")})
    with pytest.raises(CadError, match=r"layers/smt/features:11: the pad names symbol 7, which the file's symbol"):
        read_odbpp(bad)


def _toeprints(x: float, y: float, rot_cw: float, reading: str) -> str:
    """The SOIC's TOP records for a part at (x, y) turned `rot_cw` clockwise on the bottom, placed as `reading` says in
    its own words: "turn, then mirror", "mirror, then turn", "drawn" (the package as seen from the top already,
    turned clockwise as the top's parts are)."""
    a = math.radians(-rot_cw)
    lines = []
    for i, py in enumerate((1.905, 0.635, -0.635, -1.905, -1.905, -0.635, 0.635, 1.905)):
        px = -2.475 if i < 4 else 2.475
        if reading == "mirror, then turn":
            px = -px
        qx, qy = px * math.cos(a) - py * math.sin(a), px * math.sin(a) + py * math.cos(a)
        if reading == "turn, then mirror":
            qx = -qx
        lines.append(f"TOP {i} {x + qx:.4f} {y + qy:.4f} {rot_cw} M {i + 1} 0 {i + 1}")
    return "\n".join(lines)


@pytest.mark.parametrize("reading", ["turn, then mirror", "mirror, then turn", "drawn"])
def test_a_bottom_part_wears_its_footprint_as_the_jobs_toeprints_place_its_pins(tmp_path: Path, reading: str) -> None:
    bottom = BOTTOM + f"CMP 1 30.0 12.0 90 M U5 IC-LM358 ;ID=22\n{_toeprints(30.0, 12.0, 90, reading)}\n#\n"
    design = read_odbpp(write_job(tmp_path, {BOTTOM_FILE: bottom}))
    u5 = next(p for p in design.parts if p.ref == "U5")
    a = math.radians(u5.rotation)  # design.py: the footprint frame turned counter-clockwise, y up
    placed = sorted((round(30.0 + q.x * math.cos(a) - q.y * math.sin(a), 3),
                     round(12.0 + q.x * math.sin(a) + q.y * math.cos(a), 3)) for q in u5.pads)
    said = sorted((round(float(t.split()[2]), 3), round(float(t.split()[3]), 3))
                  for t in _toeprints(30.0, 12.0, 90, reading).splitlines())
    assert placed == said
    says = {"turn, then mirror": "turned, then mirrored", "mirror, then turn": "mirrored about the y axis, then "
            "turned", "drawn": "its package already drawn as seen from the top, turned as seen from the top"}
    assert any(n.startswith(f"steps/pcb: bottom parts read as {says[reading]}") and "(1 of the 1 " in n
               for n in design.notes), design.notes
    # R3, with no toeprints of its own, wears the job's reading too
    r3 = next(p for p in design.parts if p.ref == "R3")
    assert r3.rotation == {"turn, then mirror": 90, "mirror, then turn": 270, "drawn": 270}[reading]


def test_a_bad_record_is_named_by_its_file_and_line_and_nothing_is_written(tmp_path: Path) -> None:
    job = write_job(tmp_path, {TOP_FILE: TOP.replace("CMP 1 25.0 15.0", "CMP 1 25,0 15.0")})
    out = tmp_path / "board.yaml"
    r = cli("board", "import", str(job), "--out", str(out), "--px-per-mm", "10")
    assert r.returncode != 0 and "comp_+_top/components:15: x is '25,0', not a number" in r.stderr, r.stderr
    assert not out.exists()
    short = write_job(tmp_path / "t", {BOTTOM_FILE: BOTTOM + "TOP 0 35.0\n"})
    with pytest.raises(CadError, match=r"comp_\+_bot/components:6: a TOP record needs <pin number> <x> <y>; this "
                                       r"one has 2 fields"):
        read_odbpp(short)
    wrong = write_job(tmp_path / "w", {BOTTOM_FILE: BOTTOM.replace("CMP 0 35", "CMP 7 35")})
    with pytest.raises(CadError, match=r"comp_\+_bot/components:3: R3 names package 7, but eda/data holds 5"):
        read_odbpp(wrong)
    with pytest.raises(CadError, match="step panel places no parts"):
        read_odbpp(tmp_path / "board" / "steps" / "panel")
    twice = write_job(tmp_path / "two")
    shutil.copytree(twice / "steps" / "pcb", twice / "steps" / "pcb-variant")
    with pytest.raises(CadError, match=r"placed in 2 steps \(pcb, pcb-variant\).*JOB/steps/pcb"):
        read_odbpp(twice)
    assert read_odbpp(twice / "steps" / "pcb-variant").format == "ODB++ (step pcb-variant)"
    (tmp_path / "broken.tgz").write_bytes(b"not a tar at all")
    with pytest.raises(CadError, match=r"broken\.tgz: cannot be read as an ODB\+\+ archive \(file could not be "
                                         r"opened successfully:\)"):
        read_odbpp(tmp_path / "broken.tgz")


def test_board_import_writes_the_rule_set_of_a_packed_job(tmp_path: Path) -> None:
    write_job(tmp_path)
    with tarfile.open(tmp_path / "board.tar.gz", "w:gz") as t:
        t.add(tmp_path / "board", arcname="board")
    out = tmp_path / "rules" / "board.yaml"
    r = cli("board", "import", str(tmp_path / "board.tar.gz"), "--out", str(out), "--px-per-mm", "10",
            "--json", str(tmp_path / "b.json"))
    assert r.returncode == 0, r.stderr
    assert "ODB++ (step pcb); 7 parts" in r.stdout
    rules = load_rules(out)
    assert rules.recipe == "board"  # the archive's name without .tar.gz
    place = {p.ref: p for _c, p in rules.placements()}
    assert {"R1", "U1", "C1"} <= set(place) and not {"R2", "R3", "FID1"} & set(place)
    assert (place["R1"].x, place["R1"].y, place["R1"].rotation) == (100, 100, 90)  # y up: 30 - 20 mm from the top
    fates = {f["ref"]: f for f in json.loads((tmp_path / "b.json").read_text(encoding="utf-8"))["parts"]}
    assert ".no_pop" in fates["R2"]["reason"] and "bottom side" in fates["R3"]["reason"]


def stephdr(*repeats: str, datum: tuple[float, float] = (0, 0)) -> str:
    """A step's header: its datum and STEP-REPEAT blocks, each given as `NAME X Y DX DY NX NY ANGLE [FLIP=YES]`."""
    blocks = []
    for r in repeats:
        name, x, y, dx, dy, nx, ny, angle, *extra = r.split()
        flags = dict(e.split("=") for e in extra)
        blocks.append("STEP-REPEAT {\n" + "".join(f"   {k}={v}\n" for k, v in (
            ("NAME", name), ("X", x), ("Y", y), ("DX", dx), ("DY", dy), ("NX", nx), ("NY", ny), ("ANGLE", angle),
            ("FLIP", flags.get("FLIP", "NO")), ("MIRROR", flags.get("MIRROR", "NO")))) + "}\n")
    return (f"UNITS=MM\nX_DATUM={datum[0]}\nY_DATUM={datum[1]}\nX_ORIGIN=0\nY_ORIGIN=0\n" + "".join(blocks)
            + "TOP_ACTIVE=0\nBOTTOM_ACTIVE=0\nRIGHT_ACTIVE=0\nLEFT_ACTIVE=0\n")


PANEL = stephdr("PCB 10 5 50 0 2 1 0", "PCB 85 85 0 0 1 1 90")  # two boards side by side, a third turned


def test_a_panel_is_read_as_one_board_of_its_copies_numbered_from_the_top_left(tmp_path: Path) -> None:
    """The step the line carries: every board's parts where step-and-repeat puts them (a copy turned 90 degrees
    clockwise about its datum turns its parts with it), each named by its board's number, counted as read from
    above; the panel's own edge. The job then has two steps with parts, and the import asks which."""
    job = write_job(tmp_path, {"steps/panel/stephdr": PANEL})
    with pytest.raises(CadError, match=r"placed in 2 steps \(panel \(3 boards of pcb\), pcb\); say which.*--step"):
        read_odbpp(job)
    board = read_odbpp(job, "pcb")
    assert board.format == "ODB++ (step pcb)" and len(board.parts) == 7
    panel = read_odbpp(job, "panel")
    assert panel.format == "ODB++ (panel panel, 3 boards of pcb)" and panel.outline == (0, 0, 120, 90)
    assert any("numbered from the top left" in n for n in panel.notes)
    by = {p.ref: p for p in panel.parts}
    assert len(by) == 21 == 3 * len(board.parts)
    # the turned copy's datum (85, 85) is the highest: board 1; then the row at y 5 from the left
    assert (round(by["1-R1"].x_mm, 6), round(by["1-R1"].y_mm, 6), by["1-R1"].rotation) == (105, 75, 0)
    assert (by["2-R1"].x_mm, by["2-R1"].y_mm, by["2-R1"].rotation) == (20, 25, 90)
    assert (by["3-R1"].x_mm, by["3-R1"].y_mm, by["3-R1"].rotation) == (70, 25, 90)
    for k in (1, 2, 3):  # what a part is stays: its footprint, its side, its exclusion, a fiducial
        assert by[f"{k}-U1"].pads == next(p for p in board.parts if p.ref == "U1").pads
        assert by[f"{k}-R3"].side == "bottom" and by[f"{k}-R2"].excluded and by[f"{k}-FID1"].fiducial
    assert read_odbpp(job / "steps" / "panel").parts == panel.parts
    with tarfile.open(tmp_path / "board.tgz", "w:gz") as t:
        t.add(job, arcname="board")
    assert read_odbpp(tmp_path / "board.tgz", "panel").parts == panel.parts
    with pytest.raises(CadError, match=r"step coupon places no parts \(steps that do: panel, pcb\)"):
        read_odbpp(job, "coupon")


def test_a_panel_of_panels_composes_its_turns_and_offsets(tmp_path: Path) -> None:
    """An array of two boards, placed in the panel turned 180 degrees: each board's parts go through both."""
    job = write_job(tmp_path, {"steps/array/stephdr": stephdr("PCB 0 0 45 0 2 1 0"), "steps/array/profile": PROFILE,
                               "steps/panel/stephdr": stephdr("ARRAY 100 85 0 0 1 1 180")})
    panel = read_odbpp(job, "panel")
    by = {p.ref: p for p in panel.parts}
    assert len(panel.parts) == 14 and panel.format == "ODB++ (panel panel, 2 boards of pcb)"
    assert (round(by["1-R1"].x_mm, 6), round(by["1-R1"].y_mm, 6), by["1-R1"].rotation) == (45, 65, 270)
    assert (round(by["2-R1"].x_mm, 6), round(by["2-R1"].y_mm, 6), by["2-R1"].rotation) == (90, 65, 270)
    with pytest.raises(CadError, match=r"parts are placed in 3 steps \(array \(2 boards of pcb\), panel \(2 boards "
                                         r"of pcb\), pcb\)"):
        read_odbpp(job)


def test_a_panel_the_reader_cannot_place_is_refused_by_its_line(tmp_path: Path) -> None:
    flipped = write_job(tmp_path / "f", {"steps/panel/stephdr": stephdr("PCB 10 5 50 0 2 1 0",
                                                                        "PCB 85 85 0 0 1 1 90 FLIP=YES")})
    with pytest.raises(CadError, match=r"steps/panel/stephdr:18: the copies of step pcb are flipped \(FLIP=YES\).*"
                                         r"--step pcb"):
        read_odbpp(flipped, "panel")
    looped = write_job(tmp_path / "l", {"steps/panel/stephdr": PANEL,
                                        "steps/pcb/stephdr": stephdr("PANEL 0 0 0 0 1 1 0")})
    with pytest.raises(CadError, match=r"step panel repeats itself through panel > pcb > panel; .* has a loop"):
        read_odbpp(looped, "pcb")
    missing = write_job(tmp_path / "m", {"steps/panel/stephdr": stephdr("BOARD2 0 0 0 0 1 1 0")})
    with pytest.raises(CadError, match=r"steps/panel/stephdr:6: repeats step board2, which the job does not have"):
        read_odbpp(missing, "panel")
    counted = write_job(tmp_path / "c", {"steps/panel/stephdr": PANEL.replace("NX=2", "NX=two")})
    with pytest.raises(CadError, match=r"stephdr:6: NX is 'two'"):
        read_odbpp(counted, "panel")


def test_board_import_takes_the_step_to_inspect(tmp_path: Path) -> None:
    job = write_job(tmp_path, {"steps/panel/stephdr": PANEL})
    out = tmp_path / "rules" / "panel.yaml"
    asked = cli("board", "import", str(job), "--out", str(out), "--px-per-mm", "10")
    assert asked.returncode != 0 and "--step" in asked.stderr and not out.exists()
    r = cli("board", "import", str(job), "--step", "panel", "--out", str(out), "--px-per-mm", "10")
    assert r.returncode == 0, r.stderr
    assert "ODB++ (panel panel, 3 boards of pcb); 21 parts" in r.stdout
    rules = load_rules(out)
    place = {p.ref: p for _c, p in rules.placements()}
    assert {"1-R1", "2-R1", "3-R1", "1-U1", "3-C1"} <= set(place) and "R1" not in place
    # the rule set says it covers a panel of three boards: each board's parts are its own (its own result)
    assert rules.panel is not None and rules.panel.boards == 3
    assert {rules.panel.position_of(ref) for ref in place} == {1, 2, 3}
    board_rules = tmp_path / "rules" / "pcb.yaml"
    assert cli("board", "import", str(job), "--step", "pcb", "--out", str(board_rules), "--px-per-mm",
               "10").returncode == 0
    assert load_rules(board_rules).panel is None and "panel:" not in board_rules.read_text(encoding="utf-8")
    from inspector.board.library import load_library

    library = load_library(None)  # a bare chip size is a resistor or a capacitor by its reference's letters
    assert library.lookup("0402", "2-R1") == library.lookup("0402", "R1") != library.lookup("0402", "2-C1")
    kicad = tmp_path / "b.kicad_pcb"
    kicad.write_text("(kicad_pcb)", encoding="utf-8")
    wrong = cli("board", "import", str(kicad), "--step", "panel", "--out", str(tmp_path / "k.yaml"),
                "--px-per-mm", "10")
    assert wrong.returncode != 0 and "names one of an ODB++ job's steps" in wrong.stderr


def _job_with_data(tmp_path: Path, edit: Callable[[str], str]) -> Path:
    """tests/cad/bodies-kicad9-odb.zip (KiCad 9's export) with its eda/data edited."""
    return edited_job(tmp_path / "job.zip", lambda name, data: edit(data.decode("utf-8")).encode("utf-8")
                      if name.endswith("eda/data") else data)


def test_a_pin_whose_mount_type_is_a_hole_is_no_pad(tmp_path: Path) -> None:
    """A `PIN` whose mount type is H is a bare hole (KiCad writes a mounting hole's, a connector's locating peg's
    so): no pad, no reason to call the part through-hole; a package of such holes alone has nothing to solder."""
    one = _job_with_data(tmp_path, lambda t: t.replace("PIN 1 S -0.77 0.0 0 E S", "PIN 1 T -0.77 0.0 0 M H", 1))
    c3 = next(p for p in read_odbpp(one).parts if p.ref == "C3")
    assert len(c3.pads) == 1 and not c3.through_hole and c3.excluded is None
    both = _job_with_data(tmp_path, lambda t: t.replace("PIN 1 S -0.77 0.0 0 E S", "PIN 1 T -0.77 0.0 0 M H", 1)
                          .replace("PIN 2 S 0.77 0.0 0 E S", "PIN 2 T 0.77 0.0 0 M H", 1))
    parts = {p.ref: p for p in read_odbpp(both).parts}
    assert parts["C3"].excluded == "nothing to solder (its pins are bare holes: a mounting hole)"
    assert parts["R1"].excluded is None and len(parts["R1"].pads) == 2


def test_stitching_vias_placed_as_footprints_are_known_and_not_inspected() -> None:
    """KiCad writes a board-only footprint (a stitching via) to ODB++ as a component, with nothing marking it; the
    product's library knows such packages by name (KiCad's `StitchingVia-0.3mm`, a `Via_0.6mm`), so the import
    neither asks for them nor inspects them; a package merely containing "via" is not one of them."""
    from inspector.board.library import load_library

    library = load_library(None)
    for name in ("StitchingVia-0.3mm", "Stitching_Via_0.8mm", "Via_0.6mm", "via-1.0mm"):
        cls = library.lookup(name, "STITCH1")
        assert cls is not None and cls.name == "via" and not cls.inspect, name
    assert library.lookup("Aviator_SMD", "U1") is None
