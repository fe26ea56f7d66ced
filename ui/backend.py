"""Where the dashboard's data comes from: a line it runs itself (here), or a kiosk it is attached to
(attached.py), and who is signed in at it (`Signed`, what both share).

The tabs never touch the engine directly; they read plain snapshots (see
inspector/app/snapshot.py) and call the few verbs here. `LocalBackend`
drives a LineController in this process; every change it makes is checked
against the signed-in role and recorded in the audit trail (app/changes.py).
`AttachedBackend` polls a running kiosk's /status and /rules on a thread of
its own (the GUI thread waits on the network only for an operator's Apply or
Rollback, a local request with a 5 s timeout) and reads the results database
named on its own command line; it runs no inference and cannot start, pause
or stop the kiosk (systemd does that). It changes the kiosk's rules and
memory only through the kiosk's API, with the signed-in person's session, and
the kiosk validates before it writes anything; it never writes the kiosk's
files and takes no path or URL from /status. Without a database URL it reads
the kiosk's results and crops over the kiosk's API. What the line view draws
of a board: picture.py.
"""
from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from inspector.access.audit import AuditTrail, Change
from inspector.access.identity import Identity
from inspector.access.roles import Permission
from inspector.access.users import UserBook, token_key
from inspector.app.allocation import Allocation
from inspector.app.board_package import installed_line
from inspector.app.board_switch import profiled_line, served_line
from inspector.app.changes import HOST, ChangeLog
from inspector.app.controller import LineController, LineSetup
from inspector.app.detector_scale import scale_notes
from inspector.app.expert_swap import expert_versions, operate_live, swap_live
from inspector.app.recipes import RecipeBook
from inspector.app.verdict import classes_of, review_classes
from inspector.camera.photo_settings import TakenWith, save_photo
from inspector.camera.photos import RETAKE, newest_frame, newest_photo, next_photo
from inspector.experts.operating import said
from inspector.experts.versions import activate, entry_of, operate, serving
from inspector.experts.versions import rollback as rollback_version
from inspector.experts.zoo import Zoo, report_files
from inspector.results.reviews import ReviewRequest, record_review
from inspector.results.scope import Scope
from inspector.results.store import ResultStore
from inspector.results.units import PanelResult
from inspector.routing.rules import RuleSet, load_rules

from .picture import BoardPicture, BoardRegistration, board_picture, read_crop

LLM_MB = 512.0  # what the dashboard sets aside for its in-process language model unless told (--llm-mb)
SESSION_HOURS = 12.0  # a local sign-in's token lasts this long at most (revoked when the panel locks)
ORIGIN = f"dashboard on {HOST}"


def noted(message: str, notes: list[str] | None) -> str:
    """An edit's answer, and what the line says of the rule set it applied (each note a line of its own)."""
    return "\n".join([message, *(notes or [])])


class Signed:
    """Who is signed in at this dashboard; what the tabs may offer follows from their role."""

    identity: Identity | None = None
    session_token: str | None = None  # the signed-in person's own token: a model server with --db knows it too

    def may(self, permission: Permission) -> bool:
        return self.identity is not None and self.identity.may(permission)

    def _require(self, permission: Permission) -> Identity:
        if self.identity is None:
            raise PermissionError("nobody is signed in: sign in first")
        self.identity.require(permission)
        return self.identity

    @property
    def can_edit(self) -> bool:
        return self.may(Permission.RULES)


class LocalBackend(Signed):
    """A line run by this process (the dashboard's Start button)."""

    can_control = True

    def __init__(self, controller: LineController, setup: LineSetup, llm_mb: float = LLM_MB) -> None:
        self.controller, self.setup = controller, setup
        self._store: ResultStore | None = None
        self._log: ChangeLog | None = None
        controller.witness = lambda kind, who, origin, old, new: self.change_log().rules(
            Identity(who, "-", origin), kind, old, new)
        self.llm_mb = llm_mb  # set aside for the LLM tab's in-process model, beside the line's own budget
        self._set_aside: Any = None

    def llm_loan(self, nbytes: int) -> Any:
        """Memory for the LLM tab's in-process model, from what `--llm-mb` set aside (inspector/moe/loans.py)."""
        if self._set_aside is None:
            from inspector.moe.loans import SetAside

            self._set_aside = SetAside("cpu", int(self.llm_mb * 2**20), flag="inspector gui --llm-mb")
        return self._set_aside(nbytes)

    @property
    def label(self) -> str:
        return f"local line, results in {self.controller.db_url}"

    # people
    def _users(self) -> UserBook:
        store = self.store()
        store.ready()
        line = self.setup.service.line
        return UserBook(store.engine, AuditTrail(store.engine, line.line, line.station))

    def has_users(self) -> bool:
        return bool(self._users().users())

    def sign_in(self, name: str, password: str) -> Identity:
        users = self._users()
        self.identity = users.sign_in(name, password, ORIGIN)
        # a session token, as the kiosk gives an attached dashboard: the LLM tab shows it to a model server that
        # knows this database's users; the sign-in is the record, revoked when the panel locks
        self.session_token = users.issue(self.identity, name, f"session from {ORIGIN}", SESSION_HOURS / 24,
                                         audit=False)
        return self.identity

    def sign_out(self) -> None:
        token, self.session_token = self.session_token, None
        key = token_key(token) if token else None
        if key is not None and self.identity is not None:
            try:
                self._users().revoke(self.identity, key, "signed out")
            except Exception as exc:  # noqa: BLE001 - the database away: the session expires on its own
                self.controller.say(f"warning: the session could not be revoked now ({exc}); it expires by itself")
        self.identity = None

    def first_admin(self, name: str, password: str) -> Identity:
        """The first user of an empty database, an admin, made at this dashboard (refused once anyone exists)."""
        users = self._users()
        if users.users():
            raise PermissionError("this database has users already: sign in")
        users.add(Identity(name, "admin", ORIGIN), name, "admin", password)
        return self.sign_in(name, password)

    def change_log(self) -> ChangeLog:
        if self._log is None:
            line = self.setup.service.line
            self._log = ChangeLog(self.store(), line.line, line.station, self.controller.say)
        return self._log

    def audit(self) -> AuditTrail:
        return self.change_log().trail

    def snapshot(self) -> dict[str, Any]:
        return self.controller.snapshot()

    def store(self) -> ResultStore:
        if self._store is None:
            self._store = ResultStore(self.controller.db_url)
        return self._store

    def crop_image(self, uuid: str, ref: str, path: str | None) -> np.ndarray | None:
        """A kept crop: a file on this machine."""
        return read_crop(path)

    def expert_report(self, expert: str, weights: str) -> tuple[list[Path], str]:
        """The plots of the expert version that called a part (its zoo's reports/), or why there are none."""
        zoo = self.controller.loaded_zoo
        if zoo is None:
            return [], "the experts are not loaded yet: start the line"
        files = report_files(zoo.root, expert, weights)
        return files, "" if files else (f"no plots of {expert} version {weights[:12]} in {zoo.root}: an expert taught "
                                        "from labelled images (zoo train --new) has them, the demo's do not")

    def scope(self) -> Scope:
        """The line this dashboard runs: its results are the ones shown, whoever else shares the database."""
        return self.setup.service.line.scope

    def start(self, source: str | None = None) -> None:
        if source:
            self.setup = replace(self.setup, source=source)
        self.controller.start(self.setup)

    def pause(self) -> None:
        self.controller.pause()

    def resume(self) -> None:
        self.controller.resume()

    def stop(self) -> None:
        self.controller.stop()

    def close(self, timeout: float | None = None) -> bool:
        done = self.controller.close(timeout)
        if self.session_token is not None:
            self.sign_out()  # the window goes: its session with it
        if self._store is not None:
            self._store.close()
        return done

    def board(self) -> BoardPicture | None:
        service = self.controller.service
        last = service.last_board if service is not None else None
        if last is None:
            return None
        image, record = last
        reg = BoardRegistration(record.transform, record.residual_px, record.fiducials, record.error)
        panel = (PanelResult(record.panel_boards, record.failed_boards(), list(record.panel_skipped),
                             dict(record.panel_serials)) if record.panel_boards else None)
        return board_picture(service.line.rules, record.board_serial, record.verdict,
                             [(p.ref, p.verdict, p.defect_class) for p in record.parts], image, reg, panel)

    # rules
    def rules_path(self) -> Path:
        return self.setup.rules_path

    def rules_document(self) -> tuple[str, str] | None:
        """(what to call it, its text): the rule file this line runs."""
        try:
            return str(self.setup.rules_path), self.setup.rules_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def _running_rules(self) -> RuleSet | None:
        return self.controller.service.line.rules if self.controller.service is not None else None

    def apply_rules(self, text: str, reason: str | None = None) -> str:
        who = self._require(Permission.RULES)
        rules, _ = self.change_log().rules_change(who, "rules.apply", self._running_rules,
                                                  lambda: self.controller.apply_rules(text), reason)
        return noted(f"applied {rules.recipe} {rules.version} to the running line and saved it to "
                     f"{self.setup.rules_path}", self._scale_notes())

    def activate_board(self, rules_path: Path, zoo_root: Path, reason: str | None = None) -> str:
        """A taught board (board teach's rule set and zoo) made the line's board, recorded in the audit trail: the
        running line changes over to it from its next board (a revision of the board it runs by its rule set alone,
        a new board with its zoo: Line.change_board), a stopped line serves it from its start."""
        who = self._require(Permission.RULES)
        service, watcher = self.controller.service, self.controller.rules
        if service is not None and watcher is not None and self.controller.phase == "running" and \
                Path(service.line.zoo.root).resolve() == Path(zoo_root).resolve():
            rules, _ = self.change_log().rules_change(
                who, "rules.activate", self._running_rules,
                lambda: RecipeBook(watcher, [Path(rules_path).parent]).switch(Path(rules_path)), reason)
            self.setup = replace(self.setup, rules_path=Path(rules_path))
            return noted(f"{rules.recipe} {rules.version} runs from the line's next board on (its experts serve it), "
                         "and from its next start", self._scale_notes())
        rules, zoo = load_rules(rules_path), Zoo.load(zoo_root)
        log = self.change_log()
        log.ready()
        live = self.controller.change_board(Path(rules_path), zoo)
        before = str(self.setup.rules_path)
        self.setup = replace(self.setup, rules_path=Path(rules_path))
        log.record(who, Change("rules.activate", f"{self.setup.service.line.line}/{self.setup.service.line.station}",
                               {"rules": before}, {"rules": str(rules_path), "zoo": str(zoo_root),
                                                   "recipe": rules.recipe, "version": rules.version}, reason))
        when = "from the line's next board on (changed over live) and its next start" if live is not None else \
            "from the line's next start"
        return noted(f"{rules.recipe} {rules.version} with its own experts ({zoo_root}) is the line's board {when}",
                     scale_notes(rules, zoo))

    # boards installed in the data folder (`board install`), served as a kiosk serves its own (ui/tabs/boards_panel.py)
    boards_home = "this box"

    def _board_change(self) -> tuple[Identity, ChangeLog]:
        """Who changes a board (an engineer signed in) and the trail it goes to, ready (refused before anything)."""
        who = self._require(Permission.RULES)
        log = self.change_log()
        log.ready()
        return who, log

    def boards(self) -> dict[str, Any]:
        """The boards installed in this line's data folder, the one served and the one a kiosk's next start runs."""
        return self.controller.boards(self.setup.rules_path)

    def serve_board(self, board: str | None, reason: str | None = None) -> str:
        """The running line changed over to installed board `board` (None: the configured one) at its next board
        boundary, with its own zoo, recorded in the audit trail. Slow where its experts are profiled first: called off
        the GUI thread."""
        who, log = self._board_change()
        before = self.controller.boards(self.setup.rules_path)["serving"]
        done = self.controller.serve_board(board)
        self.setup = replace(self.setup, rules_path=done.file)  # the dashboard's next start runs it too
        answer = done.to_json()
        log.record(who, Change("board.serve", done.board.name or "configured", {"board": before}, answer, reason))
        return served_line(answer, "this dashboard's next start")

    def profile_board(self, board: str, reason: str | None = None) -> str:
        """What installed board `board`'s first changeover would measure, measured now on the running line held empty
        (seconds: called off the GUI thread); recorded where it measured."""
        who, log = self._board_change()
        measured, held = self.controller.profile_board(board)
        answer = {"board": board, "profiled": measured, "held_s": round(held, 2)}
        if measured:
            log.record(who, Change("board.profile", board, None, answer, reason))
        return profiled_line(answer, "this")

    def install_package(self, package: Path, reason: str | None = None) -> str:
        """A board package carried here (`board install --out`) installed on this box, not served, recorded."""
        who, log = self._board_change()
        done = self.controller.install_package(Path(package))
        log.record(who, Change("board.install", done["board"], None, done, reason))
        return installed_line(done, "this box")

    def remove_board(self, board: str, reason: str | None = None) -> str:
        """An installed board neither served nor chosen for a kiosk's next start, deleted, recorded."""
        who, log = self._board_change()
        gone = self.controller.remove_board(board)
        log.record(who, Change("board.remove", gone.name, {"board": gone.name}, None, reason))
        return f"board {gone.name} removed from this box"

    def tune_board(self, rules_path: Path, zoo_root: Path, photos: list[Path], most_lost: float,
                   margin: float) -> tuple[list[Any], Any]:
        """Boards known good through the line and the tune of their flags (app/board_tune.py): planned, nothing
        served. Slow (a line run): called off the GUI thread."""
        from inspector.app.board_tune import tune_boards

        return tune_boards(Path(rules_path), Path(zoo_root), photos, Path(zoo_root).parent / "tune",
                           self.controller.models_dir, most_lost, margin, self.controller.say)

    def serve_tune(self, zoo_root: Path, tune: Any, reason: str | None = None) -> str:
        """A planned tune's thresholds served, each change recorded in the audit trail as the signed-in person's
        (who needs the experts' permission; refused before anything when the trail cannot be written): live, at a
        board boundary, where the running line runs this board's zoo; else by the zoo for the next start."""
        from inspector.app.board_tune import changes_of, serve_audited

        who = self._require(Permission.EXPERTS)
        moved = changes_of(tune)
        if not moved:
            return "no threshold moves: nothing served"
        passed = ", ".join(ref for t in tune.types if t.changed for ref in t.passed)
        why = reason or f"passes {passed} of good boards"
        recall = f"held-out recall {100 * tune.recall_before:.1f}% -> {100 * tune.recall_after:.1f}%"
        service = self.controller.service
        if service is not None and self.controller.phase == "running" and \
                Path(service.line.zoo.root).resolve() == Path(zoo_root).resolve():  # the board the line runs
            for expert, (_before, new) in sorted(moved.items()):  # each at a board boundary, each audited
                self.operate_expert(expert, {"good_margin": new}, why)
            return f"served {len(moved)} thresholds ({recall}) on the running line from the next board on"
        if self.controller.busy and self.controller.phase != "running":
            raise RuntimeError("the line is starting or stopping: serve the tune when it runs or has stopped")
        serve_audited(Path(zoo_root), moved, self.change_log(), who, why)
        return (f"served {len(moved)} thresholds ({recall}) from the next start of a line on this board (the line "
                "running now runs another)" if service is not None and self.controller.phase == "running" else
                f"served {len(moved)} thresholds ({recall}) from the line's next start on this board")

    def approve_alternate(self, uuid: str, ref: str, reason: str | None = None, make: str | None = None) -> str:
        """The crop this line kept of a flagged part approved as another make of it (app/board_approve.py), named
        `make` where given: its window beside the rule file, the file's `alternates:` updated, applied and saved,
        recorded in the trail."""
        from inspector.app.board_approve import apply_approval, checked_window, prepare
        from inspector.results.store import Filters

        who = self._require(Permission.RULES)
        running, watcher, store = self._running_rules(), self.controller.rules, self.store()
        if running is None or watcher is None or watcher.path is None or store is None:
            raise RuntimeError("start the line first: an approval changes the rule file the running line reads")
        part = next((p for _b, p in store.component_rows(Filters(scope=self.scope(), uuid=uuid))
                     if p is not None and p.ref == ref), None)
        image = self.crop_image(uuid, ref, part.crop_path) if part is not None and part.crop_path else None
        if image is None:
            raise RuntimeError(f"no crop of {ref} on this board was kept: approve it from a photo "
                               "(`inspector board approve --photo`)")
        approval = prepare(Path(watcher.path), {ref: checked_window(running, ref, image, f"the crop of {ref}")},
                           uuid[:8], make or None)
        rules, _ = self.change_log().rules_change(who, "rules.alternate", self._running_rules,
                                                  lambda: apply_approval(approval, self.controller.apply_rules), reason)
        return (f"approved {ref} as another make ({approval.approved[0].file.name}); {rules.recipe} {rules.version} "
                "applied and saved")

    def rollback(self, index: int, reason: str | None = None) -> str:
        who = self._require(Permission.RULES)
        rules, _ = self.change_log().rules_change(who, "rules.rollback", self._running_rules,
                                                  lambda: self.controller.rollback(index), reason)
        return noted(f"rolled back to {rules.recipe} {rules.version} (applied and saved)", self._scale_notes())

    def _scale_notes(self) -> list[str]:
        """What the running line said of the set it just applied (LineService.scale_notes), shown beside the edit."""
        service = self.controller.service
        return list(service.scale_notes) if service is not None else []

    def rules_history(self) -> list[tuple[str, str, str]]:
        """(applied at, recipe, version) of each version the running line has had, oldest first."""
        watcher = self.controller.rules
        if watcher is None:
            return []
        return [(h.at.strftime("%H:%M:%S"), h.rules.recipe, h.rules.version) for h in watcher.state.history]

    # memory
    def apply_allocation(self, allocation: Allocation, reason: str | None = None) -> str:
        who = self._require(Permission.ALLOCATION)
        log = self.change_log()
        log.ready()
        before = self.controller.allocation()
        how = self.controller.apply_allocation(allocation)
        log.record(who, Change("allocation", f"{self.setup.service.line.line}/{self.setup.service.line.station}",
                               None if before is None else asdict(before), asdict(allocation), reason))
        return how

    # camera
    def _camera(self) -> Any:
        service = self.controller.service
        return service.source.origin if service is not None else None

    def camera_frame(self) -> np.ndarray | None:
        """The newest frame the camera delivered, board or not (None: no camera, or no frame yet)."""
        newest = newest_frame(self._camera())
        return None if newest is None else newest[0]

    def camera_photo(self, out: Path) -> tuple[Path, TakenWith | None]:
        """The camera's newest frame saved in `out` as a golden photo (golden-NN.png) that says the settings the
        camera exposed it with; RuntimeError when the line has no camera frame, or its newest was under way while a
        changeover changed the exposure (the next one is sure)."""
        service = self.controller.service
        newest = newest_photo(service.source if service is not None else None)
        if newest is None:
            raise RuntimeError("the line's camera has delivered no frame: start the line on a camera first")
        if newest.unsure:
            raise RuntimeError(RETAKE)
        return save_photo(next_photo(out, "golden"), newest.image, newest.taken), newest.taken

    def apply_camera(self, settings: dict[str, Any]) -> str:
        """The station's camera settings changed (the rule set in force's own stay: app/camera_changeover.py)."""
        service = self.controller.service
        if service is None:
            raise RuntimeError("the line is not running: start it to change its camera's settings")
        who = self._require(Permission.CAMERA)
        log = self.change_log()
        log.ready()
        before, after = service.camera_sets.change_station(settings, "the camera form")
        log.record(who, Change("camera", service.source.name, before.to_json(), after.to_json()))
        return "the camera took the settings"

    def review_classes(self, expert: str) -> tuple[str, ...]:
        """The defect classes a review of `expert`'s call may name (its own where it was taught them)."""
        return review_classes(self.controller.loaded_zoo)(expert)

    # experts: versions and operating points (ui/tabs/versions.py)
    def _zoo_root(self) -> Path:
        zoo = self.controller.loaded_zoo
        if zoo is None:
            raise RuntimeError("the experts are not loaded yet: start the line")
        return zoo.root

    def expert_versions(self) -> dict[str, Any]:
        """Every trained expert's versions, as the zoo on disk holds them (what GET /experts answers)."""
        return expert_versions(Zoo.load(self._zoo_root()))["experts"]

    def _change_experts(self, kind: str, expert: str, live: Any, on_disk: Any, reason: str | None) -> str:
        """One change of what an expert serves: live on the running line (at a board boundary), else in the zoo on
        disk for the next start; recorded in the audit trail with the point before and after."""
        who = self._require(Permission.EXPERTS)
        log = self.change_log()
        log.ready()
        service = self.controller.service
        if service is not None and self.controller.phase == "running":
            before, after, where = *live(service.line), "on the running line from the next board on"
        elif self.controller.busy:
            raise RuntimeError("the line is starting or stopping: change its experts when it runs or has stopped")
        else:
            zoo = Zoo.load(self._zoo_root())
            was = entry_of(zoo, expert)
            entry = on_disk(zoo)
            before, after = serving(was), {**serving(entry), "next_start": True}
            self.controller.use_zoo(Zoo.load(zoo.root))  # the next start serves it
            where = "from the line's next start"
        log.record(who, Change(kind, expert, before, after, reason))
        return f"{expert} serves {after['weights_sha256'][:12]}, {said(after['operating'])} {where}"

    def swap_expert(self, expert: str, sha: str | None = None, rollback: bool = False, force: bool = False,
                    reason: str | None = None) -> str:
        """Serve version `sha` of `expert` (or, with `rollback`, the one served before)."""
        def live(line: Any) -> tuple[dict, dict]:
            done = swap_live(line, expert, sha, rollback, force=force)
            return ({"weights_sha256": done["from"], "operating": done["operating_from"]},
                    {"weights_sha256": done["to"], "operating": done["operating"]})
        return self._change_experts("expert.rollback" if rollback else "expert.swap", expert, live,
                                    lambda zoo: rollback_version(zoo, expert) if rollback else
                                    activate(zoo, expert, sha or "", force), reason)

    def operate_expert(self, expert: str, point: dict[str, float], reason: str | None = None) -> str:
        """Serve `expert` at operating `point`, its weights unchanged (audited as `expert.threshold`)."""
        def live(line: Any) -> tuple[dict, dict]:
            done = operate_live(line, expert, point)
            return ({"weights_sha256": done["weights_sha256"], "operating": done["operating_from"]},
                    {"weights_sha256": done["weights_sha256"], "operating": done["operating"]})
        return self._change_experts("expert.threshold", expert, live, lambda zoo: operate(zoo, expert, point), reason)

    def review(self, req: ReviewRequest) -> str:
        """Store an operator's review in this line's database (ReviewRefused when it contradicts the call)."""
        who = self._require(Permission.REVIEW)
        store = self.store()
        if store is None:
            raise RuntimeError("no results database yet: start the line first")
        log = self.change_log()
        log.ready()
        req = replace(req, reviewer=who.name)  # under the signed-in name, whatever the field said
        zoo = self.controller.loaded_zoo
        stored = record_review(store, req, classes_of(zoo) if zoo is not None else None)
        log.record(who, Change("review", f"{req.inspection_id}/{req.ref}", stored.get("before"), req.audited()))
        return f"stored: {req.ref} {req.call.replace('_', ' ')} ({stored['component_type']})"
