"""One import, as the command line and the dashboard's New board tab both run it: the file read by its kind, the
package library consulted, and the rule set with its board geometry written (or, for packages the library lacks,
only the list to fill in)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from .bom import load_bom_profile, read_bom
from .bom_parts import described, with_bom
from .centroid import load_profile, read_centroid
from .design import BoardDesign
from .eagle import read_eagle
from .geometry import write_geometry
from .gerber import read_gerbers
from .gerber_parts import with_gerbers
from .gerber_x3 import read_x3, scan
from .ipc2581 import read_ipc2581
from .kicad import read_kicad
from .library import Library, load_library, unknown_template
from .odbpp import ARCHIVES, is_odb_job, read_odbpp
from .provenance import provenance
from .station import Station, at_station
from .to_rules import Imported, UnknownPackages, import_design

KICAD = (".kicad_pcb",)
EAGLE = (".brd",)
IPC2581 = (".xml", ".cvg")
CENTROID = (".mnt", ".mnb", ".pos", ".csv", ".txt")


def read_design(file: Path, profile: Path | None, step: str | None = None, gerber: Path | None = None,
                library: Library | None = None, bom: Path | None = None,
                bom_profile: Path | None = None) -> BoardDesign:
    """The design of `file`, by its kind; `step`: which of an ODB++ job's steps; `gerber`: the fabrication Gerbers
    beside a placement file, whose pads and outline it wears (gerber_parts.py, the parts placed by `library`);
    `bom`: its bill of materials, which says which parts are fitted and what each is (bom_parts.py), its columns
    named by `bom_profile` where their names are not the usual ones."""
    lib = library or load_library(None)
    if bom is None and bom_profile is not None:
        raise ValueError(f"{bom_profile}: a BOM profile (--bom-profile, the New board tab's BOM profile) names a "
                         "BOM's columns, and no BOM is given: give the BOM (--bom) or leave the profile out")
    named = load_bom_profile(bom_profile) if bom_profile is not None else None
    layers = _x3_layers(file) if gerber is None and step is None else ()
    if layers:  # a Gerber X3 set: its component layers place the parts, its Gerbers give their pads
        design, gerber = read_x3(file, layers), file
    else:
        if gerber is not None and (is_odb_job(file) or (file.suffix.lower() not in CENTROID and profile is None)):
            raise ValueError(f"{file}: Gerbers (--gerber, the New board tab's Gerbers) go with a placement (centroid) "
                             f"file, which has no pads; {_kind(file)} holds its own pads and outline: leave the "
                             "Gerbers out")
        design = _read(file, profile, step)
    if bom is not None:  # before the Gerbers: a placement without packages takes the BOM's, which size its pads' seeds
        design = with_bom(design, read_bom(bom, named), lib)
    return design if gerber is None else with_gerbers(design, read_gerbers(gerber), lib)


def _kind(file: Path) -> str:
    """What a board file is, by its name, for a refusal said before it is read."""
    suffix = file.suffix.lower()
    return ("an ODB++ job" if is_odb_job(file) else "a KiCad board" if suffix in KICAD else
            "an Eagle board" if suffix in EAGLE else "an IPC-2581 file" if suffix in IPC2581 else "a board file")


def _x3_layers(file: Path) -> tuple[tuple[str, str], ...]:
    """The X3 component layers of a Gerber set given as the file (a folder or a zip, not an ODB++ job), which place
    its parts (gerber_x3.py); none where the file is no such set; ValueError for a Gerber set without them, which
    needs its placement file."""
    if not ((file.is_dir() and not is_odb_job(file)) or file.suffix.lower() == ".zip"):
        return ()
    found = scan(file)
    if not found.layers and found.gerbers:
        raise ValueError(f"{file}: a Gerber set without X3 component layers holds no placement: import the board's "
                         f"placement (centroid) file with this set beside it (board import PLACEMENT --gerber {file})")
    return found.layers


def _read(file: Path, profile: Path | None, step: str | None) -> BoardDesign:
    suffix = file.suffix.lower()
    if is_odb_job(file):
        return read_odbpp(file, step)
    if step is not None:
        raise ValueError(f"{file}: a step (--step, the New board tab's ODB++ step) names one of an ODB++ job's steps, "
                         f"and this is not a job (a {suffix or 'suffix-less'} file holds one board): leave it empty")
    if suffix in KICAD:
        return read_kicad(file)
    if suffix in EAGLE:
        return read_eagle(file)
    if suffix in IPC2581:
        return read_ipc2581(file)
    if suffix in CENTROID or profile is not None:
        return read_centroid(file, load_profile(profile) if profile is not None else None)
    raise ValueError(f"{file}: a {suffix or 'suffix-less'} file is not a format `board import` reads; it reads KiCad "
                     f"boards ({', '.join(KICAD)}), Eagle boards ({', '.join(EAGLE)}), IPC-2581 "
                     f"({', '.join(IPC2581)}), ODB++ jobs (the job's folder, a step's folder in it, or "
                     f"{', '.join(ARCHIVES)}), Gerber X3 sets with component layers (a folder or .zip) and centroid "
                     f"files ({', '.join(CENTROID)}; any other CSV with --profile)")


def recipe_name(file: Path) -> str:
    """The recipe's default name: the file's, without its suffixes (`job.tar.gz` -> job)."""
    name = file.name
    for suffix in (*ARCHIVES, file.suffix):
        if suffix and name.lower().endswith(suffix):
            return name[: -len(suffix)] or name
    return name


def unknown_path(out: Path) -> Path:
    return out.with_suffix(".packages.yaml")


class PackagesAsked(ValueError):
    """The import stopped to ask: packages the library lacks, written to a file to fill in (never guessed)."""

    def __init__(self, message: str, asked: Path) -> None:
        super().__init__(message)
        self.asked = asked


def import_board(file: Path, out: Path, px_per_mm: float, side: str = "top", library: Path | None = None,
                 profile: Path | None = None, recipe: str | None = None,
                 step: str | None = None, gerber: Path | None = None,
                 bom: Path | None = None, bom_profile: Path | None = None,
                 station: Station | None = None) -> tuple[BoardDesign, Imported]:
    """(the design read, as `station` sees it: what the import made of it); the rule set and its geometry written to
    `out` when any part is inspected. Packages the library lacks: nothing is written but OUT.packages.yaml, and
    PackagesAsked says so."""
    lib = load_library(library)
    station = station or Station()
    design = at_station(read_design(file, profile, step, gerber, lib, bom, bom_profile), station, lib)
    recipe = recipe or recipe_name(file)
    try:
        imported = import_design(design, lib, px_per_mm, side, recipe)
    except UnknownPackages as exc:
        asked = unknown_path(out)
        asked.parent.mkdir(parents=True, exist_ok=True)
        asked.write_text(unknown_template(exc.unknown, sorted(lib.classes), described(design)), encoding="utf-8")
        raise PackagesAsked(f"{exc}. Nothing was written but {asked}: fill in each package's class there and "
                            f"import again with --library {asked}", asked) from None
    if imported.rules_text:  # what it was made from, under its first line (provenance.py)
        first, _, rest = imported.rules_text.partition("\n")
        made = provenance({"design": file, "placement profile": profile, "Gerbers": gerber, "BOM": bom,
                           "BOM profile": bom_profile, "library": library},
                          f"side {side}, {px_per_mm:g} px/mm, recipe {recipe}" + (f", step {step}" if step else "")
                          + f"; station: {station.describe()}")
        imported = replace(imported, rules_text=f"{first}\n{made}{rest}")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(imported.rules_text, encoding="utf-8")
        if imported.geometry is not None:
            write_geometry(imported.geometry, out)
    return design, imported
