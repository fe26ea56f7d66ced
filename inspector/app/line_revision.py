"""A new revision of the board a line serves, revised where the line runs (a kiosk, asked over its API).

The engineer imports the revision on their own machine (`board import`: its CAD, BOM and options) and sends what the
import wrote, its rule text and its board geometry, with a photo of a board built to the revision, or asks for the
newest board the line inspected (a board of the revision put through the line). The kiosk revises the rule file in
force with the zoo it serves (app/board_revise.py: nothing is trained), and writes, in the folder of the rule file
in force, where recipes are found:
- `NAME.taught.yaml`, its golden board and registration files beside it: a recipe a changeover can put in force;
- `revisions/NAME/`: the import as sent and the photo the windows came from (under its own name, or `line-SERIAL`
  for the board the line inspected), which the revised set names.
Nothing is served: the changeover is its own step (recipes.py), after the engineer has read the changes.
"""
from __future__ import annotations

import base64
import shutil
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ..board.geometry import geometry_of, geometry_path, read_geometry, write_geometry
from ..routing.rules import RuleSet, load_rules, parse_rules
from .board_photos import read_photo
from .board_revise import Revised, RevisePlan, revise_board
from .file_names import file_name, safe_name

REVISIONS = "revisions"  # beside the rule file in force: each revision's import and photo, as sent


@dataclass
class LineRevision:
    """What an engineer sends to revise the line's board."""
    name: str  # the revised set's file name (NAME.taught.yaml), a recipe a changeover names
    text: str  # the revision's rule set as `board import` wrote it
    geometry: dict  # its board geometry (`RULES.board.json`)
    photo: np.ndarray | None = None  # a board built to the revision, as the line's camera sees it
    photo_name: str = "photo"  # what it is (its file's name, the board the line inspected): the revised set names it
    board: int = 0  # which board of the photo
    looks_alike: str = ""
    replace: bool = False  # an unserved revised set of this name may be written over


def revision_name(text: str) -> str:
    """A revised set's name checked: a file name of the rule folder (NAME.taught.yaml: the suffix may be given)."""
    name = text.strip()
    return file_name(name[:-len(".taught.yaml")] if name.endswith(".taught.yaml") else name, "a revision's name")


def revise_line_board(rule_file: Path, zoo: Path, asked: LineRevision) -> Revised:
    """Revise the line's board (`rule_file`, the taught set in force, served by `zoo`) to `asked`; FileExistsError
    where the name is taken and `replace` was not asked, ValueError for what `board revise` refuses (nothing is
    written then)."""
    name = revision_name(asked.name)
    folder = rule_file.parent
    out = folder / f"{name}.taught.yaml"
    if out.resolve() == rule_file.resolve():
        raise FileExistsError(f"{out.name} is the rule file in force: name the revision otherwise")
    if out.exists() and not asked.replace:
        raise FileExistsError(f"{out.name} is already in {folder}: name the revision otherwise, or replace it")
    parse_rules(asked.text, f"the revision {name}")  # refused before anything is written
    geometry = geometry_of(asked.geometry, f"the revision {name}'s board geometry")
    kept = folder / REVISIONS / name
    before = folder / REVISIONS / f".{name}.before"  # a revision of this name replaced: back where refused
    shutil.rmtree(before, ignore_errors=True)
    if kept.exists():
        kept.rename(before)
    try:
        kept.mkdir(parents=True)
        imported = kept / f"{name}.yaml"
        imported.write_text(asked.text, encoding="utf-8")
        write_geometry(geometry, imported)
        photo = None
        if asked.photo is not None:
            photo = kept / f"{_stem(asked.photo_name)}.png"
            if not cv2.imwrite(str(photo), asked.photo):
                raise ValueError(f"{photo}: the photo cannot be written")
        revised = revise_board(RevisePlan(rule_file, imported, out, photo, asked.board, None, asked.looks_alike, zoo))
    except BaseException:
        shutil.rmtree(kept, ignore_errors=True)  # refused: nothing of it stays, and a replaced one is back
        if before.exists():
            before.rename(kept)
        raise
    shutil.rmtree(before, ignore_errors=True)
    return revised


def _stem(name: str) -> str:
    """A photo's name as a file name of the revision's folder (its stem)."""
    return safe_name(Path(name.replace("\\", "/")).stem, "photo")


def same_recipe(revised: RuleSet, path: Path) -> list[str]:
    """The other rule files beside `path` (the revised set's) whose recipe is the revised set's: a PLC naming that
    recipe gets the first of them, so the revision is put in force by its file name."""
    others = []
    for other in sorted(path.parent.glob("*.yaml")):
        if other.resolve() == path.resolve():
            continue
        try:
            if load_rules(other).recipe == revised.recipe:
                others.append(other.name)
        except ValueError:
            continue
    return others


def revision_request(revision: Path, name: str | None = None, photo: Path | str | None = None, board: int = 0,
                     looks_alike: str = "", replace: bool = False, correction: Path | None = None) -> dict:
    """The body of a kiosk's `POST /rules/revise` from the revision's import on this machine (`revision`, the rule
    file `board import` wrote, its geometry beside it) and a photo of a board built to it, or "line" (the newest
    board the kiosk's line inspected). A photo of the line's camera goes through its `correction` here first."""
    geometry = read_geometry(revision)
    if geometry is None:
        raise ValueError(f"{revision}: no board geometry beside it ({geometry_path(revision).name}): import the "
                         "revision with `inspector board import`, which writes it")
    text = revision.read_text(encoding="utf-8")
    parse_rules(text, str(revision))
    body: dict = {"name": revision_name(name or revision.stem), "revision": text, "geometry": geometry.to_json(),
                  "board": board, "looks_alike": looks_alike, "replace": replace}
    if photo == "line":
        body["photo"] = "line"
    elif photo is not None:
        body["photo"] = {"image_base64": base64.b64encode(_image_bytes(Path(photo), correction)).decode("ascii"),
                         "name": Path(photo).name}
    return body


def _image_bytes(path: Path, correction: Path | None) -> bytes:
    """A photo as PNG or JPEG bytes: the file's own where it is one and nothing corrects it, else encoded as PNG."""
    if correction is None and path.suffix.lower() in (".png", ".jpg", ".jpeg"):
        data = path.read_bytes()
        if cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR) is None:
            raise ValueError(f"{path} is not an image OpenCV can read")  # said here rather than by the kiosk
        return data
    image = read_photo(path)
    if correction is not None:
        from ..camera.correction import CameraCorrection

        image = CameraCorrection.load(correction).apply(image)
    ok, png = cv2.imencode(".png", image)
    if not ok:
        raise ValueError(f"{path}: cannot be encoded as PNG")
    return png.tobytes()
