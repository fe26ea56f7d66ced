"""The dashboard attached to a running kiosk: its state over HTTP, its results from a database named here or over its
API; no inference here. A person signs in at the kiosk and every change goes through its API in their name.
(LocalBackend, a line run by this process, and what both share: backend.py.)"""
from __future__ import annotations

import hashlib
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from inspector.access.identity import Identity, Unauthenticated
from inspector.app.allocation import Allocation
from inspector.app.kiosk_results import KioskResults
from inspector.camera.photo_settings import TakenWith
from inspector.camera.photos import RETAKE, next_photo
from inspector.endpoint import KEPT, EndpointError, urlopen
from inspector.experts.operating import said
from inspector.results.reviews import PART_DEFECTS, ReviewRequest
from inspector.results.scope import Scope
from inspector.results.store import ResultStore, StoreUnavailable
from inspector.routing.rules import RuleSet, load_rules, parse_rules
from inspector.runtime.diskio import write_atomically

from .backend import ORIGIN, Signed, noted
from .picture import BoardPicture, BoardRegistration, board_picture, read_crop


class AttachedBackend(Signed):
    """A kiosk's state over HTTP, and a results database named here; no inference here. A person signs in at the
    kiosk (POST /auth/sign-in) and changes go with their session token; `token` (the box's service token, from
    --token-file) reads results and borrows memory, and changes nothing."""

    can_control = False

    def __init__(self, url: str, db_url: str | None = None, poll_s: float = 0.5, token: str | None = None) -> None:
        self.url, self._db_url, self.poll_s, self._service_token = url.rstrip("/"), db_url, poll_s, token
        self._session: str | None = None
        self._latest: dict[str, Any] = {"state": "connecting", "controller": {"phase": "attaching", "log": []}}
        self._store: ResultStore | None = None
        self._remote: KioskResults | None = None
        self._rules: tuple[str, RuleSet | None] | None = None  # (text, its rule set) of the kiosk's running set
        self._document: tuple[str, str] | None = None  # GET /rules as of the running version (the poll thread's)
        self._document_version: str | None = None
        self._review_classes: dict[str, tuple[str, ...]] = {}  # expert -> what a review of its calls may name
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="attach-poll", daemon=True)
        self._thread.start()

    @property
    def session_token(self) -> str | None:  # type: ignore[override] - the kiosk's session for the signed-in person
        return self._session

    @property
    def _token(self) -> str | None:
        """For reads: the person's session, else the box's service token."""
        return self._session or self._service_token

    def has_users(self) -> bool:
        return True  # the kiosk's database says at sign-in; a first admin is made with `inspector user add`

    def sign_in(self, name: str, password: str) -> Identity:
        try:
            doc = self._call("POST", "/auth/sign-in", json.dumps({"user": name, "password": password}).encode(),
                             person=False)
        except RuntimeError as exc:
            raise Unauthenticated(str(exc)) from None
        self._session = doc["token"]
        self._remote = None
        self.identity = Identity(doc["name"], doc["role"], f"{ORIGIN}, signed in at {self.url}")
        return self.identity

    def sign_out(self) -> None:
        """Revoke this dashboard's session at the kiosk (locking or closing): the token is worth nothing after."""
        session, self._session, self.identity = self._session, None, None
        self._remote = None
        if session is not None:
            try:
                self._call("POST", "/auth/sign-out", b"{}", person=False, token=session)
            except (RuntimeError, ValueError):
                pass  # the kiosk is gone: the session expires on its own

    def first_admin(self, name: str, password: str) -> Identity:
        raise PermissionError("the kiosk's first admin is made on its database: `inspector user add NAME --role "
                              "admin`")

    def audit(self) -> Any:
        """The kiosk's trail over its API (GET /audit/...)."""
        return RemoteAudit(self)

    def llm_loan(self, nbytes: int) -> Any:
        """Memory for the LLM tab's in-process model, lent by the kiosk (its --llm-mb) on a lease."""
        if self._service_token is None:
            raise PermissionError("the kiosk lends memory to a model only with its API token: attach with "
                                  "--token-file, or point the Model field at a running `inspector llm serve`")
        from inspector.moe.loans import from_kiosk

        return from_kiosk(self.url, self._service_token)(nbytes)

    @property
    def label(self) -> str:
        return f"attached to {self.url} (changes through its API, as the person signed in)"

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                snap = self._call("GET", "/status")
                snap["controller"] = {"phase": snap.get("state", "?"), "error": None, "log": [],
                                      "source": (snap.get("ingest") or {}).get("source", {}).get("name")}
                version = (snap.get("line") or {}).get("ruleset_version")
                if version != self._document_version:  # the running set changed: fetch its text once
                    self._document = self._fetch_document()
                    self._document_version = version if self._document is not None else None
            except RuntimeError as exc:
                snap = {"state": "unreachable", "controller": {"phase": "unreachable", "log": [], "error": str(exc)}}
            self._latest = snap
            self._stop.wait(self.poll_s)

    def _call(self, method: str, path: str, body: bytes | None = None, timeout: float = 5.0,
              person: bool = True, reason: str | None = None, token: str | None = None) -> dict[str, Any]:
        """One request to the kiosk; RuntimeError with the kiosk's own words when it refuses. A POST goes with the
        signed-in person's token (their change, in their name); a GET with whatever token there is."""
        request = urllib.request.Request(self.url + path, data=body, method=method)
        token = token or ((self._session if body is not None else self._token) if person else None)
        if body is not None and person and token is None:
            raise RuntimeError("nobody is signed in at this dashboard: sign in first")
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        if reason:
            request.add_header("X-Change-Reason", urllib.parse.quote(reason))
        if body is None:  # a read (the poll, /rules, /audit): this thread's kept connection to the kiosk
            try:
                status, data = KEPT.get(self.url + path, token, timeout)
                doc = json.loads(data)
            except (EndpointError, ValueError) as exc:
                raise RuntimeError(f"cannot reach {self.url}{path} ({exc}); is the kiosk running and listening "
                                   "there?") from None
            if status >= 400:
                raise (ValueError if status == 422 else RuntimeError)(doc.get("error", f"HTTP {status}"))
            return doc
        try:
            with urlopen(request, timeout=timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("error", str(exc))
            except ValueError:
                message = str(exc)
            raise (ValueError if exc.code == 422 else RuntimeError)(message) from None
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"cannot reach {self.url}{path} ({exc}); is the kiosk running and listening "
                               "there?") from None

    def snapshot(self) -> dict[str, Any]:
        return self._latest

    def camera_photo(self, out: Path) -> tuple[Path, TakenWith | None]:
        """The kiosk camera's newest frame (GET /camera/photo, lossless) saved in `out` as a golden photo
        (golden-NN.png) that says the settings the camera exposed it with; RuntimeError when the kiosk has none, or
        its newest was under way while a changeover changed the exposure (the next one is sure)."""
        import base64

        doc = self._call("GET", "/camera/photo", timeout=10.0)
        if doc.get("settings_unsure"):
            raise RuntimeError(RETAKE)
        path = next_photo(out, "golden")
        out.mkdir(parents=True, exist_ok=True)  # a new work folder
        write_atomically(path, base64.b64decode(doc["png_base64"]))
        taken = doc.get("taken_with")
        return path, None if taken is None else TakenWith.from_json(taken, f"{self.url}/camera/photo")

    def camera_frame(self) -> np.ndarray | None:
        """The kiosk's newest camera frame (GET /camera/frame), None when it has none or is unreachable."""
        import base64

        import cv2

        try:
            doc = self._call("GET", "/camera/frame", timeout=2.0)
        except (RuntimeError, ValueError):
            return None
        data = np.frombuffer(base64.b64decode(doc["jpeg_base64"]), np.uint8)
        return cv2.imdecode(data, cv2.IMREAD_COLOR)

    def apply_camera(self, settings: dict[str, Any]) -> str:
        self._call("POST", "/camera/settings", json.dumps(settings).encode(), timeout=20.0)
        return "the kiosk's camera took the settings (and saved them for its next start)"

    def scope(self) -> Scope | None:
        """The kiosk's line and station, as its /status says; None until it has answered (nothing is shown
        before: in a plant's shared database another line's newest board is not this kiosk's)."""
        line = self._latest.get("line") or {}
        if not line.get("line"):
            return None
        return Scope(str(line["line"]), str(line.get("station") or "") or None)

    def store(self) -> ResultStore | KioskResults | None:
        """The results database given with --db (never a URL the kiosk reports); without one, the kiosk's own
        results over its API (needs the token); None with neither."""
        if self._store is None and self._db_url:
            try:
                self._store = ResultStore(self._db_url)
            except StoreUnavailable:
                return None
        if self._store is None and self._db_url is None and self._token is not None:
            self._remote = self._remote or KioskResults(self.url, self._token)
            return self._remote
        return self._store

    def expert_report(self, expert: str, weights: str) -> tuple[list[Path], str]:
        """Attached, the zoo is the line box's: its plots are there (<zoo>/reports/<expert>@<version>/)."""
        return [], (f"the plots of {expert} version {weights[:12]} are in the line box's zoo "
                    f"(reports/{expert}@{weights[:12]}/)")

    def crop_image(self, uuid: str, ref: str, path: str | None) -> np.ndarray | None:
        """A kept crop: the file when this machine has it, else the kiosk's copy over its API."""
        image = read_crop(path)
        if image is not None or not path or self._token is None:
            return image
        import cv2

        try:
            data = KioskResults(self.url, self._token).crop(uuid, ref)
        except (OSError, ValueError):
            return None
        return None if data is None else cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)

    def close(self, timeout: float | None = None) -> bool:
        self.sign_out()
        self._stop.set()
        self._thread.join(timeout)
        if self._store is not None:
            self._store.close()
        return True

    def _rule_set(self) -> RuleSet | None:
        doc = self.rules_document()
        if doc is None:
            return None
        text = doc[1]
        if self._rules is None or self._rules[0] != text:
            try:
                self._rules = (text, parse_rules(text, doc[0]))
            except ValueError:
                self._rules = (text, None)
        return self._rules[1]

    def board(self) -> BoardPicture | None:
        store, scope = self.store(), self.scope()
        latest = store.latest(scope) if store is not None and scope is not None else None
        if latest is None:
            return None
        reg = BoardRegistration(
            tuple(json.loads(latest.reg_transform)) if latest.reg_transform else None, latest.reg_residual_px,
            {k: tuple(v) for k, v in json.loads(latest.reg_fiducials).items()} if latest.reg_fiducials else {},
            latest.error)
        return board_picture(self._rule_set(), latest.board_serial, latest.verdict,
                             [(p.ref, p.verdict, p.defect_class) for p in latest.parts], None, reg, latest.panel)

    def rules_path(self) -> Path | None:
        return None  # the kiosk's files are its own; the text comes over its API

    def rules_document(self) -> tuple[str, str] | None:
        """(the kiosk's name for it, its text) of the running set, as the poll thread last fetched it from
        GET /rules (the GUI thread never waits on the network); None before that or when it has no text."""
        return self._document

    def _fetch_document(self) -> tuple[str, str] | None:
        try:
            doc = self._call("GET", "/rules")
        except RuntimeError:
            return None
        text = doc.get("text")
        return (f"{self.url}: {doc.get('name', 'rules')}", text) if isinstance(text, str) else None

    def apply_rules(self, text: str, reason: str | None = None) -> str:
        """POST the edit; the kiosk validates it against its zoo, writes its file atomically and applies it."""
        answer = self._call("POST", "/rules", text.encode("utf-8"), reason=reason)
        return noted(f"the kiosk applied {answer['recipe']} {answer['version']} (validated, saved and running)",
                     answer.get("notes"))  # a kiosk before them sends none

    def rules_history(self) -> list[tuple[str, str, str]]:
        hist = (self._latest.get("rules") or {}).get("history") or []
        return [(h["at"][11:19], h["recipe"], h["version"]) for h in hist]

    def rollback(self, index: int, reason: str | None = None) -> str:
        answer = self._call("POST", "/rules/rollback", json.dumps({"index": index}).encode(), reason=reason)
        return noted(f"the kiosk rolled back to {answer['recipe']} {answer['version']} (applied and saved)",
                     answer.get("notes"))

    def approve_alternate(self, uuid: str, ref: str, reason: str | None = None, make: str | None = None) -> str:
        """POST /rules/alternates: the kiosk approves the crop it kept of the part as another make of it (named
        `make` where given)."""
        body = {"inspection_id": uuid, "ref": ref, **({"make": make} if make else {})}
        answer = self._call("POST", "/rules/alternates", json.dumps(body).encode(), timeout=60, reason=reason)
        return (f"the kiosk approved {ref} as another make ({answer['file']}); {answer['recipe']} "
                f"{answer['version']} applied and saved")

    def revise_line_board(self, revision: Path, photo: Path | None, board: int = 0,
                          looks_alike: str = "") -> dict[str, Any]:
        """POST /rules/revise: the kiosk revises the board it serves to the revision imported here (`photo`: a board
        built to it; None: the newest board the kiosk's line inspected). Its answer; nothing is served. Slow: called
        off the GUI thread."""
        from inspector.app.line_revision import revision_request

        body = revision_request(revision, None, photo if photo is not None else "line", board, looks_alike,
                                replace=True)
        # its own name whatever the CAD file's (a revision's CAD is often named as the taught board's)
        body["name"] = f"{body['name'][:57]}-{hashlib.sha256(body['revision'].encode()).hexdigest()[:6]}"  # 64 at most
        return self._call("POST", "/rules/revise", json.dumps(body).encode(), timeout=300)

    def activate_board(self, rules_path: Path, zoo_root: Path, reason: str | None = None) -> str:
        """A board taught here (its rule set and its own zoo) installed on the kiosk and served by its line from the
        next board on (POST /boards/install, /boards/serve: the line changes over live and starts on it next time).
        Named by its rule file and its text's hash, so teaching again installs beside, not over, the last. Slow (the
        zoo's weights go over the network): called off the GUI thread."""
        import tempfile

        from inspector.app.board_package import default_name, pack_board
        from inspector.app.kiosk_client import KioskClient

        if self._session is None:
            raise RuntimeError("nobody is signed in at this dashboard: sign in first")
        version = load_rules(rules_path).version
        name = f"{default_name(Path(rules_path))[:50]}-{version[:8]}"
        client = KioskClient(self.url, self._session)
        try:
            with tempfile.TemporaryDirectory(prefix="inspector-board-") as scratch:
                package = Path(scratch) / "board.tar"
                with open(package, "wb") as f:
                    pack_board(Path(rules_path), Path(zoo_root), f, name)
                done = client.install_board(package, replace=True, reason=reason)
            served = client.serve_board(done["board"], reason)
        except EndpointError as exc:
            raise (ValueError if exc.status == 422 else RuntimeError)(exc.message or str(exc)) from None
        from inspector.app.board_switch import served_line

        return (f"board {done['board']} ({done['recipe']} {done['version']}, {done['experts']} expert(s)) installed on "
                f"the kiosk; {served_line(served)}")

    def install_package(self, package: Path, reason: str | None = None) -> str:
        """A board package carried here (`board install --out`) installed on the kiosk (POST /boards/install), not
        served. Slow (its weights go over the network): called off the GUI thread."""
        from inspector.app.board_package import installed_line
        from inspector.app.kiosk_client import KioskClient

        if self._session is None:
            raise RuntimeError("nobody is signed in at this dashboard: sign in first")
        try:
            done = KioskClient(self.url, self._session).install_board(Path(package), reason=reason)
        except EndpointError as exc:
            raise (ValueError if exc.status in (409, 422) else RuntimeError)(exc.message or str(exc)) from None
        return installed_line(done, "the kiosk")

    def boards(self) -> dict[str, Any]:
        """GET /boards: the boards installed on the kiosk, the one served and the one its next start runs."""
        return self._call("GET", "/boards")

    def serve_board(self, board: str | None, reason: str | None = None) -> str:
        """POST /boards/serve: the kiosk's line changed over to installed board `board` (None: the configured one) at
        its next board boundary. Slow where the box profiles the board's experts first: called off the GUI thread."""
        from inspector.app.board_switch import served_line

        return served_line(self._call("POST", "/boards/serve", json.dumps({"board": board}).encode(), timeout=900,
                                      reason=reason))

    def profile_board(self, board: str, reason: str | None = None) -> str:
        """POST /boards/profile: what installed board `board`'s first changeover would measure, measured now on the
        kiosk's line held empty (seconds: called off the GUI thread)."""
        from inspector.app.board_switch import profiled_line

        return profiled_line(self._call("POST", "/boards/profile", json.dumps({"board": board}).encode(), timeout=900,
                                        reason=reason))

    def remove_board(self, board: str, reason: str | None = None) -> str:
        """POST /boards/remove: an installed board neither served nor chosen, deleted from the kiosk."""
        done = self._call("POST", "/boards/remove", json.dumps({"board": board}).encode(), timeout=60, reason=reason)
        return f"board {done['removed']} removed from the kiosk"

    def changeover(self, recipe: str, reason: str | None = None) -> str:
        """POST /rules/changeover: the kiosk's rule file `recipe` (a revised set's name) in force from the line's
        next board on, and at its next start."""
        answer = self._call("POST", "/rules/changeover", json.dumps({"recipe": recipe}).encode(), timeout=60,
                            reason=reason)
        return noted(f"the kiosk's line runs {answer['recipe']} {answer['version']} ({answer['file']}) from its next "
                     "board on, and from its next start", answer.get("notes"))

    def review_classes(self, expert: str) -> tuple[str, ...]:
        """GET /experts: the defect classes a review of `expert`'s call may name, as the kiosk's zoo has them (asked
        once an expert: its classes do not change with its versions)."""
        if expert not in self._review_classes:
            entry = self._call("GET", "/experts").get("experts", {}).get(expert) or {}
            self._review_classes[expert] = tuple(entry.get("review_classes") or PART_DEFECTS)
        return self._review_classes[expert]

    def review(self, req: ReviewRequest) -> str:
        """POST /reviews: the kiosk checks the part and its verdict and stores the review in its database."""
        answer = self._call("POST", "/reviews", json.dumps(req.to_json()).encode())
        stored = f"the kiosk stored: {req.ref} {req.call.replace('_', ' ')} ({answer['component_type']})"
        if req.to_json().get("boxes") and answer.get("boxes") is None:  # a kiosk of a release before several boxes
            return (f"{stored}, but not its boxes: the kiosk's release takes one box a review, of the review's class; "
                    "upgrade it, or review again with one box")
        return stored

    def expert_versions(self) -> dict[str, Any]:
        """GET /experts: every trained expert's versions as the kiosk's zoo holds them."""
        return self._call("GET", "/experts").get("experts", {})

    def swap_expert(self, expert: str, sha: str | None = None, rollback: bool = False, force: bool = False,
                    reason: str | None = None) -> str:
        body = {"expert": expert, **({"rollback": True} if rollback else {"weights_sha256": sha, "force": force})}
        done = self._call("POST", "/experts/swap", json.dumps(body).encode(), timeout=90, reason=reason)
        return (f"{expert} serves {done['to'][:12]}, {said(done.get('operating') or {})} on the kiosk's line from "
                "the next board on")

    def operate_expert(self, expert: str, point: dict[str, float], reason: str | None = None) -> str:
        body = json.dumps({"expert": expert, "operating": point}).encode()
        done = self._call("POST", "/experts/operating", body, timeout=90, reason=reason)
        return f"{expert} calls at {said(done['operating'])} on the kiosk's line from the next board on"

    def apply_allocation(self, allocation: Allocation, reason: str | None = None) -> str:
        body = json.dumps({"device_mb": allocation.device_mb, "expert_pool_mb": allocation.expert_pool_mb,
                           "executors": allocation.executors}).encode()
        return self._call("POST", "/allocation", body, reason=reason)["applied"]


class RemoteAudit:
    """The few reads of an AuditTrail the dashboard makes, over a kiosk's API."""

    def __init__(self, backend: AttachedBackend) -> None:
        self.backend = backend

    def events(self, kind: str | None = None, actor: str | None = None, limit: int | None = None) -> list[Any]:
        from datetime import datetime
        from types import SimpleNamespace

        query = urllib.parse.urlencode({k: v for k, v in (("kind", kind), ("actor", actor), ("limit", limit)) if v})
        rows = self.backend._call("GET", "/audit/events" + (f"?{query}" if query else ""))["events"]
        return [SimpleNamespace(**{**r, "at": datetime.fromisoformat(r["at"])}) for r in rows]

    def verify(self) -> Any:
        from types import SimpleNamespace

        doc = self.backend._call("GET", "/audit/verify")
        return SimpleNamespace(rows=doc["rows"], head=doc["head"], intact=doc["intact"],
                               broken=tuple(SimpleNamespace(row_id=b["id"], why=b["why"]) for b in doc["broken"]))
