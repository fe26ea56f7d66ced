"""Pick-and-place (centroid) files: where each part sits, without its footprint's geometry.

Read here: Eagle's `.mnt` / `.mnb` (mountsmd.ulp: `ref x y rotation value package`, mm, the `.mnb` the bottom), and
every table with a header row whose columns name a reference, x, y and rotation, however the tool lays it out
(centroid_table.py): KiCad's `.pos` (`# Ref Val Package PosX PosY Rot Side` under `## Unit = mm`) and `.csv`,
Altium's Pick Place `.txt` (aligned, under a preamble naming its units) and `.csv`, JLC's CPL, EasyEDA's UTF-16 CSV,
Proteus's, DipTrace's, LibrePCB's, most others: each column is found by its usual names (`COLUMNS`), or by a saved
profile (`--profile FILE`: YAML `columns: {ref: ..., x: ..., y: ..., rotation: ..., side: ..., package: ...,
value: ...}`, `units: mm|mil|in`, `y_up: true|false`, `bottom_x: as-is|negated`) for a tool whose names differ.
Centroid files put y up (the CAD's plot convention) and measure rotation counter-clockwise from the top; units are
mm unless a value, the header, the profile or the preamble says mil or in; a bottom part's x is as seen from the
top, except where KiCad negated it (found by the signs, or told). A centroid file has no pads or bodies: the
package library gives each package's body (library.body), and the board outline is the parts' extent. Nor does it
say which parts are through-hole, unless it has a mount column (`Mount`, `Technology`: mounting.py); Eagle's
mountsmd.ulp writes every part with SMD pads, a connector with through-hole legs among them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..yamlio import Fields, load_yaml
from .centroid_table import Row, column_key, decode, find_table, header_units, stated_units
from .design import BoardDesign, CadError, PlacedPart, first_of
from .mounting import COLUMN_NAMES, UNREAD, mount_in

COLUMNS: dict[str, tuple[str, ...]] = {  # column_key()s, the likeliest first (Altium's Mid X before its Ref X)
    "ref": ("designator", "ref", "reference", "refdes", "ref des", "ref.des.", "ref. des.", "reference designator",
            "part id", "part", "name", "component", "compname"),
    "x": ("posx", "pos x", "mid x", "center-x", "centerx", "center x", "position x", "x position", "x", "ref x",
          "x pos", "xpos", "locationx", "location x", "x-coord", "x coord"),
    "y": ("posy", "pos y", "mid y", "center-y", "centery", "center y", "position y", "y position", "y", "ref y",
          "y pos", "ypos", "locationy", "location y", "y-coord", "y coord"),
    "rotation": ("rot", "rotation", "rotate", "angle", "orientation", "rot.", "orient", "orient."),
    "side": ("side", "layer", "tb", "t/b", "top/bottom", "mount side", "placement side"),
    "package": ("package", "footprint", "pattern", "case", "package/footprint", "footprint name", "shape"),
    "value": ("val", "value", "comment", "description/value"),
    # a part the assembly leaves off (a variant's DNP): a column saying so either way round
    "dnp": ("dnp", "do not place", "do not populate", "no pop", "nopop", "dnp/dni"),
    "populate": ("populate", "populated", "fitted", "fit", "place", "placed", "install", "installed"),
    "mount": COLUMN_NAMES,  # SMD, through-hole, pin-in-paste (mounting.py): without it, no part's mounting is known
}
YES = {"yes", "y", "true", "1", "x"}
NO = {"no", "n", "false", "0"}
# a value that says the part is left off: DNP, DNF, DNI, `10k DNP`, `Do not place`, `Not fitted`, a bare NP or NF
DNP_VALUE = re.compile(r"(?i)^\s*(?:np|nf)\s*$"
                       r"|\b(?:dnp|dnf|dni|do\s+not\s+(?:place|populate|fit)|not\s+fitted|no\s*pop)\b")
# other columns of several words that an aligned header writes with single spaces (Altium's Pad X beside Mid X)
OTHER_PHRASES = {"pad x", "pad y", "part number", "part type"}
TO_MM = {"mm": 1.0, "mil": 0.0254, "in": 25.4, "inch": 25.4}
BOTTOM_X = ("as-is", "negated")  # how a file gives its bottom parts' x: seen from the top, or negated (KiCad's option)
KICAD_HEADER = ["ref", "val", "package", "posx", "posy", "rot", "side"]


@dataclass
class Profile:
    columns: dict[str, str] = field(default_factory=dict)  # field -> header name
    units: str | None = None
    y_up: bool = True
    bottom_x: str | None = None  # None: as the file shows (KiCad's negated bottom x found by its signs, noted)


def load_profile(path: Path) -> Profile:
    source = str(path)
    f = Fields(load_yaml(Path(path).read_text(encoding="utf-8"), source), source)
    f.unknown({"columns", "units", "y_up", "bottom_x"})
    columns: dict[str, str] = {}
    if f.get("columns") is not None:  # a profile may only say the units or the bottom's x of a file named as usual
        cols = f.sub("columns")
        cols.unknown(set(COLUMNS))
        for need in ("ref", "x", "y"):
            cols.text(need)
        columns = {k: str(v) for k, v in cols.data.items()}
    units = f.get("units")
    if units is not None and units not in TO_MM:
        raise f.error("units", f"one of {', '.join(TO_MM)}, got {units!r}")
    bottom_x = f.get("bottom_x")
    if bottom_x is not None and bottom_x not in BOTTOM_X:
        raise f.error("bottom_x", f"one of {', '.join(BOTTOM_X)}, got {bottom_x!r}")
    return Profile(columns, units, bool(f.get("y_up", True)), bottom_x)


def _number(text: str, where: str, what: str) -> tuple[float, str | None]:
    m = re.fullmatch(r"\s*([-+]?\d+(?:[.,]\d+)?)\s*(mm|mils?|in|°|deg)?\s*", text or "")
    if m is None:
        raise CadError(f"{where}: {what} {text!r} is not a number; check the column or the file's delimiter")
    unit = m.group(2)
    return float(m.group(1).replace(",", ".")), ("mil" if unit == "mils" else None if unit in ("°", "deg") else unit)


def _side(text: str) -> str:
    t = (text or "top").strip().lower()
    return "bottom" if t in ("bottom", "bot", "b", "back", "b.cu") or t.startswith("bottom") else "top"


def read_centroid(path: Path, profile: Profile | None = None) -> BoardDesign:
    path = Path(path)
    text = decode(path)
    suffix = path.suffix.lower()
    if suffix in (".mnt", ".mnb") and profile is None:
        return _eagle(path, text, "bottom" if suffix == ".mnb" else "top")
    return _table(path, text, profile or Profile())


def left_off(value: str, dnp: str | None = None, populate: str | None = None, whose: str = "its") -> str | None:
    """Why a file leaves a part off the assembly (its DNP or populate column, or its value), or None; `whose`: the
    file the reason names (a placement file's `its`, a BOM's `the BOM's`)."""
    if dnp is not None and dnp.strip().lower() in YES | {"dnp"}:
        return f"not placed ({whose} DNP column says so)"
    if populate is not None and (populate.strip().lower() in NO or DNP_VALUE.search(populate)):
        return f"not placed ({whose} populate column says no)"
    if DNP_VALUE.search(value or ""):
        return f"not placed ({whose} value says {value.strip()!r})"
    return None


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
        value = " ".join(cells[4:-1])
        parts.append(PlacedPart(cells[0], value, package, x, y, rot, side, excluded=left_off(value), mount=None))
    return BoardDesign(str(path), f"Eagle centroid ({path.suffix})", parts, y_up=True)


def _row(cells: list[str], col: dict[str, int], where: str, units: str | None, unread: list[str]) -> PlacedPart:
    """A table's part; a mount cell in words mounting.py does not know goes to `unread` (FILE:LINE (word)), and the
    part's mounting stays unknown."""
    x, ux = _number(cells[col["x"]], where, "x")
    y, uy = _number(cells[col["y"]], where, "y")
    rot, _ = _number(cells[col["rotation"]], where, "rotation")
    scale = TO_MM[ux or uy or units or "mm"]

    def get(k: str) -> str:
        return cells[col[k]].strip() if k in col and col[k] < len(cells) else ""
    off = left_off(get("value"), get("dnp") if "dnp" in col else None, get("populate") if "populate" in col else None)
    mount = mount_in(get("mount"), where, unread)
    return PlacedPart(get("ref"), get("value"), get("package"), x * scale, y * scale, rot, _side(get("side")),
                      excluded=off, mount=mount)


def _table(path: Path, text: str, profile: Profile) -> BoardDesign:
    phrases = {a for names in COLUMNS.values() for a in names if " " in a} | OTHER_PHRASES
    phrases |= {column_key(name) for name in profile.columns.values() if " " in name.strip()}
    table = find_table(str(path), text, lambda cells: _columns(cells, profile) is not None, phrases)
    if table is None:
        raise CadError(f"{path}: no header row naming a reference, x, y and rotation ({', '.join(COLUMNS['x'][:3])}, "
                       "...), delimited by commas, semicolons or tabs or aligned with spaces; save a column profile "
                       "for this tool (--profile FILE, inspector/board/centroid.py)")
    col = _columns(table.header, profile)
    assert col is not None
    units = profile.units or header_units(table.header) or stated_units(table.preamble)
    needed = max(col[k] for k in ("ref", "x", "y", "rotation")) + 1
    unread: list[str] = []
    parts = [_row(_cells(row, needed, len(table.header), path), col, f"{path}:{row.line}", units, unread)
             for row in table.rows]
    kicad = [column_key(c) for c in table.header] == KICAD_HEADER
    kind = f"KiCad position file ({'.pos' if table.layout == 'aligned' else 'CSV'})" if kicad else \
        f"centroid table ({table.layout})"
    design = BoardDesign(str(path), kind, parts, y_up=profile.y_up)
    if unread:
        design.notes.append(f"{len(unread)} parts' mounting is {UNREAD}, so it is not known: {first_of(unread, 6)}")
    _bottom_x(design, profile.bottom_x, kicad)
    return design


def _bottom_x(design: BoardDesign, told: str | None, kicad: bool) -> None:
    """Bottom parts' x seen from the top, where the file negated it: told by the profile, or a KiCad file whose every
    bottom x is negative and every top x positive (KiCad 6 always negated them; later ones on an option), noted."""
    bottom = [p for p in design.parts if p.side == "bottom"]
    top = [p for p in design.parts if p.side == "top"]
    negated = told == "negated"
    if told is None and kicad and bottom and all(p.x_mm < 0 for p in bottom):
        if top and all(p.x_mm >= 0 for p in top):
            negated = True
            design.notes.append(f"the {len(bottom)} bottom parts' x read negated, as KiCad writes them with its "
                                "'negative X for the bottom' convention (every bottom x negative, every top x "
                                "positive); a profile's `bottom_x: as-is` says otherwise")
        else:
            design.notes.append("every bottom part's x is negative: where KiCad negated them (its 'negative X for "
                                "the bottom' option), say so with a profile's `bottom_x: negated`")
    if negated:
        design.parts = [replace(p, x_mm=-p.x_mm) if p.side == "bottom" else p for p in design.parts]


def _cells(row: Row, needed: int, columns: int, path: Path) -> list[str]:
    """The row's cells; a row may leave out trailing columns it has no value for, never the reference or place."""
    if len(row.cells) < needed:
        raise CadError(f"{path}:{row.line}: {len(row.cells)} columns where the header has {columns}, and the "
                       "reference, x, y or rotation is among those missing; check the row and the file's delimiter")
    return row.cells


def _columns(row: list[str], profile: Profile) -> dict[str, int] | None:
    keys = [column_key(c) for c in row]
    col: dict[str, int] = {}
    for name, aliases in COLUMNS.items():
        wanted = (column_key(profile.columns[name]),) if name in profile.columns else aliases
        for alias in wanted:
            if alias in keys:
                col[name] = keys.index(alias)
                break
    return col if all(k in col for k in ("ref", "x", "y", "rotation")) else None
