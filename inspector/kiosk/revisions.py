"""A new revision of the line's board over the kiosk's API, and the changeover that puts a rule file in force.

- `POST /rules/revise`: the revision as `board import` wrote it, with a photo of a board built to it (sent, or the
  newest board the line inspected); the kiosk revises its rule file in force with the zoo it serves
  (app/line_revision.py) and answers the changes place by place. Nothing is served: the revised set is a recipe
  in the rule folder, recorded in the trail as written (`rules.revise`).
- `POST /rules/changeover`: a recipe of the rule folder (or a rule file's name there) in force from the next board
  on, as a PLC's changeover is, recorded under the person's name, and kept for the kiosk's next start.
"""
from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from ..access.audit import Change
from ..app.recipes import RecipeBook
from ..app.rules_watch import RulesWatcher
from ..app.service import LineService
from ..routing.rules import RuleSet
from .control import Control
from .http import Call, HttpError, json_object

SHAPE = ('JSON {"name": "rev-b", "revision": RULE TEXT, "geometry": {...}, "photo": {"image_base64": ..., "name": '
         '"rev.jpg"} or "line", '
         '"board": 0, "looks_alike": "R1", "replace": false}: the revision as `board import` wrote it (its rule text '
         'and its .board.json)')


class Revisions:
    def __init__(self, service: LineService, rules: RulesWatcher, book: RecipeBook, control: Control,
                 say: Callable[[str], None] = lambda _m: None) -> None:
        self.service, self.rules, self.book, self.control, self.say = service, rules, book, control, say

    def revise(self, call: Call) -> dict[str, Any]:
        # revising needs teaching's code (torch and torchvision's): imported when asked, not with the kiosk
        from ..app.line_revision import LineRevision, revise_line_board, same_recipe

        doc = json_object(call.body, SHAPE)
        if self.rules.path is None:
            raise HttpError(409, "the running rule set was not read from a file: there is no taught board to revise")
        text, geometry = doc.get("revision"), doc.get("geometry")
        if not isinstance(text, str) or not isinstance(geometry, dict):
            raise ValueError(f"send {SHAPE}")
        board = doc.get("board", 0)
        if not isinstance(board, int) or isinstance(board, bool) or board < 0:
            raise ValueError(f'"board" is which board of the photo, 0 or more (as `board check` numbers them), '
                             f"got {board!r}")
        looks_alike = doc.get("looks_alike") or ""
        if not isinstance(looks_alike, str):
            raise ValueError('"looks_alike" names parts as the command line does: "R3,R7" or "R3-R7"')
        photo, photo_name = self._photo(doc.get("photo"))
        asked = LineRevision(str(doc.get("name") or ""), text, geometry, photo, photo_name, board, looks_alike,
                             bool(doc.get("replace")))
        self.control.ready()
        running = self.service.line.rules
        try:
            revised = revise_line_board(Path(self.rules.path), Path(self.service.line.zoo.root), asked)
        except FileExistsError as exc:
            raise HttpError(409, str(exc)) from None
        except OSError as exc:  # a rule folder the kiosk may not write (a read-only install): named as the folder
            where = Path(self.rules.path).parent
            raise HttpError(507, f"the kiosk cannot write the revision into its rule folder {where} "
                                 f"({exc.strerror or exc}); nothing was served") from None
        rules = revised.rules
        after = {"file": revised.out.name, "recipe": rules.recipe, "version": rules.version,
                 "changes": len(revised.revision.changes), "windows": revised.windows}
        recorded = self.control.log.record(call.who, Change("rules.revise", rules.recipe,
                                                    {"recipe": running.recipe, "version": running.version}, after,
                                                    call.reason))
        self.say(f"rules revised over the API by {call.who.name}: {revised.out.name} ({len(revised.revision.changes)} "
                 "change(s)), not served")
        from ..board.revision import format_revision

        told = {k: v for k, v in revised.to_json().items() if k not in ("out", "golden")}  # paths: the kiosk's own
        return {**told, "file": revised.out.name, "recipe": rules.recipe, "version": rules.version,
                "table": format_revision(revised.revision), "notes": revised.notes(),
                "same_recipe": same_recipe(rules, revised.out), **recorded}

    def changeover(self, call: Call) -> dict[str, Any]:
        doc = json_object(call.body, 'JSON {"recipe": NAME}: a recipe of the rule folder, or a rule file\'s name')
        name = doc.get("recipe")
        if not isinstance(name, str) or not name.strip():
            raise ValueError('name the recipe: {"recipe": NAME} (a recipe of the rule folder, or a rule file\'s name)')
        if not self.book.folders:
            raise HttpError(409, "the running rule set was not read from a file: there is no rule folder")
        done: list[Path] = []

        def change() -> RuleSet:
            path, rules = self.book.changeover(name)
            done.append(path)
            return rules

        try:
            answer = self.control.rules_change(call, "rules.changeover", change, f"changed over to {name.strip()}")
        except TimeoutError as exc:  # another board's: the boards inside did not finish
            raise HttpError(409, str(exc)) from None
        return {**answer, "file": done[0].name}

    def _photo(self, sent: object) -> tuple[np.ndarray | None, str]:
        """(the photo the revision's windows come from: sent, the newest board the line inspected, or none; what it
        is)."""
        if sent is None:
            return None, ""
        if sent == "line":
            last = self.service.last_board
            if last is None:
                raise HttpError(409, "the line has inspected no board yet: put a board of the revision through it, "
                                     "or send a photo")
            image, record = last
            return image, f"line-{record.board_serial or record.inspection_id[:8]}"
        data = sent.get("image_base64") if isinstance(sent, dict) else None
        if not isinstance(data, str):
            raise ValueError('"photo" is {"image_base64": PNG or JPEG bytes in base64}, "line" (the newest board '
                             "the line inspected), or left out")
        try:
            image = cv2.imdecode(np.frombuffer(base64.b64decode(data, validate=True), np.uint8), cv2.IMREAD_COLOR)
        except (binascii.Error, ValueError):
            image = None
        if image is None:
            raise ValueError("the photo sent is not a PNG or JPEG image in base64")
        name = sent.get("name")
        return image, name if isinstance(name, str) and name else "photo"
