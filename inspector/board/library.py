"""The plant's package library: what each package is and how the line inspects it.

Shared by every board of a plant: a package met once is known for the next board. The product's own library
(packages.yaml beside this module) knows the common packages by name pattern; a plant's file (same sections) is
read first and wins, and may know parts by the part number its BOMs give them too (`parts:`, over their package's
class: the plant's own word for what it buys). A package neither knows is never guessed: the import stops, lists
every unknown package with the parts that use it, and writes a file to fill in (`unknown_template`). One convention
is used, the IPC designators: a package that is only a chip size (`0402`, as Eagle's centroid files give it) is a
resistor, capacitor or inductor by its reference's letter (R, C, L; FB a ferrite); a chip's size in a longer name
(`R0402`, KiCad's `C_0603_1608Metric`) gives its body. IPC-7351 land-pattern names (`RESC1005X40N`,
`SON127P800X600X80-9N`) are known by their family, and give their body where the name states it (ipc7351.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..routing.shapes import SHAPES
from ..yamlio import ConfigError, Fields, load_yaml
from .design import PlacedPart, first_of
from .ipc7351 import stated_body
from .klc_names import stated_body as klc_body

BUILT_IN = Path(__file__).with_name("packages.yaml")
CHIP_SIZE = re.compile(r"^(01005|0201|0402|0603|0805|1008|1206|1210|1812|2010|2512)$")
# EIA chip bodies, length x width in mm: what a centroid file's bare `0402` looks like from above
CHIP_BODY = {"01005": (0.4, 0.2), "0201": (0.6, 0.3), "0402": (1.0, 0.5), "0603": (1.6, 0.8), "0805": (2.0, 1.25),
             "1008": (2.5, 2.0), "1206": (3.2, 1.6), "1210": (3.2, 2.5), "1812": (4.5, 3.2), "2010": (5.0, 2.5),
             "2512": (6.3, 3.2)}
CHIP_BY_LETTER = {"R": "chip-resistor", "C": "chip-capacitor", "L": "chip-inductor", "FB": "ferrite",
                  "F": "chip-fuse"}
# a chip's imperial size standing in a longer name: R0402, C_0603_1608Metric (KiCad's), LED-0603; not a metric code
CHIP_IN_NAME = re.compile(r"(?<![0-9])(" + "|".join(CHIP_BODY) + r")(?![0-9]|Metric)")
CHIP_CLASSES = {"chip-resistor", "chip-capacitor", "chip-inductor", "ferrite", "chip-fuse", "led", "diode"}


@dataclass(frozen=True)
class PackageClass:
    name: str
    shape: str | None  # the drawn shape (routing/shapes.py); None when not inspected
    polarized: bool
    inspect: bool = True
    reason: str = ""  # why a class is not inspected


@dataclass
class Library:
    classes: dict[str, PackageClass]
    packages: dict[str, str]  # exact package name -> class
    bodies: dict[str, tuple[float, float]]  # exact package name -> body (w, h) mm at rotation 0, where given
    patterns: list[tuple[re.Pattern[str], str]]
    sources: list[str]
    parts: dict[str, str] = field(default_factory=dict)  # a part number (the BOM's) -> class: the plant's own word
    part_bodies: dict[str, tuple[float, float]] = field(default_factory=dict)  # part number -> body, where given

    def by_number(self, part: PlacedPart) -> str | None:
        """The part number by which the library knows `part` (its BOM line's, under `parts:`), or None."""
        number = part.bought.part_number if part.bought is not None else ""
        return number if number in self.parts else None

    def lookup(self, package: str, ref: str = "") -> PackageClass | None:
        """The package's class, or None when the library does not know it."""
        if package in self.packages:
            return self.classes[self.packages[package]]
        for pattern, cls in self.patterns:
            if pattern.search(package):
                return self.classes[cls]
        if CHIP_SIZE.match(package):
            letters = re.search(r"[A-Za-z]+", ref)  # R of R7, and of 2-R7 (R7 of a panel's second board)
            cls = CHIP_BY_LETTER.get(letters.group(0).upper()) if letters else None
            if cls is not None and cls in self.classes:
                return self.classes[cls]
        return None


    def part_class(self, part: PlacedPart) -> PackageClass | None:
        """A part's class: its part number's where the library has one (`parts:`, the most particular word), else
        its package's, else, for a package the library does not know, its BOM package's (a purchasing name,
        `SOT143B` beside the footprint's `TVS_DIODE-PRTR5V0U2AX`: the BOM says what the part is, nothing is
        guessed), else None (asked for)."""
        number = self.by_number(part)
        if number is not None:
            return self.classes[self.parts[number]]
        cls = self.lookup(part.package, part.ref)
        if cls is None and part.bought is not None and part.bought.package:
            cls = self.lookup(part.bought.package, part.ref)
        return cls

    def is_mark(self, part: PlacedPart) -> bool:
        """A fiducial: a registration mark on the copper, which no BOM lists and no station leaves out."""
        cls = self.part_class(part)
        return part.fiducial or (cls is not None and cls.name == "fiducial")

    def part_body(self, part: PlacedPart) -> tuple[float, float] | None:
        """A part's body for a file without footprints: its part number's (`parts:`), else its package's (`body`),
        else its BOM package's."""
        number = self.by_number(part)
        body = self.part_bodies.get(number) if number is not None else None
        body = body or self.body(part.package, part.ref)
        if body is None and part.bought is not None and part.bought.package:
            body = self.body(part.bought.package, part.ref)
        return body

    def body(self, package: str, ref: str = "") -> tuple[float, float] | None:
        """The package's body in mm (w, h at rotation 0) for a file without footprints (a centroid file): the
        library's, else what the name states (a chip size, an IPC-7351 or KiCad library name's body), else None
        (asked for)."""
        stated = self.bodies.get(package) or CHIP_BODY.get(package) or stated_body(package) or klc_body(package)
        if stated is not None:
            return stated
        cls = self.lookup(package, ref)
        m = CHIP_IN_NAME.search(package) if cls is not None and cls.name in CHIP_CLASSES else None
        return CHIP_BODY[m.group(1)] if m else None


def _read(path: Path, into: Library) -> None:
    source = str(path)
    try:
        doc = Fields(load_yaml(path.read_text(encoding="utf-8"), source), source)
    except OSError as exc:
        raise ConfigError(source, None, f"cannot read the package library: {exc.strerror}") from None
    doc.unknown({"classes", "packages", "parts", "patterns"})
    classes = doc.sub("classes")
    for name in classes.data:
        if str(name) in into.classes:
            continue  # the file read first (the plant's) wins
        f = classes.sub(str(name))
        f.unknown({"shape", "polarized", "inspect", "reason"})
        inspect = bool(f.get("inspect", True))
        shape = f.get("shape")
        if inspect and shape not in SHAPES:
            raise f.error("shape", f"an inspected class needs one of the drawn shapes {', '.join(sorted(SHAPES))}, "
                                   f"got {shape!r}")
        if not inspect and not f.get("reason"):
            raise f.error("reason", "say why parts of this class are not inspected")
        into.classes[str(name)] = PackageClass(str(name), shape if inspect else None, bool(f.get("polarized", False)),
                                               inspect, str(f.get("reason") or ""))
    _entries(doc, "packages", "package", into.packages, into.bodies)
    _entries(doc, "parts", "part number", into.parts, into.part_bodies)
    for i, item in enumerate(doc.get("patterns") or []):
        f = Fields(item, source, f"patterns[{i}]")
        try:
            pattern = re.compile(f.text("match"))
        except re.error as exc:
            raise f.error("match", f"not a regular expression ({exc})") from None
        into.patterns.append((pattern, f.text("class")))
    into.sources.append(source)


def _entries(doc: Fields, section: str, what: str, names: dict[str, str],
             bodies: dict[str, tuple[float, float]]) -> None:
    """A section of `NAME: CLASS` or `NAME: {class: CLASS, body: [w, h]}` entries into `names` and `bodies`; a
    name already there (from the file read first, the plant's) is kept."""
    if doc.get(section) is None:
        return
    entries = doc.sub(section)
    for name in entries.data:
        entry = entries.data[name]
        if str(name) in names:
            continue
        if isinstance(entry, dict):
            f = entries.sub(str(name))
            f.unknown({"class", "body"})
            if f.get("class") is None:
                raise f.error("class", f"not filled in: give the {what}'s class (one of the classes: sections, "
                                       "e.g. chip-resistor, soic, qfn-qfp, connector)")
            names[str(name)] = f.text("class")
            body = f.get("body")
            if body is not None:
                if not (isinstance(body, list) and len(body) == 2 and all(isinstance(v, (int, float)) and v > 0
                                                                          for v in body)):
                    raise f.error("body", f"[width, height] in mm at rotation 0, got {body!r}")
                bodies[str(name)] = (float(body[0]), float(body[1]))
        else:
            names[str(name)] = str(entry)


def load_library(plant: Path | None = None) -> Library:
    """The plant's library (when given) over the product's own."""
    lib = Library({}, {}, {}, [], [])
    for path in ([Path(plant)] if plant is not None else []) + [BUILT_IN]:
        _read(path, lib)
    named = set(lib.packages.values()) | set(lib.parts.values()) | {c for _p, c in lib.patterns}
    unknown = sorted(named - set(lib.classes))
    if unknown:
        raise ConfigError(lib.sources[0], None, f"names package classes no library defines: {', '.join(unknown)}; "
                                                "add them under classes:")
    return lib


def unknown_template(unknown: dict[str, list[str]], classes: list[str], about: dict[str, str] | None = None) -> str:
    """A plant library file listing the unknown packages for the engineer to fill in; `about`: what a BOM says each
    part is (ref -> a few words), written under its package."""
    lines = ["# Packages the library does not know: give each its class, then import again with",
             "# `--library THIS_FILE` (keep the file: every later board of the plant reads it too).",
             f"# Classes: {', '.join(classes)} (or add your own under classes:, as packages.yaml does).",
             "# A centroid file has no footprints: give such a package its body too, `body: [w, h]` in mm at",
             "# rotation 0 (a KiCad or Eagle board file has them): what its window must show, the body with its",
             "# leads and joints (a gull-wing package's span across its leads, not its plastic alone).",
             "# A part the BOM gives a part number may be known by it instead, for every board that buys it:",
             "# `parts: {PART_NUMBER: {class: ..., body: [w, h]}}` (it wins over its package's class).",
             "packages:"]
    for package, refs in sorted(unknown.items()):
        shown = first_of(refs, 6)
        lines.append(f"  {package!r}: {{class: null}}   # {shown}")
        said = [s for s in dict.fromkeys((about or {}).get(r, "") for r in refs) if s]
        lines.extend(f"    # BOM: {s}" for s in said[:3])
    return "\n".join(lines) + "\n"
