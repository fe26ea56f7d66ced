"""A taught board as one file that travels to the line's box: its rule set, the files the set names, and the zoo
that serves it.

`board teach` makes a new board's experts wherever the engineer teaches (their own machine, the dashboard's box);
the line's kiosk serves one zoo, so a new board reaches it whole. `pack_board` writes a tar of
- `package.json`: the format, the board's name, its rule file, recipe and version, and every member's sha256;
- `board/`: the rule file and the files it names (its golden board, registration geometry and points, approved
  windows) at their places beside it, and its `.board.json` where there is one (a later revision reads it);
- `zoo/`: the zoo's manifest and every file under it but `runtime/` (compiled forms the kiosk makes again from the
  weights) and dot-files (its lock, scratch files).

`install_board` (the kiosk's side, kiosk/boards.py) reads such a tar from a stream into `NAME/` of a boards folder:
every member checked against package.json (no more, no fewer, no path outside its folder), each trained expert's
weights against the hash its manifest records, the rule set against the zoo as a line would check it. A package
refused leaves nothing; a board of that name is replaced only when asked, and never the one the line serves.
"""
from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from ..board.geometry import geometry_path
from ..experts.backends.export import file_sha256
from ..experts.zoo import MANIFEST, Zoo
from ..routing.rules import RuleSet, load_rules
from .file_names import file_name, safe_name
from .line import check_rule_set, check_served

FORMAT = 1
PACKAGE = "package.json"
RUNTIME = "runtime"  # <zoo>/runtime/: compiled forms of the experts, made again where they are served
CHUNK = 1 << 20


def board_name(text: str) -> str:
    """A board's name checked: a folder name of the kiosk's boards."""
    return file_name(text, "a board's name")


def default_name(rule_file: Path) -> str:
    """The board's name from its rule file: `b.taught.yaml` -> `b`."""
    return safe_name(rule_file.name.split(".")[0], "board")


def _members(rule_file: Path, rules: RuleSet, zoo_root: Path) -> Iterator[tuple[str, Path]]:
    """(name in the package, file here) for everything a board travels with; ValueError for a named file outside
    the rule file's folder (its place beside the rule file could not be kept)."""
    folder = rule_file.parent.resolve()
    yield f"board/{rule_file.name}", rule_file
    beside = [Path(f) for f in rules.named_files()]
    geometry = geometry_path(rule_file)
    if geometry.is_file():
        beside.append(geometry)
    for path in dict.fromkeys(p.resolve() for p in beside):
        if not path.is_relative_to(folder):
            raise ValueError(f"{rule_file} names {path}, outside its folder {folder}: copy it beside the rule file "
                             "and name it there, then pack again")
        if not path.is_file():
            raise ValueError(f"{rule_file} names {path}, which is not there: the board cannot be packed without it")
        yield f"board/{path.relative_to(folder).as_posix()}", path
    for path in sorted(zoo_root.rglob("*")):
        rel = path.relative_to(zoo_root)
        if path.is_file() and rel.parts[0] != RUNTIME and not any(p.startswith(".") for p in rel.parts):
            yield f"zoo/{rel.as_posix()}", path


def pack_board(rule_file: Path, zoo_root: Path, out: BinaryIO, name: str | None = None) -> dict[str, Any]:
    """Write the board of `rule_file` served by `zoo_root` as a package to `out`; its package.json. ValueError
    naming what is missing, or a rule set its zoo cannot serve (checked here, before anything travels)."""
    rule_file, zoo_root = Path(rule_file), Path(zoo_root)
    rules = load_rules(rule_file)
    if not (zoo_root / MANIFEST).is_file():
        raise ValueError(f"no zoo at {zoo_root} (no {MANIFEST}): name the zoo that serves {rule_file.name} (its "
                         "teaching's zoo folder)")
    check_served(rules, Zoo.load(zoo_root))
    members = list(_members(rule_file, rules, zoo_root))
    files = {arc: file_sha256(path) for arc, path in members}
    doc = {"format": FORMAT, "name": board_name(name or default_name(rule_file)), "rules": f"board/{rule_file.name}",
           "recipe": rules.recipe, "version": rules.version,
           "packed": datetime.now(timezone.utc).isoformat(timespec="seconds"), "files": files}
    with tarfile.open(fileobj=out, mode="w|") as tar:
        head = json.dumps(doc, indent=1).encode("utf-8")
        info = tarfile.TarInfo(PACKAGE)
        info.size = len(head)
        tar.addfile(info, io.BytesIO(head))
        for arc, path in members:
            tar.add(path, arcname=arc, recursive=False)
    return doc


def installed_line(done: dict[str, Any], where: str) -> str:
    """What an install's answer (Installed.to_json, with a line's `unprofiled` or `not_prepared`) says, in a line;
    `where`: the kiosk, this box."""
    said = (f"board {done['board']} ({done['recipe']} {done['version']}, {done['experts']} expert(s)) installed on "
            f"{where}, not served")
    if done.get("unprofiled"):
        said += (f"; its first changeover profiles {', '.join(done['unprofiled'])}, which the box has not measured: "
                 "Profile now measures them at a quiet moment")
    if done.get("not_prepared"):
        said += f"; not prepared for its changeover ({done['not_prepared']}): its changeover prepares it"
    return said


@dataclass(frozen=True)
class Installed:
    """A board installed in the kiosk's boards folder."""
    name: str
    folder: Path
    rules: Path  # its rule file
    zoo: Path
    recipe: str
    version: str
    experts: int
    bytes: int
    replaced: bool

    def to_json(self) -> dict[str, Any]:
        return {"board": self.name, "recipe": self.recipe, "version": self.version, "experts": self.experts,
                "bytes": self.bytes, "replaced": self.replaced, "rules": self.rules.name}


class NoRoom(Exception):
    """The package would leave the disk under the space the line keeps free for its results: nothing was written."""


def install_board(stream: BinaryIO, length: int, boards: Path, replace: bool = False,
                  serving: Path | None = None, keep_free: int = 0) -> Installed:
    """Read a package of `length` bytes from `stream` into `boards/NAME/`. ValueError naming what is wrong with the
    package (nothing is left of it), FileExistsError where NAME is there and `replace` was not asked, or NAME is
    the board the line serves (`serving`, its folder); NoRoom where the package and its unpacked files would leave
    less than `keep_free` bytes free (the line's results and crops need them more)."""
    boards.mkdir(parents=True, exist_ok=True)
    _sweep(boards)
    free = shutil.disk_usage(boards).free
    if free - 2 * length < keep_free:
        raise NoRoom(f"installing this package ({length / 2**20:.0f} MiB, twice that while it is unpacked) would "
                     f"leave {max(free - 2 * length, 0) / 2**20:.0f} MiB free under {boards}, below the "
                     f"{keep_free / 2**20:.0f} MiB the line keeps for its results and crops: free space there "
                     "(inspector db prune, old boards) and send it again; nothing was written")
    upload = boards / f".upload-{uuid.uuid4().hex}.tar"
    partial: Path | None = None
    try:
        _receive(stream, length, upload)
        try:
            tar = tarfile.open(upload, mode="r:")
        except tarfile.TarError as exc:
            raise ValueError(f"the body is not a board package (a tar written by `inspector board install`): {exc}") \
                from None
        try:
            with tar:
                doc = _package_doc(tar)
                name = board_name(str(doc.get("name", "")))
                target = boards / name
                if serving is not None and target.resolve() == serving.resolve():
                    raise FileExistsError(f"board {name} is the one the line serves: name the new one otherwise")
                if target.exists() and not replace:
                    raise FileExistsError(f"a board {name} is installed already: name the new one otherwise, or "
                                          "replace it")
                partial = boards / f".{name}.{uuid.uuid4().hex[:8]}.partial"
                _extract(tar, doc["files"], partial)
        except tarfile.TarError as exc:
            raise ValueError(f"the package is damaged ({exc}): send it again") from None
        installed = {**doc, "installed": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        (partial / PACKAGE).write_text(json.dumps(installed, indent=1), encoding="utf-8")  # what it is, for the list
        rules_file, zoo = partial / doc["rules"], partial / "zoo"
        rules, experts = _check(rules_file, zoo, doc["files"])
        replaced = target.exists()
        if replaced:
            old = boards / f".{name}.{uuid.uuid4().hex[:8]}.old"
            target.rename(old)
            partial.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            partial.rename(target)
        partial = None
        return Installed(name, target, target / doc["rules"], target / "zoo", rules.recipe, rules.version, experts,
                         length, replaced)
    finally:
        upload.unlink(missing_ok=True)
        if partial is not None:
            shutil.rmtree(partial, ignore_errors=True)


def _sweep(boards: Path, older_s: float = 3600.0) -> None:
    """What an install cut short by a crash or a power cut left (its upload, its unpacked folder, a replaced board
    not yet removed), once it is older than any install still running could be."""
    now = time.time()
    for left in boards.glob(".*"):
        if now - left.stat().st_mtime > older_s:
            if left.is_dir():
                shutil.rmtree(left, ignore_errors=True)
            else:
                left.unlink(missing_ok=True)


def _receive(stream: BinaryIO, length: int, upload: Path) -> None:
    got = 0
    with open(upload, "wb") as f:
        while got < length:
            chunk = stream.read(min(CHUNK, length - got))
            if not chunk:
                raise ValueError(f"the package ended after {got} of its {length} bytes: send it again")
            f.write(chunk)
            got += len(chunk)


def _package_doc(tar: tarfile.TarFile) -> dict[str, Any]:
    try:
        first = tar.next()
    except tarfile.TarError as exc:
        raise ValueError(f"the body is not a board package (a tar written by `inspector board install`): {exc}") \
            from None
    if first is None or first.name != PACKAGE or not first.isfile():
        raise ValueError(f"a board package begins with its {PACKAGE}: this one does not (pack it with "
                         "`inspector board install`)")
    try:
        doc = json.loads(tar.extractfile(first).read())  # type: ignore[union-attr]
    except ValueError as exc:
        raise ValueError(f"the package's {PACKAGE} is not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("files"), dict) \
            or not isinstance(doc.get("rules"), str) or doc["rules"] not in doc["files"]:
        raise ValueError(f"the package's {PACKAGE} is not of format {FORMAT} (a name, its rule file among its files, "
                         "each file's sha256): pack it again with this version's `inspector board install`")
    return doc


def _extract(tar: tarfile.TarFile, files: dict[str, str], into: Path) -> None:
    """Every member a regular file of `files`, under board/ or zoo/, written with its hash checked."""
    seen: set[str] = set()
    for i, member in enumerate(tar):
        name = member.name
        if i == 0:
            continue  # package.json, read already
        parts = PurePosixPath(name).parts
        if not member.isfile() or name not in files or name in seen or not parts or parts[0] not in ("board", "zoo") \
                or ".." in parts or PurePosixPath(name).is_absolute():
            why = "not a file" if not member.isfile() else "not in its package.json" if name not in files else \
                "there twice" if name in seen else "outside board/ and zoo/"
            raise ValueError(f"the package's member {name!r} is {why}: pack the board again")
        seen.add(name)
        path = into.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        source = tar.extractfile(member)
        assert source is not None
        with open(path, "wb") as f:
            while chunk := source.read(CHUNK):
                digest.update(chunk)
                f.write(chunk)
        if digest.hexdigest() != files[name]:
            raise ValueError(f"{name} of the package is not the file packed (its sha256 differs): the package was "
                             "damaged on its way; send it again")
    missing = sorted(set(files) - seen)
    if missing:
        raise ValueError(f"the package lacks {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''} that its "
                         f"{PACKAGE} lists: send it again")


def _check(rules_file: Path, zoo_root: Path, files: dict[str, str]) -> tuple[RuleSet, int]:
    """The rule set against its zoo, as a line would check it, and every trained expert's weights against the hash
    its manifest records; the rule set and the number of experts."""
    zoo = Zoo.load(zoo_root)
    for entry in zoo.entries.values():
        got = files.get(f"zoo/{entry.file}")
        if got is None:
            raise ValueError(f"the package's zoo has no file for expert {entry.name} ({entry.file})")
        if entry.weights_sha256 is not None and got != entry.weights_sha256:
            raise ValueError(f"expert {entry.name}'s weights in the package ({got[:12]}) are not those its manifest "
                             f"records ({entry.weights_sha256[:12]}): the zoo was changed by hand; teach it again")
    rules = load_rules(rules_file)
    check_rule_set(rules, zoo)
    return rules, len(zoo.entries)
