"""A bill of materials (BOM) read: which parts it lists, on which of its lines, and what each line says they are.

A BOM is a table of lines, one per part or per group of parts alike: their designators (a list, `C1, C2 C5;C7`, or
ranges, `R1-R4`, `R1-4`, `R1..R4`), how many, the value, the package, the manufacturer and its part number, their
mounting (Digi-Key's `Mounting Type`: SMD, through-hole, pin-in-paste), and whether the assembly fits them (a DNP or
populate column, or a value saying `DNP` or `Not fitted`). Read here: CSV, TSV, semicolons or aligned text in any
encoding centroid_table decodes, and workbooks (Excel's .xlsx, .xlsm, .xlsb and .xls, OpenDocument's .ods: the
first sheet with a header, whatever title rows stand above it). Columns are found by their usual names (`COLUMNS`:
KiCad's Refs/Value/Footprint/Qty/DNP, Altium's Designator/Comment/Footprint/Quantity, JLC's
Designator/Comment/Footprint, Eagle's Parts/Value/Package, OrCAD's Reference/Quantity/Part, Digi-Key's and Mouser's
Manufacturer Part Number), or by a saved profile (`--bom-profile FILE`: YAML `columns: {refs: ..., quantity: ...,
value: ..., package: ..., part_number: ..., manufacturer: ..., description: ..., dnp: ..., populate: ...,
mount: ...}`) for an ERP's or a tool's own names (`Einbauort`, `Menge`, `Materialnummer`). What a design does with
it is bom_parts.py's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..yamlio import Fields, load_yaml
from .centroid import COLUMNS as PLACEMENT_COLUMNS
from .centroid import left_off
from .centroid_table import column_key, decode, find_table
from .design import CadError, first_of
from .mounting import UNREAD, mount_in

COLUMNS: dict[str, tuple[str, ...]] = {  # header names, the likeliest first (compared as _key()s); a column serves one
    "refs": ("designator", "designators", "refs", "reference", "references", "refdes", "ref des", "ref",
             "reference designator", "reference designators", "ref designator", "designator(s)", "parts", "part"),
    "quantity": ("qty", "quantity", "qty per board", "quantity per board", "qty/board", "qnty", "count"),
    "value": ("value", "val", "comment", "description/value", "value/description", "part value", "name", "part"),
    "package": ("footprint", "package", "package/footprint", "pcb footprint", "footprint name", "pattern", "case",
                "case/package", "package / case", "package/case"),
    # `Mfg Part No.`, `Mfr. Part #`, `Manufacturer P/N`, `Manufacturer_Part_Number` are one _key()
    "part_number": ("mpn", "manufacturer part number", "manufacturer part", "part number", "mpn1"),
    "manufacturer": ("manufacturer", "manufacturer name"),
    "description": ("description", "desc", "part description"),
    "dnp": PLACEMENT_COLUMNS["dnp"],
    "populate": PLACEMENT_COLUMNS["populate"],
    "mount": PLACEMENT_COLUMNS["mount"],  # Digi-Key's `Mounting Type`: SMD, through-hole, pin-in-paste (mounting.py)
}
DESCRIBING = ("quantity", "value", "package", "part_number")  # a header names the designators and one of these
SPREADSHEETS = (".xlsx", ".xlsm", ".xlsb", ".xls", ".ods")
OTHER_SPREADSHEETS = (".numbers",)  # Apple's: export the BOM from Numbers
# a range of designators: R1-R4, R1-4, R1..R4, R1 - R4, R1:R4 (the same letters both ends, or none at the end)
_RANGE = re.compile(r"^([A-Za-z][A-Za-z_$]*)(\d+)(?:-|\.\.|:|\u2013)(?:\1)?(\d+)$")
_MOST_IN_RANGE = 1000
_DESIGNATOR = re.compile(r"^(?=.*[A-Za-z])[\w$.+\-/]+$")  # R7, 2-R7, U$1, TP1.1; not `Total:`, `(note)`, `42`


@dataclass(frozen=True)
class BomLine:
    where: str  # FILE:LINE, or FILE[SHEET]:ROW for a workbook
    refs: tuple[str, ...]
    quantity: int | None
    value: str = ""
    package: str = ""
    manufacturer: str = ""
    part_number: str = ""
    description: str = ""
    left_off: str | None = None  # why the BOM leaves these parts off the assembly (its DNP column, its value)
    mount: str | None = None  # mounting.py's SMD, THROUGH_HOLE or PIN_IN_PASTE, where its mount column says one


@dataclass
class Bom:
    source: str
    lines: list[BomLine]
    notes: list[str] = field(default_factory=list)

    def by_ref(self) -> dict[str, BomLine]:
        return {ref: line for line in self.lines for ref in line.refs}


def load_bom_profile(path: Path) -> dict[str, str]:
    """A BOM profile's columns: field -> the header's name for it (the designators' at least)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CadError(f"{path}: cannot be read ({exc.strerror})") from None
    f = Fields(load_yaml(text, source), source)
    f.unknown({"columns"})
    cols = f.sub("columns")
    cols.unknown(set(COLUMNS))
    cols.text("refs")
    return {str(k): str(v) for k, v in cols.data.items()}


def designators(text: str, where: str) -> tuple[str, ...]:
    """A designator cell's references in order: a list split at commas, semicolons and spaces, ranges expanded;
    none where the cell holds what no designator is (`Total:`, `(see note 3)`: a word without a letter, or with
    marks a designator does not carry)."""
    text = re.sub(r"\s*(-|\.\.|\u2013)\s*(?=[A-Za-z]*\d)", r"\1", text.strip())  # `R1 - R4` is one range
    tokens = [t for t in (t.strip().strip('"') for t in re.split(r"[,;\s]+", text)) if t]
    if any(not (_RANGE.match(t) or _DESIGNATOR.match(t)) for t in tokens):
        return ()
    refs: list[str] = []
    for token in tokens:
        m = _RANGE.match(token)
        if m is None:
            refs.append(token)
            continue
        first, last = int(m.group(2)), int(m.group(3))
        if not first <= last < first + _MOST_IN_RANGE:
            raise CadError(f"{where}: designator range {token!r} does not count up (or spans over {_MOST_IN_RANGE} "
                           "parts); write its first designator before its last")
        refs.extend(f"{m.group(1)}{n}" for n in range(first, last + 1))
    return tuple(refs)


def read_bom(path: Path, named: dict[str, str] | None = None) -> Bom:
    """The BOM in `path` (a table or a workbook), its columns by their usual names or as `named` (a profile's:
    field -> header); CadError naming the file (and row) where it cannot be read."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in OTHER_SPREADSHEETS:
        raise CadError(f"{path}: a {suffix} spreadsheet; export the BOM as .xlsx or CSV from the spreadsheet program")
    named = named or {}
    header, rows = _sheet(path, named) if suffix in SPREADSHEETS else _text_table(path, named)
    col = _columns(header, named)
    assert col is not None
    bom = Bom(str(path), [])
    seen: dict[str, str] = {}
    nameless, miscounted, unread = [], [], []
    for where, cells in rows:
        def get(k: str, cells: list[str] = cells) -> str:
            return cells[col[k]].strip() if k in col and col[k] < len(cells) else ""
        refs = designators(get("refs"), where)
        if not refs:
            nameless.append(f"{where} ({get('refs')!r})" if get("refs") else where)  # the board itself, a total
            continue
        for ref in refs:
            if ref in seen:
                raise CadError(f"{where}: {ref} is on the BOM twice (also {seen[ref]}); which line is fitted is the "
                               "BOM's to say: mend it and import again")
            seen[ref] = where
        quantity = _count(get("quantity"))
        if quantity is not None and quantity != len(refs):
            miscounted.append(f"{where} ({quantity} for {len(refs)})")
        off = left_off(get("value"), get("dnp") if "dnp" in col else None,
                       get("populate") if "populate" in col else None, "the BOM's")
        bom.lines.append(BomLine(where, refs, quantity, get("value"), get("package"), get("manufacturer"),
                                 get("part_number"), get("description"), off, mount_in(get("mount"), where, unread)))
    if not bom.lines:
        raise CadError(f"{path}: its table names no designator on any line; is this the BOM (a designator column "
                       "with R1, C2, ...)?")
    if nameless:
        bom.notes.append(f"{len(nameless)} BOM lines name no designator (the board itself, paste, a total): not "
                         f"parts the line places: {first_of(nameless, 6)}")
    if miscounted:
        bom.notes.append(f"{len(miscounted)} BOM lines state a quantity other than their designators' count, and "
                         f"their designators are taken: {first_of(miscounted, 6)}")
    if unread:
        bom.notes.append(f"{len(unread)} BOM lines say a mounting {UNREAD}, so their parts' is as the design says: "
                         f"{first_of(unread, 6)}")
    return bom


def _count(text: str) -> int | None:
    m = re.fullmatch(r"\s*(\d+)(?:[.,]0+)?\s*(?:pcs?\.?|x)?\s*", text or "", re.IGNORECASE)
    return int(m.group(1)) if m else None


def _key(header: str) -> str:
    """A BOM header as compared: column_key's, Altium's first of several sources (`Manufacturer 1`) as the name
    alone, and the ways of writing a maker and a number made one (`Mfg Part No.`, `Mfr. Part #`, `Manufacturer
    P/N`, `Manufacturer_Part_Number`: manufacturer part number)."""
    k = re.sub(r"\s+1$", "", column_key(header).replace("_", " "))
    k = re.sub(r"\bp/n\b|\bpn\b", "part number", k).replace("#", " number ").replace(".", " ")
    k = re.sub(r"\b(?:no|nr|num)\b", "number", k)
    k = re.sub(r"\b(?:mfr|mfg|manuf|manufacturer's)\b", "manufacturer", k)
    return re.sub(r"\s+", " ", k).strip()


_KEYS = {name: tuple(dict.fromkeys(_key(a) for a in aliases)) for name, aliases in COLUMNS.items()}


def _columns(header: list[str], named: dict[str, str]) -> dict[str, int] | None:
    """Each field's column: the profile's name (`named`), else the likeliest usual name first, no column twice;
    None unless the designators and one describing column are there, and every column a profile names."""
    keys = [_key(c) for c in header]
    col: dict[str, int] = {}
    for name, aliases in _KEYS.items():
        if name in named:
            key = _key(named[name])
            if key not in keys:
                return None
            col[name] = keys.index(key)
            continue
        for alias in aliases:
            if alias in keys and keys.index(alias) not in col.values():
                col[name] = keys.index(alias)
                break
    return col if "refs" in col and (named or any(k in col for k in DESCRIBING)) else None


def _no_header(path: Path, named: dict[str, str]) -> CadError:
    if named:
        return CadError(f"{path}: no header row holding the columns its profile names "
                        f"({', '.join(repr(v) for v in named.values())}); check the profile's names against the BOM")
    return CadError(f"{path}: no header row naming the designators ({', '.join(COLUMNS['refs'][:4])}, ...) and a "
                    f"quantity, value, package or part number ({COLUMNS['quantity'][0]}, {COLUMNS['value'][0]}, "
                    f"{COLUMNS['package'][0]}, {COLUMNS['part_number'][0]}, ...); save a column profile for this "
                    "BOM (--bom-profile FILE: `columns: {refs: ..., quantity: ..., value: ...}`, "
                    "inspector/board/bom.py)")


def _text_table(path: Path, named: dict[str, str]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    phrases = {a for names in COLUMNS.values() for a in names if " " in a}
    phrases |= {column_key(v) for v in named.values() if " " in v.strip()}
    table = find_table(str(path), decode(path), lambda cells: _columns(cells, named) is not None, phrases)
    if table is None:
        raise _no_header(path, named)
    return table.header, [(f"{path}:{row.line}", row.cells) for row in table.rows]


def _sheet(path: Path, named: dict[str, str]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The first sheet holding a BOM's header: the header and each row below it with its row number. calamine reads
    every workbook an ERP or a spreadsheet writes (.xlsx, .xlsm, .xlsb, Excel 97's .xls, OpenDocument's .ods)."""
    import python_calamine as calamine  # a workbook's reader, only for workbooks

    try:
        book = calamine.CalamineWorkbook.from_path(str(path))
    except calamine.PasswordError:
        raise CadError(f"{path}: the workbook is protected by a password; save the BOM without one (or as CSV)") \
            from None
    except OSError as exc:
        raise CadError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except (calamine.CalamineError, calamine.ZipError, calamine.XmlError, ValueError) as exc:
        raise CadError(f"{path}: not a {path.suffix} workbook calamine can read ({exc}); save the BOM again from the "
                       "spreadsheet program, as .xlsx or CSV") from None
    try:
        for name in book.sheet_names:
            header: list[str] | None = None
            rows: list[tuple[str, list[str]]] = []
            for n, values in enumerate(book.get_sheet_by_name(name).to_python(skip_empty_area=False), start=1):
                cells = [_cell(v) for v in values]
                if header is None:
                    header = cells if _columns(cells, named) is not None else None
                elif any(cells):
                    rows.append((f"{path}[{name}]:{n}", cells))
            if header is not None:
                return header, rows
    finally:
        book.close()
    raise _no_header(path, named)


def _cell(value: object) -> str:
    """A workbook cell as the text a CSV export would hold: a whole number without `.0`."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()
