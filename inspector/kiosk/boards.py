"""New boards over the kiosk's API: a taught board installed whole (its rule set and its zoo), and chosen for the
kiosk's next start.

- `GET /boards`: the boards installed here, the one chosen for the next start and the one served.
- `POST /boards/install`: a board package (app/board_package.py, the tar `inspector board install` writes) streamed
  into `boards/NAME/` of the data directory, every file checked; `?replace=1` replaces an installed board of that
  name (never the one served). Nothing is served: a new board brings its own zoo, which a line takes at its start.
- `POST /boards/serve`: `{"board": NAME}` changes the line over to that board and its zoo now, at a board boundary,
  without a restart (app/board_switch.py), and keeps it for the next start (`{"board": null}`: the configured board).
- `POST /boards/profile`: `{"board": NAME}` measures the installed board's architectures this box never profiled now,
  the line held empty meanwhile, so its changeover (a PLC's, at a moment it did not choose) measures nothing.
- `POST /boards/next`: `{"board": NAME}` starts the kiosk on that board from its next start (`{"board": null}`: on
  the configured board again), for a plant that changes over by restarting the kiosk.
- `POST /boards/remove`: `{"board": NAME}`, an installed board neither served nor chosen, deleted.
Each change is recorded in the audit trail under the person's name (`board.install`, `board.serve`,
`board.profile`, `board.next`, `board.remove`).
"""
from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

from ..access.audit import Change
from ..app.board_package import NoRoom, install_board
from ..app.board_switch import BoardSwitch, board_said, profiled_line
from ..app.installed_boards import boards_dir, boards_document, choose, installed, next_board, remove, served_folder
from ..app.service import LineService
from .control import Control
from .http import Call, HttpError, json_object

RESTART = "sudo systemctl restart inspector-kiosk"


class Boards:
    def __init__(self, service: LineService, control: Control, data_dir: Path, configured_rules: str | None,
                 configured_zoo: str | None, say: Any, switch: BoardSwitch | None = None) -> None:
        self.service, self.control, self.data_dir, self.say = service, control, Path(data_dir), say
        self.configured_rules, self.configured_zoo = configured_rules, configured_zoo
        self.switch = switch  # None: a kiosk that cannot open another board's zoo (started without a models folder)

    def serving(self) -> Path | None:
        """The installed board's folder whose zoo the line serves (None: a zoo of its own configuration)."""
        return served_folder(self.data_dir, self.service.line.zoo.root)

    def document(self) -> dict[str, Any]:
        return boards_document(self.data_dir, self.service.line.zoo.root, self.configured_rules)

    def install(self, call: Call) -> dict[str, Any]:
        if call.stream is None or call.length == 0:
            raise ValueError("send a board package as the body (`inspector board install --kiosk` packs one)")
        replace = urllib.parse.parse_qs(call.query).get("replace", ["0"])[-1] in ("1", "true", "yes")
        self.control.ready()
        floor = int(self.service.crops.min_free_mb * 2**20)  # the free space the line keeps for its results
        try:
            done = install_board(call.stream, call.length, boards_dir(self.data_dir), replace, self.serving(), floor)
        except FileExistsError as exc:
            raise HttpError(409, str(exc)) from None
        except NoRoom as exc:
            raise HttpError(507, str(exc)) from None
        answer = done.to_json()
        recorded = self.control.log.record(call.who, Change("board.install", done.name, None, answer, call.reason))
        self.say(f"board {done.name} installed over the API by {call.who.name}: recipe {done.recipe} "
                 f"{done.version}, {done.experts} expert(s), not served")
        # a recipe two boards answer to: a PLC naming it is refused as ambiguous (but for the served board's own)
        alike = [b["board"] for b in installed(self.data_dir) if b.get("recipe") == done.recipe and
                 b["board"] != done.name]
        return {**answer, **self._prepared(done.name), "same_recipe": alike, "next": next_board(self.data_dir),
                **recorded}

    def _prepared(self, name: str) -> dict[str, Any]:
        """The installed board made ready for its changeover while the line runs (BoardSwitch.prepare): what its first
        changeover still profiles, or why it was not prepared (its changeover makes it then)."""
        if self.switch is None:
            return {}
        try:
            return {"unprofiled": self.switch.prepare(name)}
        except Exception as exc:  # noqa: BLE001 - installed all the same: its changeover prepares it, or says why not
            self.say(f"warning: board {name} installed but not prepared for its changeover: {exc}")
            return {"not_prepared": f"{type(exc).__name__}: {exc}"}

    def remove(self, call: Call) -> dict[str, Any]:
        doc = json_object(call.body, 'JSON {"board": NAME}: an installed board neither served nor chosen')
        if not isinstance(doc.get("board"), str):
            raise ValueError('"board" names an installed board (GET /boards)')
        self.control.ready()
        served = self.serving()
        try:
            gone = remove(self.data_dir, doc["board"], served.name if served is not None else None)
        except FileExistsError as exc:
            raise HttpError(409, str(exc)) from None
        recorded = self.control.log.record(call.who, Change("board.remove", gone.name, {"board": gone.name}, None,
                                                            call.reason))
        self.say(f"board {gone.name} removed from this kiosk over the API by {call.who.name}")
        return {"removed": gone.name, **recorded}

    def serve(self, call: Call) -> dict[str, Any]:
        doc, name = self._board_named(call)
        timeout, switch = _timeout(doc), self._live()
        self.control.ready()
        before = switch.serving()
        try:
            done = switch.serve(name, timeout=timeout)
        except TimeoutError as exc:
            raise HttpError(409, str(exc)) from None
        answer = done.to_json()
        recorded = self.control.log.record(call.who, Change("board.serve", done.board.name or "configured",
                                                            {"board": before}, answer, call.reason))
        self.say(f"{done.board.said} served over the API by {call.who.name}")
        return {**answer, **recorded}

    def profile(self, call: Call) -> dict[str, Any]:
        doc, name = self._board_named(call)
        if name is None:
            raise ValueError('"board" names an installed board (GET /boards): the configured board was profiled at '
                             "the kiosk's start")
        timeout, switch = _timeout(doc), self._live()
        self.control.ready()
        try:
            measured, held = switch.profile(name, timeout=timeout)
        except TimeoutError as exc:
            raise HttpError(409, str(exc)) from None
        answer = {"board": name, "profiled": measured, "held_s": round(held, 2)}
        if not measured:  # nothing measured, the line not held: nothing to record
            return answer
        recorded = self.control.log.record(call.who, Change("board.profile", name, None, answer, call.reason))
        self.say(f"{profiled_line(answer, 'this kiosk')} (asked over the API by {call.who.name})")
        return {**answer, **recorded}

    def _live(self) -> BoardSwitch:
        """The switch that opens another board's zoo on the running line; 409 where this kiosk has none."""
        if self.switch is None:
            raise HttpError(409, "this kiosk cannot open another board's zoo live; choose it for the next start "
                                 "(POST /boards/next) and restart the kiosk")
        return self.switch

    @staticmethod
    def _board_named(call: Call) -> tuple[dict[str, Any], str | None]:
        """(the body, the board it names: an installed one's name, None for the configured board)."""
        doc = json_object(call.body, 'JSON {"board": NAME} (an installed board) or {"board": null} (the configured '
                                     "board)")
        name = doc.get("board")
        if name is not None and not isinstance(name, str):
            raise ValueError('"board" names an installed board (GET /boards), or is null for the configured board')
        return doc, name

    def next_start(self, call: Call) -> dict[str, Any]:
        _doc, name = self._board_named(call)
        self.control.ready()
        before = next_board(self.data_dir)
        chosen = choose(self.data_dir, name, self.configured_rules, self.configured_zoo)
        after = None if chosen is None else chosen.name
        recorded = self.control.log.record(call.who, Change("board.next", after or "configured", {"board": before},
                                                            {"board": after}, call.reason))
        said = board_said(after)
        self.say(f"{said} chosen for the kiosk's next start over the API by {call.who.name}")
        return {"next": after, "restart": RESTART,
                "note": f"{said} runs from the kiosk's next start ({RESTART}); the line serves its board until then",
                **recorded}


def _timeout(doc: dict[str, Any]) -> float:
    """`"timeout_s"` of a body: how long the boards inside may take to finish (60 s unless said)."""
    timeout = doc.get("timeout_s", 60)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
        raise ValueError(f'"timeout_s" is how long the boards inside may take to finish, 0 to 3600 s, got {timeout!r}')
    return float(timeout)
