"""The kiosk's HTTP API as one table: every route, the permission its token must hold, what it takes and answers.

The service serves its handlers through this table (`posts`, `reads` below: the permission a POST needs comes from
here), so a route cannot be served without being described, and a test holds the results and audit readers to it;
docs/generate.py renders it as the manual's reference page. The handlers stay where their rooms are (control.py,
camera_control.py, lending.py, sign_in.py, results_api.py, audit_api.py); this module only describes them.

A POST handler that raises has changed nothing: it writes its file before it applies the change, or puts back what it
applied when the file fails (a full disk, a read-only folder); kiosk/http.py answers that OSError naming the file.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..access.roles import Permission


@dataclass(frozen=True)
class Route:
    method: str  # GET or POST
    path: str  # `<...>`: a part of the path the caller fills in
    permission: Permission | None  # what the caller's token must hold; None: no token (open reads, the sign-in)
    takes: str  # a POST's JSON body, a GET's query
    answers: str  # the JSON keys (or the content) of a 200
    when: str = ""  # when the route is served at all, where not always
    max_body: int = 0  # a POST body's limit in bytes where over the endpoint's (kiosk/http.py MAX_BODY): a photo
    streamed: bool = False  # the handler reads the body itself, to disk (a board package: its zoo's weights)


_P = Permission
ROUTES: tuple[Route, ...] = (
    Route("GET", "/metrics", None, "", "Prometheus text: the line's counters, gauges and histograms "
          "([metrics](metrics.md))"),
    Route("GET", "/health", None, "", "`status` (ok or degraded: 200; stalled, critical or stopping: 503) and "
          "`reasons`, each saying what to do"),
    Route("GET", "/status", None, "", "the line's snapshot: throughput, expert switches, memory, the rule set "
          "and its history, registration, the PLC, the audit trail's head"),
    Route("GET", "/rules", None, "", "`recipe`, `version`, `name`, `text` (the running rule set's YAML), "
          "`editable`"),
    Route("GET", "/reviews", None, "", "`component_types`: per type parts, flagged, confirmed, false calls, "
          "escapes and the two rates"),
    Route("GET", "/experts", None, "", "`zoo`, `experts`: each one's served weights (sha256), role, the "
          "versions it can be swapped to and `review_classes` (what a review of its calls may name)"),
    Route("GET", "/camera", None, "", "`source`, the camera's state and settings, `settings_file`"),
    Route("GET", "/camera/frame", None, "", "`width`, `height`, `age_s`, `jpeg_base64`: the camera's last "
          "frame (404 before the first)"),
    Route("GET", "/camera/photo", None, "", "`width`, `height`, `age_s`, `taken_with` (the settings the camera "
          "exposed it with, read back, and the correction applied; null for a camera that cannot say, or where "
          "`settings_unsure`: the frame was under way while a changeover changed exposure or gain), `png_base64`: "
          "the last frame as a lossless golden photo, corrected as the line corrects its frames, that says them (404 "
          "before the first)"),
    Route("GET", "/ledger", None, "", "the memory the kiosk lends: budget, grants and their holders",
          "`--llm-mb` is set"),
    Route("GET", "/results/latest", _P.VIEW, "", "`board`: the newest stored board with its parts"),
    Route("GET", "/results/boards/<inspection id>", _P.VIEW, "", "`board`: one stored board with its parts"),
    Route("GET", "/results/rows", _P.VIEW, "`since`, `until` (ISO time or `-2h`), `board`, `verdict`, "
          "`component`, `reviewed` (`yes`, `no`: the review queue), `upto`, `newest` (at most 5000)",
          "`rows`: [board, part] pairs, newest first; `reviewed`: the review filter as read"),
    Route("GET", "/results/count", _P.VIEW, "the filters of `rows`, `cap`",
          "`count`: parts matching; `reviewed` as `rows`'"),
    Route("GET", "/results/types", _P.VIEW, "", "`types`: the component types stored"),
    Route("GET", "/results/last-id", _P.VIEW, "", "`last_id`: the newest part row's id (a poll's cursor)"),
    Route("GET", "/results/defects", _P.VIEW, "`verdicts` (default `fail,error`), `limit` (default 20)",
          "`rows`: the newest flagged [board, part] pairs"),
    Route("GET", "/results/reviews", _P.VIEW, "`uuid` (repeated, the boards')", "`reviews` of those boards"),
    Route("GET", "/results/export.csv", _P.VIEW, "the filters of `rows`", "CSV, a row a part"),
    Route("GET", "/results/crops/<inspection id>/<ref>", _P.VIEW, "", "PNG: the part's kept crop (404 where "
          "none was kept)"),
    Route("GET", "/results/part-numbers/<rule-set version>", _P.VIEW, "", "`part_numbers`: REF -> the BOM's part "
          "number under that rule set (its `part_numbers:`; `{}` where it names none); `stored`: whether the kiosk "
          "keeps the version's text (the answer then never changes); each part the other routes answer says its "
          "own, `part_number`"),
    Route("GET", "/audit/events", _P.VIEW, "`kind`, `actor`, `limit` (at most 500)", "`events`: who changed "
          "what, when, why, before and after, each row's hash"),
    Route("GET", "/audit/verify", _P.VIEW, "", "`rows`, `head`, `intact`, `broken`: the trail's hash chain "
          "checked"),
    Route("POST", "/auth/sign-in", None, '`{"user", "password"}`', "`token` (a session token), `name`, `role`, "
          "`expires_at`; 401 refused, 429 when an address keeps failing"),
    Route("POST", "/auth/sign-out", _P.VIEW, "`{}`", "`signed_out`: the caller's session token revoked"),
    Route("POST", "/rules", _P.RULES, "the rule set's YAML text (not JSON)", "`applied`, `recipe`, `version`, "
          "`notes` (what the line says of the set: a taught detector served windows far from the size it was taught "
          "on, [Labelled images](../ml/labelled-images.md)) and the audit row; 422 naming the line when the set is "
          "refused (the running one stays)"),
    Route("POST", "/rules/rollback", _P.RULES, '`{"index": N}`, a position in /status `rules.history`',
          "as POST /rules"),
    Route("POST", "/rules/alternates", _P.RULES, '`{"inspection_id", "ref", "make"}`: a flagged part whose crop was '
          "kept; `make`, optional, the approved make's part number (the window's file and the results name it)",
          "as POST /rules, with `ref`, `file` (its window, beside the rule file) and `already` (it looked like a "
          "make approved before); 404 where no crop of it was kept"),
    Route("POST", "/rules/revise", _P.RULES, '`{"name", "revision", "geometry", "photo", "board", "looks_alike", '
          '"replace"}`: a new revision of the line\'s board as `board import` wrote it (`revision`: its rule text; '
          '`geometry`: its `.board.json`), `name` the revised set\'s file name, `photo` a board built to it '
          '(`{"image_base64": PNG or JPEG, "name": its file\'s name}`) or `"line"` (the newest board the line '
          'inspected)',
          "`changes` (`ref`, `kind`, `was`, `now`), `kept`, `windows`, `bare`, `unchecked`, `table` and `notes` (as "
          "`board revise` prints them), `file` (the revised set in the rule folder: a recipe), `recipe`, `version`, "
          "`same_recipe`, the audit row; nothing is served (409 where the name "
          "is taken, 422 naming what `board revise` refuses)", max_body=48 << 20),
    Route("POST", "/rules/changeover", _P.RULES, '`{"recipe": NAME}`: a recipe of the rule folder, or a rule '
          "file's name there (a revised set's `file`); a recipe of another board of the line (the configured one, "
          "an installed one) changes the whole board over with its zoo", "`applied`, `recipe`, `version`, `file`, "
          "the audit row: in force from the next board on, and at the kiosk's next start; 422 naming the folder's "
          "recipes when none is NAME or its file does not validate (the running set stays), 409 where the boards "
          "inside do not finish for another board's"),
    Route("GET", "/boards", None, "", "`boards` installed here (`board`, `recipe`, `version`, `rules`, `packed`), "
          "`next` (the board chosen for the next start; null: the configured one), `serving` (the installed board "
          "served; null: the configured one), `configured` (`rules`: the configured board's rule file)"),
    Route("POST", "/boards/install", _P.RULES, "a board package (not JSON: the tar `inspector board install` packs "
          "of a taught rule set, the files it names and its zoo); `?replace=1` replaces an installed board of its "
          "name", "`board`, `recipe`, `version`, `experts`, `bytes`, `replaced`, `rules`, `next`, the audit row: "
          "installed, every file checked, made ready for its changeover (a runtime's model files; `unprofiled`: the "
          "architectures its first changeover still profiles, or `not_prepared` and why; `same_recipe`: the other "
          "installed boards of its recipe), nothing served (409 "
          "where the name is taken or is the board served, 422 naming what is wrong with the package: nothing of "
          "it stays)", max_body=8 << 30, streamed=True),
    Route("POST", "/boards/serve", _P.RULES, '`{"board": NAME}` (an installed board) or `{"board": null}` (the '
          'configured board), `"timeout_s"` (how long the boards inside may take to finish, 60 by default)',
          "`board`, `file`, `recipe`, `version`, `seconds`, `kept_for_next_start`, the audit row: the line changed "
          "over to that board and its zoo at a board boundary, without a restart, and starts on it next time; 422 "
          "naming the boards installed where none is NAME, or why the board cannot be served (the line serves its "
          "board still), 409 where the boards inside did not finish in time"),
    Route("POST", "/boards/profile", _P.RULES, '`{"board": NAME}` (an installed board), `"timeout_s"` (how long '
          "the boards inside may take to finish, 60 by default)", "`board`, `profiled` (the architectures measured "
          "now: none where this box had them all), `held_s` (how long new boards waited), the audit row where it "
          "measured: its changeover measures nothing; 422 naming the boards installed where none is NAME, 409 where "
          "the boards inside did not finish in time"),
    Route("POST", "/boards/next", _P.RULES, '`{"board": NAME}` (an installed board) or `{"board": null}` (the '
          "configured board)", "`next`, `restart`, `note`, the audit row: the kiosk starts on that board and its zoo "
          "from its next start (POST /boards/serve changes over to it now); 422 naming the boards installed where "
          "none is NAME"),
    Route("POST", "/boards/remove", _P.RULES, '`{"board": NAME}`', "`removed`, the audit row: the installed board "
          "deleted from the kiosk's disk; 409 where the line serves it or its next start runs it"),
    Route("POST", "/allocation", _P.ALLOCATION, '`{"device_mb", "expert_pool_mb", "executors"}`',
          "`applied`: `live` (the pool resized now) or `restart` (saved for the next start)"),
    Route("POST", "/reviews", _P.REVIEW, '`{"inspection_id", "ref", "call": confirmed|false_call|escape, '
          '"correct_class", "note", "boxes": [[x0, y0, x1, y1] or {"box": [x0, y0, x1, y1], "class": C}, ...] on '
          'the kept crop (where each defect is; schema 0012 one box of the review\'s class, 0013 several; "box": one, '
          'as older clients send it)}`',
          "the stored review and the audit row"),
    Route("POST", "/experts/swap", _P.EXPERTS, '`{"expert", "weights_sha256"}` or `{"expert", "rollback": '
          'true}`', "the expert's served version before and after"),
    Route("POST", "/experts/operating", _P.EXPERTS, '`{"expert", "operating": {"threshold": T}}` (a detector) or '
          '`{"operating": {"good_margin": M}}` (a classifier)', "the expert's operating point before and after, "
          "served from the next board on (its weights unchanged) and recorded as `expert.threshold`"),
    Route("POST", "/experts/install", _P.EXPERTS, '`{"expert", "weights_sha256"}`: a release of the plant\'s '
          "results database", "the expert's served version, its hash checked"),
    Route("POST", "/camera/settings", _P.CAMERA, 'GenICam SFNC names, `{"ExposureTime": 800, "Gain": 6}`',
          "`applied`, `settings`; 409 for a source without settings or a key the rule set in force sets "
          "(its `camera:`), 422 for a value the camera refuses"),
    Route("POST", "/ledger/grant", _P.LEDGER, '`{"holder", "bytes"}`', "`grant`, `bytes`, `device`, "
          "`lease_s`; 409 when the memory is not there", "`--llm-mb` is set"),
    Route("POST", "/ledger/renew", _P.LEDGER, '`{"grant"}`', "`grant`, `lease_s`; 404 for a grant expired",
          "`--llm-mb` is set"),
    Route("POST", "/ledger/release", _P.LEDGER, '`{"grant"}`', "`released`", "`--llm-mb` is set"),
)
BUILT_IN = ("/metrics", "/health", "/status")  # GET routes the endpoint answers itself (kiosk/http.py)


def _checked(method: str, served: set[str], described: set[str]) -> None:
    """ValueError for a route served but not described, or described as always served and missing (a route added
    in one place only)."""
    unknown = sorted(served - described)
    always = {r.path for r in ROUTES if not r.when}
    missing = sorted((described - served) & always)
    if unknown or missing:
        raise ValueError(f"the kiosk's {method} routes and kiosk/routes.py disagree: served but not described "
                         f"{unknown or 'none'}, described but not served {missing or 'none'}")


def posts(handlers: dict[str, Callable[..., dict[str, Any]]]) -> dict[str, tuple[Permission | None, Callable]]:
    """POST path -> (the permission the table gives it, its handler)."""
    table = {r.path: r for r in ROUTES if r.method == "POST"}
    _checked("POST", set(handlers), set(table))
    return {path: (table[path].permission, handler) for path, handler in handlers.items()}


def limits() -> dict[str, int]:
    """POST path -> its body's limit, for the routes that take more than a rule file (a photo)."""
    return {r.path: r.max_body for r in ROUTES if r.method == "POST" and r.max_body}


def streams() -> set[str]:
    """The POST paths whose handler reads its body itself."""
    return {r.path for r in ROUTES if r.method == "POST" and r.streamed}


def reads(handlers: dict[str, Callable[[], dict[str, Any]]]) -> dict[str, Callable[[], dict[str, Any]]]:
    """The open GET routes (beside the built-in ones), checked against the table."""
    _checked("GET", set(handlers), {r.path for r in ROUTES if r.method == "GET" and r.permission is None
                                     and r.path not in BUILT_IN})
    return dict(handlers)


def guarded_names(prefix: str) -> set[str]:
    """The first path part of every guarded GET route under `prefix` ('/results/' -> latest, boards, ...)."""
    return {r.path[len(prefix):].split("/")[0] for r in ROUTES if r.method == "GET" and r.path.startswith(prefix)}
