"""A centroid file's text as a table: decoded whatever the tool's encoding, split by its delimiter or by the
alignment of its columns, each row with its line number, and the units its preamble states.

Tools write pick-and-place files every way: KiCad's .pos and Altium's default Pick Place .txt align their columns
with spaces under a preamble (Altium quotes a value holding spaces), KiCad's and JLC's CSVs are UTF-8 with commas,
EasyEDA's are UTF-16 with tabs, German tools use semicolons, Windows tools write cp1252 (`10kΩ`). Reading the table
is this module's one job; what its columns mean is centroid.py's.
"""
from __future__ import annotations

import codecs
import csv
import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .design import CadError

UNIT_WORDS = {"mm": "mm", "millimeter": "mm", "millimeters": "mm", "millimetre": "mm", "millimetres": "mm",
              "metric": "mm", "mil": "mil", "mils": "mil", "thou": "mil", "in": "in", "inch": "in", "inches": "in"}
_CELL = re.compile(r'"[^"]*"|\S+')
_RULE = re.compile(r"^[\s=\-_*#]*$")  # a preamble's or footer's rule line, or a bare comment mark


@dataclass(frozen=True)
class Row:
    line: int  # 1-based, in the file
    cells: list[str]


@dataclass(frozen=True)
class Table:
    header: list[str]
    rows: list[Row]
    layout: str  # how the columns were told apart: "comma", "semicolon", "tab" or "aligned"
    preamble: list[str]  # the lines above the header


def column_key(header: str) -> str:
    """A header cell as the column tables compare: lower case, units (`(mm)`, `[deg]`), quotes and runs of space
    taken out."""
    text = re.sub(r"[(\[](mm|mils?|in|inch|thou|deg|degrees|°)[)\]]|[\"']", "", header.lower())
    return re.sub(r"\s+", " ", text).strip()


def header_units(header: list[str]) -> str | None:
    """The units a header's cells name (`Center-X(mil)`, `X [mm]`), or None."""
    found = re.findall(r"[(\[](mm|mils?|in|inch|thou)[)\]]", " ".join(header).lower())
    return UNIT_WORDS[found[0]] if found else None


def stated_units(lines: list[str]) -> str | None:
    """The units a preamble states (`Units used: mil`, `## Unit = inches, Angle = deg.`, `Units: thou`), or None."""
    for line in lines:
        m = re.search(r"\bunits?(?:\s+used)?\s*[:=]\s*([a-z]+)", line.lower())
        if m and m.group(1) in UNIT_WORDS:
            return UNIT_WORDS[m.group(1)]
    return None


def decode(path: Path) -> str:
    """The file's text: UTF-8 (with or without its mark), UTF-16 (EasyEDA's), else cp1252; a binary file refused."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise CadError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            return raw.decode("utf-16")
        if len(raw) >= 4 and raw[0] and not raw[1] and raw[2] and not raw[3]:
            return raw.decode("utf-16-le")  # written without its byte-order mark
        if len(raw) >= 4 and not raw[0] and raw[1] and not raw[2] and raw[3]:
            return raw.decode("utf-16-be")
    except UnicodeDecodeError as exc:
        raise CadError(f"{path}: looks like UTF-16 text but does not decode ({exc.reason} at byte {exc.start}); "
                       "export the pick-and-place file again") from None
    if b"\x00" in raw[:4096]:
        raise CadError(f"{path}: a binary file, not a centroid table; export the pick-and-place (centroid) file "
                       "as text (CSV or TXT) from the CAD tool")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("cp1252", errors="replace")  # only values (a comment's `Ω`) are at stake


def find_table(source: str, text: str, is_header: Callable[[list[str]], bool], phrases: set[str]) -> Table | None:
    """The table in `text` whose header row `is_header` accepts: delimited by comma, semicolon or tab (of those that
    find one, the one whose header has most columns), else aligned with spaces; None when none is found.
    `phrases`: column names of several words (`mid x`) that an aligned header writes with single spaces."""
    best: Table | None = None
    for name, delimiter in (("comma", ","), ("semicolon", ";"), ("tab", "\t")):
        if delimiter not in text:
            continue
        table = _delimited(text, delimiter, name, is_header)
        if table is not None and (best is None or len(table.header) > len(best.header)):
            best = table
    return best or _aligned(source, text, is_header, phrases)


def _delimited(text: str, delimiter: str, name: str, is_header: Callable[[list[str]], bool]) -> Table | None:
    reader = csv.reader(io.StringIO(text), delimiter=delimiter, skipinitialspace=True)
    header: list[str] | None = None
    preamble: list[str] = []
    rows: list[Row] = []
    try:
        for cells in reader:
            line = reader.line_num
            if header is None:
                if is_header(cells):
                    header = cells
                else:
                    preamble.append(delimiter.join(cells))
            elif any(c.strip() for c in cells) and not _RULE.match(" ".join(cells)):
                rows.append(Row(line, cells))
    except csv.Error:
        return None  # not this delimiter's table (an unclosed quote read as one)
    return Table(header, rows, name, preamble) if header is not None else None


def _aligned(source: str, text: str, is_header: Callable[[list[str]], bool], phrases: set[str]) -> Table | None:
    lines = text.splitlines()
    for n, line in enumerate(lines):
        columns = _header_columns(re.sub(r"^\s*#+", lambda m: " " * len(m.group(0)), line), phrases)
        if not columns or not is_header([c for c, _ in columns]):
            continue
        rows = []
        for k, body in enumerate(lines[n + 1:], start=n + 2):
            if not body.strip() or body.lstrip().startswith("#") or _RULE.match(body):
                continue
            rows.append(Row(k, _aligned_cells(body, columns, f"{source}:{k}")))
        return Table([c for c, _ in columns], rows, "aligned", lines[:n])
    return None


def _header_columns(line: str, phrases: set[str]) -> list[tuple[str, int]]:
    """The header's columns with where each starts; words a single space apart that name a known column together
    (`Mid X`) are one column."""
    words = [(m.group(0), m.start()) for m in _CELL.finditer(line)]
    columns: list[tuple[str, int]] = []
    i = 0
    while i < len(words):
        word, start = words[i]
        if i + 1 < len(words):
            nxt, nstart = words[i + 1]
            if nstart == start + len(word) + 1 and column_key(f"{word} {nxt}") in phrases:
                columns.append((f"{word} {nxt}", start))
                i += 2
                continue
        columns.append((word.strip('"'), start))
        i += 1
    return columns


def _aligned_cells(line: str, columns: list[tuple[str, int]], where: str) -> list[str]:
    """A row's cells: its words when they are as many as the header's columns (a quoted value is one word), else
    the text under each header column, where the row is aligned to the header."""
    words = [w.strip('"') for w in _CELL.findall(line)]
    if len(words) == len(columns):
        return words
    starts = [0] + [s for _, s in columns[1:]]  # the first column's values start the line (KiCad's header a `# `)
    line = line.ljust(starts[-1] + 1)
    if all(s == 0 or line[s - 1].isspace() for s in starts):
        return [line[s:e].strip().strip('"') for s, e in zip(starts, [*starts[1:], len(line)])]
    raise CadError(f"{where}: {len(words)} values where the header has {len(columns)} columns, and they do not "
                   "line up under its columns (a value with spaces must be quoted); check the row")
