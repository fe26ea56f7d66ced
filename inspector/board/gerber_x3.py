"""Gerber X3 component layers: the placement itself in a board's Gerber set, so the set imports alone.

X3 (the Gerber format's 2020 revision) adds a layer per side (`%TF.FileFunction,Component,L1,Top*%`, `...,Bot*%`)
that flashes each part's point (aperture function `ComponentMain`) with its reference (`.C`), rotation (`.CRot`,
degrees counter-clockwise), footprint (`.CFtp`, else the package's name `.CPgN`), value (`.CVal`) and mount (`.CMnt`:
SMD, TH, Fiducial, ...; a fiducial is a registration mark). KiCad writes them (`kicad-cli pcb export pos --format
gerber`), as do other current CAD tools. Read here into the neutral design as a placement file is; gerber.py then
gives each part its pads from the same set's copper. A bottom part's rotation is taken as the file writes it (KiCad
writes it 180 degrees from its board file's): its pads, read off the copper in the same frame, land where the copper
has them either way.
"""
from __future__ import annotations

import re
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .design import BoardDesign, CadError, PlacedPart, mounted

FUNCTION = re.compile(r"%TF\.FileFunction,Component,L\d+,(Top|Bot)\*%")
HEAD_BYTES = 4096  # the file function is a header attribute: it stands in a file's first lines


def _files(path: Path) -> list[tuple[str, bytes]]:
    """(name, head) of every file in the set: a folder (and its folders) or a zip; none for an ODB++ job's zip (its
    `matrix/matrix` says so by name, before any file is read)."""
    if path.is_dir():
        out = []
        for f in sorted(path.rglob("*")):
            if f.is_file():
                with f.open("rb") as fh:
                    out.append((str(f), fh.read(HEAD_BYTES)))
        return out
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            items = [i for i in z.infolist() if not i.is_dir()]
            if any(i.filename.lower().endswith("matrix/matrix") for i in items):
                return []
            return [(i.filename, z.open(i).read(HEAD_BYTES)) for i in items]
    return []


def _read(path: Path, name: str) -> str:
    if path.is_dir():
        data = Path(name).read_bytes()
    else:
        with zipfile.ZipFile(path) as z:
            data = z.read(name)
    return data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class GerberSet:
    """What a folder or zip holds, read from its files' heads once."""

    layers: tuple[tuple[str, str], ...]  # (side, file name) of each X3 component layer
    gerbers: bool  # any Gerber file (each states its coordinate format, `%FS`, in its header)


def scan(path: Path) -> GerberSet:
    """The X3 component layers and whether any Gerber file is in the folder or zip at `path`."""
    layers, gerbers = [], False
    for name, head in _files(Path(path)):
        gerbers |= b"%FS" in head
        m = FUNCTION.search(head.decode("utf-8", errors="replace"))
        if m:
            layers.append(("top" if m.group(1) == "Top" else "bottom", name))
    return GerberSet(tuple(layers), gerbers)


def _value(attrs: dict, key: str) -> str:
    v = attrs.get(key)
    return ",".join(str(x) for x in v) if v else ""


def read_x3(path: Path, layers: tuple[tuple[str, str], ...] | None = None) -> BoardDesign:
    """The parts the set's component layers (`layers`, scanned here where not given) place; CadError naming the
    file where one cannot be read."""
    from gerbonara import GerberFile
    from gerbonara.utils import MM

    path = Path(path)
    layers = scan(path).layers if layers is None else layers
    if not layers:
        raise CadError(f"{path}: no Gerber X3 component layer (`%TF.FileFunction,Component,...`) in the set: give "
                       "the placement file beside it (board import PLACEMENT --gerber SET)")
    parts: list[PlacedPart] = []
    for side, name in layers:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                layer = GerberFile.from_string(_read(path, name), filename=name)
        except Exception as exc:  # gerbonara raises what its parser met: name it, with the file
            raise CadError(f"{name}: not a Gerber file gerbonara can read ({exc}); export it again") from None
        for obj in layer.objects:
            attrs = getattr(obj, "attrs", None)
            if type(obj).__name__ != "Flash" or not isinstance(attrs, dict) or not attrs.get(".C"):
                continue
            functions = dict(getattr(obj.aperture, "attrs", ()) or ())
            if functions.get(".AperFunction", ("ComponentMain",))[0] != "ComponentMain":
                continue
            try:
                rotation = float(_value(attrs, ".CRot") or 0.0)
            except ValueError:
                raise CadError(f"{name}: part {_value(attrs, '.C')}'s rotation (.CRot) "
                               f"{_value(attrs, '.CRot')!r} is not a number") from None
            x, y = obj.unit.convert_to(MM, obj.x), obj.unit.convert_to(MM, obj.y)
            package = _value(attrs, ".CFtp") or _value(attrs, ".CPgN")
            mount = _value(attrs, ".CMnt").upper()
            parts.append(PlacedPart(_value(attrs, ".C"), _value(attrs, ".CVal"), package, x, y, rotation, side,
                                    mount=mounted(mount == "TH"), fiducial=mount == "FIDUCIAL"))
    if not parts:
        raise CadError(f"{path}: its component layers place no part (no `ComponentMain` flash with a reference)")
    return BoardDesign(str(path), "Gerber X3 component layers", parts, y_up=True)
