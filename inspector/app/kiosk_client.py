"""What a plant tool asks of a line's kiosk over its API: reads without a token, changes with it."""
from __future__ import annotations

import json
import urllib.error
from pathlib import Path
from typing import Any

from ..endpoint import EndpointError, post_file, request_json, urlopen


class KioskClient:
    def __init__(self, url: str, token: str | None = None, timeout: float = 5.0) -> None:
        self.url, self.token, self.timeout = url.rstrip("/"), token, timeout

    def status(self) -> dict[str, Any]:
        return self._get("/status")

    def health(self) -> dict[str, Any]:
        """/health's answer, also when it is not ok (it answers 503 with its reasons then)."""
        return self._get("/health")

    def rules_text(self) -> str | None:
        return self._get("/rules").get("text")

    def serving(self, expert: str) -> str | None:
        """The weights hash the kiosk's line serves for `expert` (None: no such expert there)."""
        rows = self.status().get("experts") or []
        return next((r.get("weights_sha256") for r in rows if r.get("expert") == expert), None)

    def install(self, expert: str, sha: str, timeout: float = 120.0) -> dict[str, Any]:
        """Serve the plant's release `sha` of `expert` (POST /experts/install: the kiosk checks its hash)."""
        return request_json(self.url + "/experts/install", {"expert": expert, "weights_sha256": sha}, self.token,
                            timeout)

    def rollback(self, expert: str, timeout: float = 120.0) -> dict[str, Any]:
        return request_json(self.url + "/experts/swap", {"expert": expert, "rollback": True}, self.token, timeout)

    def revise(self, body: dict[str, Any], reason: str | None = None, timeout: float = 300.0) -> dict[str, Any]:
        """POST /rules/revise: the kiosk revises the board it serves (app/line_revision.py `revision_request`'s
        body); nothing is served."""
        return request_json(self.url + "/rules/revise", body, self.token, timeout, reason)

    def changeover(self, recipe: str, reason: str | None = None, timeout: float = 60.0) -> dict[str, Any]:
        """POST /rules/changeover: the rule file `recipe` (a recipe, or a file's name in the rule folder) in force
        from the next board on, and at the kiosk's next start."""
        return request_json(self.url + "/rules/changeover", {"recipe": recipe}, self.token, timeout, reason)

    def install_board(self, package: Path, replace: bool = False, reason: str | None = None,
                      timeout: float = 600.0) -> dict[str, Any]:
        """POST /boards/install: a board package (app/board_package.py) streamed from disk; nothing is served. An
        empty POST first, which the kiosk refuses for its token (401, 403) or, once the token may, for the empty body
        (422): a token refused is said before the package's megabytes are sent."""
        try:
            request_json(self.url + "/boards/install", b"", self.token, self.timeout)
        except EndpointError as exc:
            if exc.status != 422:
                raise
        return post_file(self.url + "/boards/install" + ("?replace=1" if replace else ""), package, self.token,
                         timeout, reason)

    def next_board(self, board: str | None, reason: str | None = None, timeout: float = 30.0) -> dict[str, Any]:
        """POST /boards/next: the installed board `board` (None: the configured one) from the kiosk's next start."""
        return request_json(self.url + "/boards/next", {"board": board}, self.token, timeout, reason)

    def serve_board(self, board: str | None, reason: str | None = None, drain_s: float = 60.0,
                    timeout: float = 900.0) -> dict[str, Any]:
        """POST /boards/serve: the line changed over to installed board `board` (None: the configured one) now; the
        boards inside get `drain_s` to finish, the whole change `timeout` (a zoo of an architecture the box never
        measured is profiled first)."""
        return request_json(self.url + "/boards/serve", {"board": board, "timeout_s": drain_s}, self.token, timeout,
                            reason)

    def profile_board(self, board: str, reason: str | None = None, drain_s: float = 60.0,
                      timeout: float = 900.0) -> dict[str, Any]:
        """POST /boards/profile: installed board `board`'s architectures the kiosk's box never measured, measured now
        on the line held empty (the boards inside get `drain_s` to finish)."""
        return request_json(self.url + "/boards/profile", {"board": board, "timeout_s": drain_s}, self.token,
                            timeout, reason)

    def remove_board(self, board: str, reason: str | None = None, timeout: float = 60.0) -> dict[str, Any]:
        """POST /boards/remove: an installed board neither served nor chosen, deleted."""
        return request_json(self.url + "/boards/remove", {"board": board}, self.token, timeout, reason)

    def boards(self) -> dict[str, Any]:
        return self._get("/boards")

    def camera_photo(self) -> dict[str, Any]:
        """GET /camera/photo: the camera's newest frame as a lossless photo saying its settings, with its age (the
        kiosk's error where it has none yet)."""
        return self._get("/camera/photo")

    def _get(self, path: str) -> dict[str, Any]:
        try:
            with urlopen(self.url + path, timeout=self.timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as exc:
            body = exc.read()
            try:
                return json.loads(body)
            except ValueError:
                raise EndpointError(self.url + path, exc.code, str(exc.reason)) from None
        except (OSError, ValueError) as exc:
            raise EndpointError(self.url + path, None, str(exc)) from None
