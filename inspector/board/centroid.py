"""Pick-and-place (centroid) files: where each part sits, without its footprint's geometry.

Read here: Eagle's `.mnt` / `.mnb` (mountsmd.ulp: `ref x y rotation value package`, mm, the `.mnb` the bottom),
KiCad's ASCII `.pos` (`# Ref Val Package PosX PosY Rot Side`) and every CSV with a header row whose columns name a
reference, x, y and rotation (KiCad's .csv, JLC's CPL, Altium's Pick Place, most others): each column is found by
its usual names (`COLUMNS`), or by a saved profile (`--profile FILE`: YAML `columns: {ref: ..., x: ..., y: ...,
rotation: ..., side: ..., package: ..., value: ...}`, `units: mm|mil|in`, `y_up: true|false`) for a tool whose names
differ. Centroid files put y up (the CAD's plot convention) and measure rotation counter-clockwise from the top;
units are mm unless the header or the values say mil or in. A centroid file has no pads or bodies: the package
library gives each package's body (library.body), and the board outline is the parts' extent.
"""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..yamlio import Fields, load_yaml
from .design import BoardDesign, CadError, PlacedPart

COLUMNS: dict[str, tuple[str, ...]] = {  # lower-cased header names, with units and punctuation stripped
    "ref": ("designator", "ref", "reference", "refdes", "ref des", "part", "name", "component"),
    "x": ("posx", "pos x", "mid x", "center-x", "centerx", "center x", "x", "ref x", "x pos", "locationx"),
    "y": ("posy", "pos y", "mid y", "center-y", "centery", "center y", "y", "ref y", "y pos", "locationy"),
    "rotation": ("rot", "rotation", "angle", "orientation"),
    "side": ("side", "layer", "tb", "top/bottom", "mount side"),
    "package": ("package", "footprint", "pattern", "case", "package/footprint"),
    "value": ("val", "value", "comment", "description/value"),
}
TO_MM = {"mm": 1.0, "mil": 0.0254, "in": 25.4, "inch": 25.4}


@dataclass
class Profile:
    columns: dict[str, str] = field(default_factory=dict)  # field -> header name
    units: str | None = None
    y_up: bool = True


def load_profile(path: Path) -> Profile:
    source = str(path)
    f = Fields(load_yaml(Path(path).read_text(encoding="utf-8"), source), source)
    f.unknown({"columns", "units", "y_up"})
    cols = f.sub("columns")
    cols.unknown(set(COLUMNS))
    for need in ("ref", "x", "y"):
        cols.text(need)
    units = f.get("units")
    if units is not None and units not in TO_MM:
        raise f.error("units", f"one of {', '.join(TO_MM)}, got {units!r}")
    return Profile({k: str(v) for k, v in cols.data.items()}, units, bool(f.get("y_up", True)))


def _key(header: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"\((mm|mil|in|inch)\)|\[(mm|mil|in)\]|[\"']", "", header.lower())).strip()


def _number(text: str, where: str, what: str) -> tuple[float, str | None]:
    m = re.fullmatch(r"\s*([-+]?\d+(?:[.,]\d+)?)\s*(mm|mil|in)?\s*", text or "")
    if m is None:
        raise CadError(f"{where}: {what} {text!r} is not a number; check the column or the file's delimiter")
    return float(m.group(1).replace(",", ".")), m.group(2)


def _side(text: str) -> str:
    t = (text or "top").strip().lower()
    return "bottom" if t in ("bottom", "bot", "b", "back", "b.cu") or t.startswith("bottom") else "top"


def read_centroid(path: Path, profile: Profile | None = None) -> BoardDesign:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise CadError(f"{path}: cannot be read as a centroid file ({exc})") from None
    suffix = path.suffix.lower()
    if suffix in (".mnt", ".mnb"):
        return _eagle(path, text, "bottom" if suffix == ".mnb" else "top")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines and lines[0].lstrip().startswith("#") and "ref" in lines[0].lower() and profile is None:
        return _kicad_pos(path, lines)
    return _table(path, text, profile or Profile())


def _eagle(path: Path, text: str, side: str) -> BoardDesign:
    parts = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cells = line.split()
        if len(cells) < 4:
            raise CadError(f"{path}:{n}: an Eagle centroid line is `ref x y rotation value package`, got {line!r}")
        where = f"{path}:{n}"
        x, _ = _number(cells[1], where, "x")
        y, _ = _number(cells[2], where, "y")
        rot, _ = _number(cells[3], where, "rotation")
        # the package is always the last column; the value (empty for many parts, or several words) before it
        package = cells[-1] if len(cells) > 4 else ""
        parts.append(PlacedPart(cells[0], " ".join(cells[4:-1]), package, x, y, rot, side))
    return BoardDesign(str(path), f"Eagle centroid ({path.suffix})", parts, y_up=True)


def _kicad_pos(path: Path, lines: list[str]) -> BoardDesign:
    header = lines[0].lstrip("#").split()
    names = [h.lower() for h in header]
    need = {"ref": "ref", "x": "posx", "y": "posy", "rotation": "rot"}
    missing = [v for v in need.values() if v not in names]
    if missing:
        raise CadError(f"{path}:1: a KiCad .pos header names Ref, Val, Package, PosX, PosY, Rot, Side; "
                       f"{', '.join(missing)} missing")
    col = {k: names.index(v) for k, v in need.items()}
    col.update({k: names.index(v) for k, v in (("value", "val"), ("package", "package"), ("side", "side"))
                if v in names})
    units = "mil" if any("unit = mil" in ln.lower() or "units: mil" in ln.lower() for ln in lines[:6]) else "mm"
    parts = []
    for n, line in enumerate(lines, start=1):
        if line.lstrip().startswith("#") or line.lstrip().startswith("##"):
            continue
        cells = line.split()
        if len(cells) < len(header):
            raise CadError(f"{path}:{n}: {len(cells)} columns where the header has {len(header)}")
        parts.append(_row(cells, col, f"{path}:{n}", units))
    return BoardDesign(str(path), "KiCad position file (.pos)", parts, y_up=True)


def _row(cells: list[str], col: dict[str, int], where: str, units: str | None) -> PlacedPart:
    x, ux = _number(cells[col["x"]], where, "x")
    y, uy = _number(cells[col["y"]], where, "y")
    rot, _ = _number(cells[col["rotation"]], where, "rotation")
    scale = TO_MM[ux or uy or units or "mm"]

    def get(k: str) -> str:
        return cells[col[k]].strip() if k in col and col[k] < len(cells) else ""
    return PlacedPart(get("ref"), get("value"), get("package"), x * scale, y * scale, rot, _side(get("side")))


def _table(path: Path, text: str, profile: Profile) -> BoardDesign:
    sample = text[:4096]
    try:
        dialect = csv.Sniffer().sniff(sample, delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.reader(io.StringIO(text), dialect))
    # some tools (Altium) write a preamble: the header is the first row naming a reference, x and y
    start = next((i for i, row in enumerate(rows) if _columns(row, profile) is not None), None)
    if start is None:
        raise CadError(f"{path}: no header row naming a reference, x, y and rotation ({', '.join(COLUMNS['x'][:3])}, "
                       "...); save a column profile for this tool (--profile FILE, inspector/board/centroid.py)")
    header, col = rows[start], _columns(rows[start], profile)
    assert col is not None
    units = profile.units
    if units is None:
        mentioned = " ".join(header).lower()
        units = "mil" if "(mil)" in mentioned else "in" if "(in)" in mentioned else None
    parts = []
    for n, row in enumerate(rows[start + 1:], start=start + 2):
        if not any(c.strip() for c in row):
            continue
        if len(row) < len(header):
            raise CadError(f"{path}:{n}: {len(row)} columns where the header has {len(header)}")
        parts.append(_row(row, col, f"{path}:{n}", units))
    return BoardDesign(str(path), "centroid table (CSV)", parts, y_up=profile.y_up)


def _columns(row: list[str], profile: Profile) -> dict[str, int] | None:
    keys = [_key(c) for c in row]
    col: dict[str, int] = {}
    for name, aliases in COLUMNS.items():
        wanted = (_key(profile.columns[name]),) if name in profile.columns else aliases
        for alias in wanted:
            if alias in keys:
                col[name] = keys.index(alias)
                break
    return col if all(k in col for k in ("ref", "x", "y", "rotation")) else None
