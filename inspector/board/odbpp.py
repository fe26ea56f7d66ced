"""ODB++ jobs (the manufacturing format of Siemens' Valor tools; a folder, or the .tgz / .zip it travels as), read
with the standard library and unlzw3 for files kept with Unix compress.

What an import needs of a job, and where the format keeps it:
- the job's root holds `matrix/matrix`: its `LAYER { ... }` blocks name the component layers (`TYPE=COMPONENT`,
  by convention COMP_+_TOP and COMP_+_BOT; otherwise the first by `ROW` is the top);
- a step's parts: `steps/<step>/layers/<layer>/components`: `CMP <pkg> <x> <y> <rot> <N|M> <ref> <part>;<attrs>`,
  the rotation clockwise seen from the top (made counter-clockwise here, as design.py keeps it), `M` for a part
  mirrored onto the bottom, each `TOP <pin> <x> <y> ...` below it where that pin landed on the board (how the job
  means a bottom part's mirror and rotation is read from these: bottom_fit.py); `PRP Value '...'` its value; the
  boolean system attribute `.no_pop` leaves it unplaced (the attribute names are the file's `@<n> <name>` lines);
- footprints: `steps/<step>/eda/data`: the n-th `PKG <name> <pitch> <xmin> <ymin> <xmax> <ymax>;` is package n; the
  outline records (RC, CR, SQ, or a contour CT..CE) before its first `PIN <name> <T|B|S> <x> <y> <fhs> <etype>
  <mtype>` are its body, and those after each PIN that pin's pad (T: through-hole; mount type H: a bare hole, no
  pad; a part of such holes alone has nothing to solder); a document layer may draw the bodies instead
  (odbpp_drawings.py);
- the board's edge: `steps/<step>/profile`, a features file whose surface contour (OB, OS, OC) bounds it;
- a panel: `steps/<step>/stephdr`, its `STEP-REPEAT { ... }` blocks placing copies of other steps (odbpp_panel.py);
- units: each file's `UNITS=MM|INCH` (`U MM` in older jobs), else the job's `misc/info`, else inches, the format's
  own default (a note says so);
- a fiducial's bare ring: the opening flashed at its place on its side's solder mask layer (odbpp_mask.py);
- any of these files may be stored compressed with Unix compress (`components.Z`).
Frame: y up, like Eagle. A job whose parts sit in more than one step (a board and the panel of it, a board and a
variant) asks which, naming them: `--step NAME`, or the step's own folder (JOB/steps/NAME) of the unpacked job.
"""
from __future__ import annotations

import re
import tarfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .bottom_fit import DRAWN_MIRRORED, bottom_footprints
from .design import BARE_HOLES, BoardDesign, CadError, Pad, PlacedPart, Rect, bounding, mounted
from .drawn_bodies import dressed
from .mask_openings import Opening, with_openings
from .odbpp_drawings import body_layers, document_layers, drawings
from .odbpp_mask import mask_layers, openings
from .odbpp_panel import Placement, Repeat, StepHeader, boards_in, numbered, placed_copy

ARCHIVES = (".tgz", ".tar.gz", ".tar", ".zip")
UNITS = {"MM": 1.0, "INCH": 25.4}
NOT_PLACED = ".no_pop"
_OUTLINE_RECORDS = {"CT", "CE", "OB", "OS", "OC", "OE", "SE", "RC", "CR", "SQ"}
_READ = re.compile(r"^(matrix/matrix|misc/info|steps/[^/]+/(eda/data|profile|stephdr|layers/[^/]+/components))(\.z)?$")
UNTOLD = ("as KiCad 9 writes a job (a bottom part's package drawn as seen from the top; measured in "
          "results/boards.md); a job exported with its toeprints (TOP records) is read by its own")
_UNITS_LINE = re.compile(r"^\s*(?:UNITS\s*=\s*|U\s+)(MM|INCH)\s*$", re.IGNORECASE)


def is_odb_job(path: Path) -> bool:
    """A folder holding (or inside) an ODB++ job, or an archive named as one travels."""
    path = Path(path)
    if path.is_dir():
        return _job_root(path) is not None
    return path.name.lower().endswith(ARCHIVES)


class _Job:
    """The job's files by their path below its root (lowercase: ODB++ names are, but a copy through Windows may
    not be), read from a folder or an archive; a `.Z` beside a name stands for it."""

    def __init__(self, source: Path) -> None:
        self.source = source
        self.files: dict[str, bytes | Path] = {}
        if source.is_dir():
            root = _job_root(source)
            if root is None:
                raise CadError(f"{source}: not an ODB++ job (no matrix/matrix in it or above it)")
            self.step_asked = source.name if source != root else None
            for f in root.rglob("*"):
                if f.is_file():
                    self.files[f.relative_to(root).as_posix().lower()] = f
        else:
            self.step_asked = None
            self.files = dict(_archive_files(source))

    def has(self, name: str) -> bool:
        return name in self.files or name + ".z" in self.files

    def lines(self, name: str) -> list[str] | None:
        """The file's text lines, or None when the job has neither it nor its `.Z`."""
        data = self.files.get(name)
        packed = data is None
        if packed:
            data = self.files.get(name + ".z")
        if data is None:
            return None
        raw = data.read_bytes() if isinstance(data, Path) else data
        if packed:
            raw = _uncompress(raw, f"{self.source}: {name}.Z")
        return raw.decode("utf-8", errors="replace").splitlines()

    def fetch(self, names: set[str]) -> None:
        """Make `names` readable too: an archive is read again for just those (a folder has every file already)."""
        missing = {n for n in names if n not in self.files}
        if missing and not self.source.is_dir():
            self.files.update(_archive_files(self.source, missing.__contains__))

    def steps(self) -> list[str]:
        return sorted({n.split("/")[1] for n in self.files if n.startswith("steps/") and n.count("/") >= 2})


def _job_root(path: Path) -> Path | None:
    """The job folder: `path` itself, or the job two levels up from a step's folder (JOB/steps/NAME)."""
    if (path / "matrix" / "matrix").is_file() or (path / "matrix" / "matrix.Z").is_file():
        return path
    if path.parent.name.lower() == "steps" and _job_root(path.parent.parent) == path.parent.parent:
        return path.parent.parent
    return None


def _archive_files(source: Path, wanted: Callable[[str], object] = _READ.match) -> Iterator[tuple[str, bytes]]:
    """(path below the job's root, contents) of the files an import reads (`wanted`), out of a .tgz / .tar / .zip;
    a job's copper layers can be hundreds of megabytes, so nothing else is read into memory."""
    try:
        if source.name.lower().endswith(".zip"):
            with zipfile.ZipFile(source) as z:
                names = {_member_name(i.filename): i for i in z.infolist() if not i.is_dir()}
                root = _archive_root(source, names)
                for name, info in names.items():
                    if name.startswith(root) and wanted(name[len(root):]):
                        yield name[len(root):], z.read(info)
            return
        with tarfile.open(source, "r:*") as t:
            members = {_member_name(m.name): m for m in t.getmembers() if m.isfile()}
            root = _archive_root(source, members)
            for name, member in members.items():
                handle = t.extractfile(member) if name.startswith(root) and wanted(name[len(root):]) else None
                if handle is not None:
                    yield name[len(root):], handle.read()
    except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CadError(f"{source}: cannot be read as an ODB++ archive ({reason}); pack the job again as .tgz or "
                       ".zip, or import its unpacked folder") from None


def _archive_root(source: Path, names: Iterable[str]) -> str:
    """The job's folder inside the archive (`board/`, or '' when the archive holds the job's own folders)."""
    roots = sorted((n.rsplit("matrix/matrix", 1)[0] for n in names if n.endswith(("matrix/matrix", "matrix/matrix.z"))),
                   key=len)
    if not roots:
        raise CadError(f"{source}: no ODB++ job in the archive (no <job>/matrix/matrix among its files)")
    return roots[0]


def _member_name(name: str) -> str:
    return PurePosixPath(name.replace("\\", "/")).as_posix().lstrip("./").lower()


def _uncompress(raw: bytes, where: str) -> bytes:
    from unlzw3 import unlzw

    try:
        return unlzw(raw)
    except (ValueError, TypeError, IndexError) as exc:  # a bad header or a cut stream
        raise CadError(f"{where}: not a file of Unix compress ({exc}); the job may be damaged: export it "
                       "again") from None


def _units(lines: list[str], default: float | None) -> float | None:
    for line in lines:
        m = _UNITS_LINE.match(line)
        if m:
            return UNITS[m.group(1).upper()]
    return default


def _number(token: str, where: str, what: str) -> float:
    try:
        return float(token)
    except ValueError:
        raise CadError(f"{where}: {what} is {token!r}, not a number") from None


@dataclass
class _Package:
    name: str
    body: list[Rect] = field(default_factory=list)
    pads: list[Pad] = field(default_factory=list)
    through_hole: bool = False
    pins: list[tuple[float, float]] = field(default_factory=list)  # each PIN record's centre, in its order, mm
    holes: int = 0  # pins that are bare holes (mount type H: a locating peg's, a mounting hole's), no pads


class _Shapes:
    """The outline records (RC, CR, SQ, CT..CE) of one owner, gathered into boxes (mm)."""

    def __init__(self, scale: float) -> None:
        self.scale = scale
        self.boxes: list[Rect] = []
        self._contour: list[tuple[float, float]] | None = None  # the points of a CT..CE contour being read

    def take(self, tokens: list[str], where: str) -> bool:
        """True when the record was an outline record (and taken)."""
        kind, s = tokens[0], self.scale
        if kind not in _OUTLINE_RECORDS:  # another record of the section (FID, a vendor's own): not ours to read
            return False
        nums = [_number(t, where, f"{kind}'s value") for t in tokens[1:] if not t.isalpha()]
        if kind == "CT":
            self._contour = []
        elif kind == "CE":
            box = bounding(self._contour or [])
            if box is not None:
                self.boxes.append(box)
            self._contour = None
        elif kind in ("OB", "OS", "OC") and self._contour is not None and len(nums) >= 2:
            self._contour.append((nums[0] * s, nums[1] * s))  # OC's end point (an arc bulging past it is rare)
        elif kind == "RC" and len(nums) >= 4:
            x, y, w, h = (v * s for v in nums[:4])
            self.boxes.append((x, y, x + w, y + h))
        elif kind == "CR" and len(nums) >= 3:
            x, y, r = (v * s for v in nums[:3])
            self.boxes.append((x - r, y - r, x + r, y + r))
        elif kind == "SQ" and len(nums) >= 3:
            x, y, half = (v * s for v in nums[:3])
            self.boxes.append((x - half, y - half, x + half, y + half))
        return True

    def box(self) -> Rect | None:
        return bounding([(b[0], b[1]) for b in self.boxes] + [(b[2], b[3]) for b in self.boxes])


def _packages(lines: list[str], scale: float, where: str) -> list[_Package]:
    """eda/data's packages in their order (a CMP's package number is its index here)."""
    packages: list[_Package] = []
    shapes: _Shapes | None = None
    pin: tuple[str, bool] | None = None  # (its type, surface-mounted) of the pin whose pad is being read
    hole = False  # that pin is a bare hole: its outline is no pad

    def close() -> None:
        nonlocal pin, hole
        if not packages or shapes is None:
            return
        box = shapes.box()
        if pin is None:
            packages[-1].body = [box] if box is not None else []
        elif box is not None and not hole:
            w, h = box[2] - box[0], box[3] - box[1]
            if w > 0 and h > 0:
                packages[-1].pads.append(Pad((box[0] + box[2]) / 2, (box[1] + box[3]) / 2, w, h, smd=pin[1]))
        pin = None

    for n, line in enumerate(lines, 1):
        tokens = line.split(";", 1)[0].split()
        if not tokens or tokens[0].startswith("#"):
            continue
        if tokens[0] == "PKG":
            close()
            if len(tokens) < 2:
                raise CadError(f"{where}:{n}: a PKG record without its name")
            packages.append(_Package(tokens[1]))
            shapes = _Shapes(scale)
        elif tokens[0] == "PIN" and packages:
            close()
            if len(tokens) < 5:
                raise CadError(f"{where}:{n}: a PIN record needs <name> <type> <x> <y>; it has {len(tokens) - 1}")
            kind = tokens[2].upper()
            pin = (kind, kind == "S")
            hole = len(tokens) > 7 and tokens[7].upper() == "H"  # <name> <type> <x> <y> <fhs> <etype> <mtype>
            packages[-1].pins.append((_number(tokens[3], f"{where}:{n}", "the pin's x") * scale,
                                      _number(tokens[4], f"{where}:{n}", "the pin's y") * scale))
            packages[-1].holes += hole
            packages[-1].through_hole |= kind == "T" and not hole
            shapes = _Shapes(scale)
        elif tokens[0] in ("NET", "SNT", "FGR", "PRP", "LYR", "HDR"):
            close()
            shapes = None
        elif shapes is not None:
            shapes.take(tokens, f"{where}:{n}")
    close()
    return packages


@dataclass
class _Placed:
    line: int
    pkg: int
    x: float
    y: float
    rot: float
    mirrored: bool
    ref: str
    part: str
    attributes: set[str]
    value: str = ""
    toeprints: list[tuple[int, float, float]] = field(default_factory=list)  # (pin number, x, y) from TOP records


def _components(lines: list[str], where: str) -> list[_Placed]:
    names: dict[str, str] = {}  # attribute number -> name (`@0 .no_pop`)
    out: list[_Placed] = []
    for n, line in enumerate(lines, 1):
        text = line.strip()
        if text.startswith("@"):
            number, _, name = text[1:].partition(" ")
            names[number] = name.strip()
        elif text.startswith("CMP "):
            head, _, attrs = text.partition(";")
            tokens = head.split()
            if len(tokens) < 7:
                raise CadError(f"{where}:{n}: a CMP record needs <pkg> <x> <y> <rot> <N|M> <ref> <part>; this one "
                               f"has {len(tokens) - 1} fields")
            pkg = _number(tokens[1], f"{where}:{n}", "the package number")
            x, y, rot = (_number(t, f"{where}:{n}", what) for t, what in zip(tokens[2:5], ("x", "y", "rotation")))
            if tokens[5].upper() not in ("N", "M"):
                raise CadError(f"{where}:{n}: the mirror field is {tokens[5]!r}; ODB++ writes N or M")
            given = {a.split("=", 1)[0].strip() for a in attrs.split(";", 1)[0].split(",") if a.strip()}
            out.append(_Placed(n, int(pkg), x, y, rot, tokens[5].upper() == "M", tokens[6],
                               tokens[7] if len(tokens) > 7 else "", {names.get(a, a) for a in given}))
        elif text.startswith("TOP ") and out:  # TOP <pin_num> <x> <y> <rot> <mirror> <net> <subnet> <name>
            tokens = text.split(";", 1)[0].split()
            if len(tokens) < 4:
                raise CadError(f"{where}:{n}: a TOP record needs <pin number> <x> <y>; this one has "
                               f"{len(tokens) - 1} fields")
            number = _number(tokens[1], f"{where}:{n}", "the toeprint's pin number")
            out[-1].toeprints.append((int(number), _number(tokens[2], f"{where}:{n}", "the toeprint's x"),
                                      _number(tokens[3], f"{where}:{n}", "the toeprint's y")))
        elif text.startswith("PRP ") and out:
            key, _, value = text[4:].partition(" ")
            if key.lower() == "value":
                out[-1].value = value.strip().strip("'")
    return out


def _edge(lines: list[str], scale: float, where: str) -> Rect | None:
    """The box of a profile's surface: its contour's points (OB begins, OS a line to, OC an arc to)."""
    points = []
    for n, line in enumerate(lines, 1):
        tokens = line.split(";", 1)[0].split()
        if tokens and tokens[0] in ("OB", "OS", "OC"):
            if len(tokens) < 3:
                raise CadError(f"{where}:{n}: {tokens[0]} needs x and y")
            points.append((_number(tokens[1], f"{where}:{n}", "x") * scale,
                           _number(tokens[2], f"{where}:{n}", "y") * scale))
    return bounding(points)


def _matrix_blocks(lines: list[str]) -> list[dict[str, str]]:
    """The matrix's STEP and LAYER blocks, each its KEY=value lines (keys upper-cased) and `_kind`."""
    out, block = [], None
    for line in lines:
        text = line.strip()
        if text.endswith("{"):
            block = {"_kind": text[:-1].strip().upper()}
        elif text == "}" and block is not None:
            out.append(block)
            block = None
        elif block is not None and "=" in text:
            key, _, value = text.partition("=")
            block[key.strip().upper()] = value.strip()
    return out


def _matrix_rows(blocks: list[dict[str, str]]) -> list[tuple[int, str, str]]:
    """(row, name lowercased, TYPE upper-cased) of every LAYER block in the job's matrix."""
    return [(int(b.get("ROW", "0")) if b.get("ROW", "0").isdigit() else 0, b.get("NAME", "").lower(),
             b.get("TYPE", "").upper()) for b in blocks if b["_kind"] == "LAYER"]


def _matrix_layers(rows: list[tuple[int, str, str]]) -> list[tuple[int, str]]:
    """(row, name) of every component layer in the job's matrix."""
    return sorted((row, name) for row, name, kind in rows if kind == "COMPONENT")


def _sides(layers: list[tuple[int, str]]) -> dict[str, str]:
    """Layer name -> top | bottom: by the convention's names, else by row (the first component layer is the top)."""
    sides = {}
    for i, (_row, name) in enumerate(layers):
        if name.endswith(("_top", "top")):
            sides[name] = "top"
        elif name.endswith(("_bot", "_bottom", "bot")):
            sides[name] = "bottom"
        else:
            sides[name] = "top" if i == 0 else "bottom"
    return sides


def _step_header(lines: list[str], scale: float, where: str) -> StepHeader:
    """A step's datum and its STEP-REPEAT blocks; a copy turned over or mirrored is refused (odbpp_panel.py)."""
    top: dict[str, str] = {}
    repeats: list[Repeat] = []
    block: dict[str, str] | None = None
    start = 0
    for n, line in enumerate(lines, 1):
        text = line.strip()
        if text.upper().startswith("STEP-REPEAT") and text.endswith("{"):
            block, start = {}, n
        elif text == "}" and block is not None:
            repeats.append(_repeat(block, scale, f"{where}:{start}", start))
            block = None
        elif "=" in text:
            key, _, value = text.partition("=")
            (block if block is not None else top)[key.strip().upper()] = value.strip()
    datum = tuple(_number(top.get(k, "0"), where, k) * scale for k in ("X_DATUM", "Y_DATUM"))
    return StepHeader((datum[0], datum[1]), tuple(repeats))


def _repeat(block: dict[str, str], scale: float, where: str, line: int) -> Repeat:
    name = block.get("NAME", "").strip().lower()
    if not name:
        raise CadError(f"{where}: a STEP-REPEAT block names no step (NAME=)")
    for turned in ("FLIP", "MIRROR"):
        if block.get(turned, "NO").strip().upper() == "YES":
            raise CadError(f"{where}: the copies of step {name} are {'flipped' if turned == 'FLIP' else 'mirrored'} "
                           f"({turned}=YES): a panel with boards turned over is not read; import the board step "
                           f"itself (--step {name}) and inspect its boards one at a time")
    counts = []
    for key in ("NX", "NY"):
        value = block.get(key, "1").strip()
        if not value.isdigit() or int(value) < 1:
            raise CadError(f"{where}: {key} is {value!r}; a STEP-REPEAT needs a whole number of copies, 1 or more")
        counts.append(int(value))
    x, y, dx, dy, angle = (_number(block.get(k, "0"), where, k) for k in ("X", "Y", "DX", "DY", "ANGLE"))
    return Repeat(name, x * scale, y * scale, dx * scale, dy * scale, counts[0], counts[1], angle, line)


def read_odbpp(path: Path, step: str | None = None) -> BoardDesign:
    """The design of one step of an ODB++ job (a folder, a step's folder in it, or a .tgz / .zip of it): a board, or
    a panel as the one board the line carries (odbpp_panel.py). `step` names it where the job has several."""
    path = Path(path)
    job = _Job(path)
    rows = _matrix_rows(_matrix_blocks(job.lines("matrix/matrix") or []))
    layers = _matrix_layers(rows)
    if not layers:
        raise CadError(f"{path}: its matrix/matrix lists no component layer (TYPE=COMPONENT): the job carries no "
                       "placement; export it again with the assembly (component) layers")
    sides = _sides(layers)
    masks = mask_layers(rows)
    info = job.lines("misc/info") or []
    job_units = _units(info, None)
    notes: list[str] = []

    def scale_of(lines: list[str], name: str) -> float:
        found = _units(lines, job_units)
        if found is None:
            notes.append(f"{name} has no UNITS line, nor does misc/info: read in inches, ODB++'s default")
            return UNITS["INCH"]
        return found

    steps = set(job.steps())
    direct = {s for s in steps if any(job.has(f"steps/{s}/layers/{name}/components") for _r, name in layers)}
    headers = {}
    for s in sorted(steps):
        lines = job.lines(f"steps/{s}/stephdr")
        if lines is not None:
            headers[s] = _step_header(lines, scale_of(lines, f"steps/{s}/stephdr"), f"{path}: steps/{s}/stephdr")
    known: dict[str, list[Placement]] = {}  # each step's copies, worked out once for every step that repeats it
    boards = {s: boards_in(s, headers, direct, steps, str(path), known=known) for s in sorted(steps)}
    placing = sorted(s for s in steps if s in direct or boards[s])
    asked = step if step is not None else job.step_asked
    if asked is not None:
        if asked.lower() not in placing:
            raise CadError(f"{path}: step {asked} places no parts (steps that do: {', '.join(placing) or 'none'})")
        placing = [asked.lower()]
    if not placing:
        raise CadError(f"{path}: no step of the job has a components file in its component layers "
                       f"({', '.join(n for _r, n in layers)}): no parts to place")
    if len(placing) > 1:
        named = ", ".join(_step_summary(s, boards[s]) for s in placing)
        raise CadError(f"{path}: parts are placed in {len(placing)} steps ({named}); say which to inspect: "
                       f"`board import --step {placing[0]}`, or the step's own folder JOB/steps/{placing[0]} of the "
                       "unpacked job")
    chosen = placing[0]
    found: dict[str, list[PlacedPart]] = {}

    def parts_of(s: str) -> list[PlacedPart]:
        if s not in found:
            parts = _step_parts(job, path, s, layers, sides, scale_of, notes)
            marks = any(p.fiducial for p in parts)  # the mask layers are read for the fiducials' rings alone
            documents = document_layers(rows)
            # an archive is read again once, for the drawing layers and (where needed) the mask layers together
            job.fetch({n for layer in documents + (list(masks) if marks else []) for n in _features(s, layer)})
            parts = _drawn(job, path, s, documents, parts, scale_of, notes)
            if marks:
                parts = with_openings(parts, _mask_openings(job, path, s, masks, scale_of))
            found[s] = parts
        return found[s]

    parts = list(parts_of(chosen)) if chosen in direct else []
    copies = numbered(boards[chosen], headers)
    for number, where in copies:
        parts.extend(placed_copy(p, where, number) for p in parts_of(where.step))
    profile = job.lines(f"steps/{chosen}/profile")
    outline = _edge(profile, scale_of(profile, "profile"), f"{path}: steps/{chosen}/profile") if profile else None
    kind = f"ODB++ (panel {chosen}, {_boards_text(boards[chosen])})" if copies else f"ODB++ (step {chosen})"
    design = BoardDesign(str(path), kind, parts, y_up=True, outline=outline, notes=notes, panel_boards=len(copies))
    if copies:
        design.notes.append(f"panel {chosen}: its {len(copies)} boards are numbered from the top left, row by row, "
                            "and a copied part's reference is its board's number and its own (R1 of board 2: 2-R1); "
                            "each board gets its own result in the factory messages")
    if outline is None:
        design.notes.append(f"no outline in steps/{chosen}/profile: the board's extent is taken from its parts")
    return design


def _step_summary(step: str, boards: list[Placement]) -> str:
    """`pcb`, or `panel (4 boards of pcb)` for a step that places boards by step-and-repeat."""
    return f"{step} ({_boards_text(boards)})" if boards else step


def _boards_text(boards: list[Placement]) -> str:
    return f"{len(boards)} boards of {' and '.join(sorted({b.step for b in boards}))}"


def _features(step: str, layer: str) -> tuple[str, str]:
    """A layer's features file in a step, as the job names it and its Unix-compressed form."""
    name = f"steps/{step}/layers/{layer}/features"
    return name, name + ".z"


def _mask_openings(job: _Job, path: Path, step: str, masks: dict[str, str],
                   scale_of: Callable[[list[str], str], float]) -> dict[str, list[Opening]]:
    """Each side's mask openings in one step (its fiducials' bare rings), the layers' files fetched already."""
    out: dict[str, list[Opening]] = {}
    for layer, side in masks.items():
        name = _features(step, layer)[0]
        lines = job.lines(name)
        if lines is not None:
            out.setdefault(side, []).extend(openings(lines, scale_of(lines, f"layers/{layer}/features"),
                                                     f"{path}: {name}"))
    return out


def _drawn(job: _Job, path: Path, step: str, documents: list[str], parts: list[PlacedPart],
           scale_of: Callable[[list[str], str], float], notes: list[str]) -> list[PlacedPart]:
    """The step's parts wearing the bodies its assembly drawing layers draw (odbpp_drawings.py), and the notes; the
    layers' files fetched already."""
    layers = {}
    for layer in documents:
        name = _features(step, layer)[0]
        lines = job.lines(name)
        try:
            drawn = drawings(lines, scale_of(lines, f"layers/{layer}/features"), f"{path}: {name}") if lines else []
        except CadError as exc:  # a drawing layer only refines the bodies: the parts stand without it
            notes.append(f"{exc}: the layer is not read for the parts' bodies")
            continue
        if drawn:
            layers[layer] = drawn
    chosen = {side: (f"document layer {layer}", boxes) for side, (layer, boxes) in body_layers(parts, layers).items()}
    parts, told = dressed(parts, chosen, f"steps/{step}")
    notes.extend(told)
    return parts


def _step_parts(job: _Job, path: Path, step: str, layers: list[tuple[int, str]], sides: dict[str, str],
                scale_of: Callable[[list[str], str], float], notes: list[str]) -> list[PlacedPart]:
    """The parts one step places itself, in its own frame, with their footprints from its eda/data."""
    data = job.lines(f"steps/{step}/eda/data")
    packages = _packages(data, scale_of(data, "eda/data"), f"{path}: steps/{step}/eda/data") if data else []
    if not data:
        notes.append(f"no steps/{step}/eda/data: the parts come without footprints (the library's bodies are used)")
    parts: list[PlacedPart] = []
    pins: dict[str, list[tuple[tuple[float, float], tuple[float, float]]]] = {}  # ref -> (package, board) places
    for _row, layer in layers:
        lines = job.lines(f"steps/{step}/layers/{layer}/components")
        if lines is None:
            continue
        where = f"{path}: steps/{step}/layers/{layer}/components"
        scale = scale_of(lines, f"layers/{layer}/components")
        for c in _components(lines, where):
            if data and not 0 <= c.pkg < len(packages):
                raise CadError(f"{where}:{c.line}: {c.ref} names package {c.pkg}, but eda/data holds "
                               f"{len(packages)} (0-{len(packages) - 1})")
            pkg = packages[c.pkg] if data else _Package(c.part or f"package-{c.pkg}")
            fiducial = "fiducial" in pkg.name.lower() or c.ref.upper().startswith("FID")
            body = pkg.body[0] if pkg.body else None
            excluded = f"not placed (its {NOT_PLACED} attribute)" if NOT_PLACED in c.attributes else None
            if excluded is None and data and not pkg.pads and body is None:
                excluded = "a component whose package has no pins or outline in the file"
            if excluded is None and pkg.holes and not pkg.pads:
                excluded = BARE_HOLES
            side = "bottom" if c.mirrored or sides[layer] == "bottom" else "top"
            pins[c.ref] = [(pkg.pins[i], (x * scale, y * scale)) for i, x, y in c.toeprints if 0 <= i < len(pkg.pins)]
            parts.append(PlacedPart(c.ref, c.value or c.part, pkg.name, c.x * scale, c.y * scale, (-c.rot) % 360.0,
                                    side, tuple(pkg.pads), body, mount=mounted(pkg.through_hole), fiducial=fiducial,
                                    excluded=excluded))
    parts, told = bottom_footprints(parts, pins, DRAWN_MIRRORED, UNTOLD, f"steps/{step}")
    notes.extend(told)
    return parts
