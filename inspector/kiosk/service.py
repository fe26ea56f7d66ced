"""The Kiosk: a LineService kept alive headless, with endpoints, watchdog and a clean SIGTERM.

Lifecycle: start the line, the rule watcher and the endpoints, tell systemd
READY; ping the watchdog every half interval while the line is not stalled
(boards inside and none finishing), so a hung engine gets the service
restarted and an idle line does not; on SIGHUP re-read the config file and the
rule file (what cannot change live is named, and waits for a restart); on SIGTERM or SIGINT stop the source,
inspect what was accepted, drain, flush, tell systemd STOPPING, exit 0. A
source that fails for good (a camera gone after its reconnects) exits 1 so
that systemd restarts the service.
"""
from __future__ import annotations

import faulthandler
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..access.gate import Gate
from ..access.tls import server_context
from ..access.users import UserBook
from ..app.board_switch import BoardOpener, BoardSwitch
from ..app.plc_link import PlcLink
from ..app.product_changeover import ProductChangeover
from ..app.recipes import RecipeBook, forget_in_force, save_in_force
from ..app.rules_watch import RulesWatcher
from ..app.run import progress_line
from ..app.service import LineService
from ..app.snapshot import snapshot
from ..routing.rules import RuleSet
from . import routes as api
from .audit_api import AuditApi
from .boards import Boards
from .camera_control import CameraControl
from .control import Control
from .health import health
from .http import Endpoints
from .lending import Lender
from .metrics import line_registry
from .results_api import ResultsApi
from .revisions import Revisions
from .sign_in import SignIn
from .systemd import Notifier


@dataclass(frozen=True)
class KioskConfig:
    listen: str = "127.0.0.1:9108"
    stall_s: float = 60.0  # boards inside and none finished this long: stalled (503, no watchdog ping)
    log_every_s: float = 30.0
    rules_poll_s: float = 2.0
    silent_s: float | None = None  # no image for this long: degraded (a camera's feed, a scanner gone quiet)
    token: str | None = None  # the box's service token (machine routes only); people sign in with their own
    tls_cert: str | None = None  # certificate and key: the API serves HTTPS (required off loopback)
    tls_key: str | None = None
    tls_client_ca: str | None = None  # also demand client certificates signed by this CA
    session_hours: float = 12.0  # how long a dashboard's sign-in lasts
    plain_listen: str | None = None  # also plain HTTP here (loopback only), for this box's own clients
    llm_mb: float = 0.0  # memory set aside for a language model beside the line, lent on a lease (runtime/grants)
    lease_s: float = 15.0  # a grant not renewed for this long is taken back
    camera_settings: str | None = None  # the camera's settings file, rewritten when settings change over the API


LIVE_FIELDS = ("stall_s", "log_every_s", "silent_s")  # what a reload (SIGHUP) changes in a running kiosk


@dataclass(frozen=True)
class Reread:
    """The configuration as the files say now (SIGHUP): the kiosk's part, the rule file, what needs a restart."""

    config: KioskConfig
    rules_path: str | None
    restart: tuple[str, ...] = ()  # options that changed but take effect only at the next start
    zoo: str | None = None  # the zoo the configuration names now (an installed board's where one is chosen)


class Kiosk:
    def __init__(self, service: LineService, config: KioskConfig, rules_path: str | None = None,
                 publisher: Any = None, notifier: Notifier | None = None,
                 say: Callable[[str], None] = lambda _m: None, data_dir: Path | None = None,
                 reread: Callable[[], Reread] | None = None, plc: PlcLink | None = None,
                 configured: str | None = None, board_config: tuple[str | None, str | None] | None = None,
                 opener: BoardOpener | None = None) -> None:
        self.service, self.config, self.publisher, self.say = service, config, publisher, say
        self.plc = plc
        self.reread = reread
        self.notifier = notifier or Notifier()
        self.data_dir = data_dir or Path(".")
        # the rule file the configuration names; `rules_path` may be another of its folder, put in force by the last
        # changeover (app/recipes.py in_force)
        self.configured = configured or rules_path
        self.board_rules = self.configured  # the main rule file of the board served: a changeover is kept against it
        self.rules = RulesWatcher(service.line, rules_path, config.rules_poll_s, say)
        self.control = Control(service, self.rules, self.data_dir, say)
        folders = [Path(rules_path).parent] if rules_path and Path(rules_path).is_file() else []
        self.recipes = RecipeBook(self.rules, folders, self._keep)
        if plc is not None:
            plc.attach(service, self.recipes)
        self.products = ProductChangeover(self.recipes) if service.handoff is not None and \
            service.handoff.config.follow_product else None
        service.products = self.products
        self.revisions = Revisions(service, self.rules, self.recipes, self.control, say)
        # (rules, zoo) as the configuration names them: an installed board chosen for the next start is kept against
        # them (app/installed_boards.py), whichever board the kiosk started with
        rules_config, zoo_config = board_config or (self.configured, str(service.line.zoo.root))
        switch = BoardSwitch(self.recipes, self.data_dir, opener, (rules_config, zoo_config), say,
                             self._moved) if opener is not None else None
        self.boards = Boards(service, self.control, self.data_dir, rules_config, zoo_config, say, switch)
        self.lender = Lender(service.line.engine.executors[0].device.key, config.llm_mb, config.lease_s, say) \
            if config.llm_mb > 0 else None
        lending = self.lender.routes() if self.lender is not None else {}
        self.camera = CameraControl(service, config.camera_settings, self.control.log)
        users = UserBook(service.store.engine, self.control.log.trail)
        tls = server_context(config.tls_cert, config.tls_key, config.tls_client_ca) \
            if config.tls_cert and config.tls_key else None
        if bool(config.tls_cert) != bool(config.tls_key):
            raise ValueError("give both --tls-cert and --tls-key (or neither)")
        gate = Gate(users, config.token)
        sign_in = SignIn(users, config.session_hours, gate)
        registry = line_registry(self.snapshot, service.line.config.line, service.line.config.station)
        routes = dict(
            reads=api.reads({"/rules": self.control.rules_document, "/reviews": self.control.review_document,
                             "/experts": self.control.experts_document, "/camera": self.camera.document,
                             "/camera/frame": self.camera.frame, "/camera/photo": self.camera.photo,
                             "/boards": self.boards.document,
                             **({"/ledger": self.lender.snapshot} if self.lender is not None else {})}),
            posts=api.posts({"/rules": self.control.submit_rules, "/rules/rollback": self.control.rollback,
                             "/rules/alternates": self.control.approve_alternate,
                             "/rules/revise": self.revisions.revise, "/rules/changeover": self.revisions.changeover,
                             "/boards/install": self.boards.install, "/boards/next": self.boards.next_start,
                             "/boards/serve": self.boards.serve, "/boards/profile": self.boards.profile,
                             "/boards/remove": self.boards.remove,
                             "/allocation": self.control.allocation, "/reviews": self.control.review,
                             "/experts/swap": self.control.swap_expert,
                             "/experts/operating": self.control.operate_expert,
                             "/experts/install": self.control.install_expert,
                             "/camera/settings": self.camera.apply_settings,
                             "/auth/sign-in": sign_in, "/auth/sign-out": sign_in.sign_out, **lending}),
            gate=gate,
            guarded={"/results/": ResultsApi(service.store, service.line.config.scope, service.crops.root).get,
                     "/audit/": AuditApi(self.control.log.trail).get},
            limits=api.limits(), streams=api.streams())
        self.endpoints = Endpoints(config.listen, registry, self.snapshot, self.health, tls=tls, **routes)
        # the same routes in plain HTTP on loopback, for this box's own clients (the model server's lease, a local
        # scrape) beside a TLS listener; refused anywhere but loopback
        self.local = Endpoints(config.plain_listen, registry, self.snapshot, self.health, **routes) \
            if config.plain_listen else None
        self._done = threading.Event()
        self._stop_lock = threading.Lock()
        self._stopping = False

    def _moved(self, rules: Path) -> None:
        """The line serves another board (app/board_switch.py): `rules` its main rule file."""
        self.board_rules = str(rules)

    def _keep(self, path: Path, rules: RuleSet) -> None:
        """A changeover's rule file, in force again at the next start while the configuration names the same."""
        if self.board_rules:
            try:
                save_in_force(self.data_dir, Path(self.board_rules), path, rules)
            except OSError as exc:
                self.say(f"warning: the changeover to {path.name} is not kept for the next start ({exc})")

    def snapshot(self) -> dict[str, Any]:
        out = snapshot(self.service, self.rules, self.publisher)
        if self.plc is not None:
            out["plc"] = self.plc.snapshot()
        if self.service.handoff is not None:  # the Hermes lanes: connected, boards taken and handed on
            out["hermes"] = self.service.handoff.snapshot()
            if self.products is not None:  # the products that changed the line over, and those it could not serve
                out["hermes"]["products"] = self.products.snapshot()
        out["late"] = {"rejected": self.service.rejected_late + self.service.line.stats.late_refused,
                       "inspected": self.service.inspected_late}
        out["reviews"] = {name: r.to_json() for name, r in self.control.rates.get().items()}
        out["audit"] = self.control.audit_head()
        if self.lender is not None:
            out["ledger"] = self.lender.snapshot()
        return out

    def health(self) -> dict[str, Any]:
        return health(self.snapshot(), self.service.line.stalled_for(), self.config.stall_s, self.config.silent_s)

    def stop(self, reason: str = "stop requested") -> None:
        """Begin the clean stop (safe from any thread); `serve` returns once drained and flushed."""
        with self._stop_lock:
            if self._stopping or self._done.is_set():
                return
            self._stopping = True
        self.say(f"stopping: {reason}; draining accepted boards and flushing results")
        self.notifier.stopping(f"draining: {reason}")
        self.service.request_stop()

    def reload(self) -> None:
        """SIGHUP (systemctl reload): the config file and the rule file again; what cannot change live is named."""
        self.notifier.reloading("reloading the config and the rules")
        try:
            moved = None  # the rule file, when the config now names another one
            if self.reread is not None:
                fresh = self.reread()
                live = {f: getattr(fresh.config, f) for f in LIVE_FIELDS
                        if getattr(fresh.config, f) != getattr(self.config, f)}
                self.config = replace(self.config, **live)
                for name, value in live.items():
                    self.say(f"reload: {name} is now {value}")
                served = Path(self.service.line.zoo.root).resolve()
                for name in fresh.restart:
                    if name == "--zoo" and fresh.zoo and Path(fresh.zoo).resolve() == served:
                        continue  # the board served since a live changeover (app/board_switch.py)
                    self.say(f"warning: reload: {name} changed; it takes effect at the next start "
                             f"(systemctl restart inspector-kiosk)")
                if fresh.rules_path and fresh.rules_path != str(self.board_rules):  # not a changeover's file
                    self.say(f"reload: rules from {fresh.rules_path}")
                    moved = Path(fresh.rules_path)
                    self.configured = self.board_rules = fresh.rules_path
                    forget_in_force(self.data_dir)
            self.rules.reload(moved)
        except (ValueError, OSError) as exc:  # a bad config file: the running configuration stays
            self.say(f"error: reload refused, the running configuration stays: {exc}")
        finally:
            self.notifier.ready(f"inspecting {self.service.line.rules.recipe}")

    def serve(self) -> int:
        """Run until stopped or the source ends; the exit code for the process."""
        self._install_signals()
        if self.plc is not None:
            self.plc.start()
        self.service.start()
        self._tell_plc()
        self.rules.start()
        self.endpoints.start()
        if self.local is not None:
            self.local.start()
        changes = "signed-in users' tokens" + (", the service token" if self.config.token else "")
        self.say(f"kiosk serving {self.service.line.rules.recipe} on {self.endpoints.url}"
                 f"{f' and {self.local.url}' if self.local is not None else ''} "
                 f"(/metrics /health /status /rules; changes {changes})")
        self.notifier.ready(f"inspecting {self.service.line.rules.recipe}")
        beat = threading.Thread(target=self._heartbeat, name="kiosk-heartbeat", daemon=True)
        beat.start()
        try:
            self.service.run()
        finally:
            self._done.set()
            self.rules.stop()
            self.endpoints.stop()
            if self.local is not None:
                self.local.stop()
            beat.join(2.0)
            if self.plc is not None:  # after the drain: the PLC heard every verdict of the boards accepted
                self.plc.stop()
        error = self.service.queue.counters.source_error or self.service.source.counters.gave_up
        status = self.service.writer.status()
        self.say(f"stopped: {self.service.line.stats.boards} boards, {status.written} stored, "
                 f"{status.spooled} spooled for the next start")
        if error:
            self.say(f"error: source failed: {error}")
            return 1
        return 0

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # embedded (tests, GUI): the owner calls stop()
        faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1`: every thread's stack to the journal

        def handle(signum: int, _frame: Any) -> None:
            name = signal.Signals(signum).name
            threading.Thread(target=self.stop, args=(name,), daemon=True).start()

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)
        signal.signal(signal.SIGHUP, lambda _s, _f: threading.Thread(target=self.reload, daemon=True).start())

    def _tell_plc(self) -> None:
        """The station's Health, Ready and Recipe tags follow the line's."""
        if self.plc is None:
            return
        status = self.health()["status"]
        self.plc.station.set_health(status, self.service.running and not self.service.paused
                                    and status in ("ok", "degraded"))
        self.plc.station.set_recipe(self.service.line.rules.recipe)

    def _heartbeat(self) -> None:
        interval = self.notifier.watchdog_s / 2 if self.notifier.watchdog_s else 1.0
        last_log = time.monotonic()
        while not self._done.wait(interval):
            self._tell_plc()
            # a line waiting for disk space is not hung: a restart would not free the disk, and would drop the
            # results held in memory (the folder's images stay, a camera's frames would not)
            if self.service.writer.disk_full:
                if self.notifier.watchdog_s:
                    self.notifier.watchdog()
                self.notifier.status(f"CRITICAL: {self.health()['reasons'][0]}")
            elif self.service.line.stalled_for() <= self.config.stall_s:
                if self.notifier.watchdog_s:
                    self.notifier.watchdog()
            else:
                self.notifier.status(f"STALLED: {self.health()['reasons'][0]}")
            if time.monotonic() - last_log >= self.config.log_every_s:
                last_log = time.monotonic()
                line = progress_line(self.service.line)
                self.say(line)
                self.notifier.status(line)
