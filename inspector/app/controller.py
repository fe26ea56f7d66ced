"""A line an operator starts, pauses, stops and re-configures: what a front end (the dashboard) drives.

`inspector run` runs one line to its end; a dashboard starts and stops lines
at will and changes their rules and memory while they run. A LineController
owns at most one LineService and the thread that runs it. Every method
returns at once: the slow parts (training the demo zoo on first use,
profiling, draining) happen on that thread, and the front end polls
`snapshot()` on a timer. No Qt here: the dashboard is one front end of many.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..coserve.online.profile import DeviceProfile
from ..experts.zoo import Zoo
from ..results.credentials import database_url
from ..results.store import ResultStore, sqlite_url
from ..routing.rules import RuleSet, load_rules
from .allocation import Allocation, reallocate_live
from .board_switch import BoardOpener, BoardSwitch, Served
from .installed_boards import Chosen, boards_document, install_package, remove, served_folder
from .plc_link import PlcConfig, PlcLink
from .recipes import RecipeBook
from .rules_watch import RulesWatcher
from .run import RULES_DIR, demo_zoo, line_profiles, open_source, prepare_board
from .service import LineService, ServiceConfig
from .snapshot import snapshot


@dataclass(frozen=True)
class LineSetup:
    """What to run: the rule file, the source (as `inspector run --source` spells it), where results go."""

    rules_path: Path = RULES_DIR / "board_a.yaml"
    source: str = "synthetic"
    boards: int = 0  # synthetic boards; 0 = until stopped
    seed: int = 1000
    interval_s: float = 0.0
    defect_rate: float | None = 0.005
    camera: str | None = None  # synthetic boards as a camera sees them (a preset or settings: ingest/camera_model.py)
    service: ServiceConfig = ServiceConfig()
    camera_settings: dict | None = None  # a GenICam camera's settings (SFNC names: camera/settings.py)
    gate: str = "auto"  # the board gate (camera/gate.py): auto, on, off
    plc: PlcConfig | None = None  # serve the line controller (OPC UA, Modbus) while the line runs


class LineController:
    def __init__(self, models_dir: Path, data_dir: Path, db_url: str | None = None, zoo: Zoo | None = None,
                 say: Callable[[str], None] = lambda _m: None) -> None:
        self.models_dir, self.data_dir = Path(models_dir), Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.db_url = database_url(db_url, sqlite_url(self.data_dir / "results.sqlite"))
        self._zoo, self._say = zoo, say
        self.profiles: dict[str, DeviceProfile] | None = None
        self.log: deque[str] = deque(maxlen=200)
        self.phase = "idle"  # idle | preparing | running | stopping | stopped | failed
        self.error: str | None = None
        self.service: LineService | None = None
        self.rules: RulesWatcher | None = None
        self.setup: LineSetup | None = None
        self._thread: threading.Thread | None = None
        self.plc: PlcLink | None = None  # the line controller's link, when the setup asks for one
        self._book: RecipeBook | None = None  # its recipes
        self.switch: BoardSwitch | None = None  # the running line's boards: the configured one and those installed
        # told of rule changes nobody signed for here (RulesWatcher.witness); the dashboard records them
        self.witness: Callable[[str, str, str, RuleSet, RuleSet], None] | None = None
        self._lock = threading.Lock()
        self._restart: LineSetup | None = None

    # -- what the front end calls ------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, setup: LineSetup) -> None:
        """Start a line on its own thread; raises RuntimeError while one is still running or draining."""
        with self._lock:
            if self.busy:
                raise RuntimeError("a line is still running or draining; stop it and wait until it has stopped")
            self.setup, self.error, self.phase = setup, None, "preparing"
            self._thread = threading.Thread(target=self._run, args=(setup,), name="line-controller", daemon=True)
            self._thread.start()

    def pause(self) -> None:
        if self.service is not None:
            self.service.pause()

    def resume(self) -> None:
        if self.service is not None:
            self.service.resume()

    def stop(self) -> None:
        """Stop taking boards; what was accepted is inspected, the engine drains, results are flushed."""
        with self._lock:
            self._restart = None
            if self.phase == "preparing":
                self.phase = "stopping"  # the line stops as soon as it has started
            elif self.service is not None and self.phase == "running":
                self.phase = "stopping"
                self.service.request_stop()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the line thread has finished (drained and flushed); False on timeout."""
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def close(self, timeout: float | None = None) -> bool:
        """What closing the window does: stop like SIGTERM and wait for the drain and flush."""
        self.stop()
        return self.wait(timeout)

    def apply_rules(self, text: str) -> RuleSet:
        """Validate, apply to the running line and save to its rule file; ValueError (with file:line) keeps the
        running set and the file as they were."""
        if self.rules is None:
            raise RuntimeError("no line is running; start the line, or save the file for the next start")
        rules = self.rules.apply_text(text, str(self.rules.path or "<editor>"))
        if self.rules.path is not None:
            self.rules.save(text)
        return rules

    def rollback(self, index: int) -> RuleSet:
        if self.rules is None:
            raise RuntimeError("no line is running; there is no applied version to roll back to")
        return self.rules.rollback(index)

    def allocation(self) -> Allocation | None:
        return Allocation.of(self.service.line.config) if self.service is not None else None

    def apply_allocation(self, new: Allocation) -> str:
        """'live' when the engine took it at once, 'restart' when the line drains and restarts with it.

        Raises ValueError (nothing changed) when it cannot fit.
        """
        service = self.service
        if service is None or self.phase != "running":
            raise RuntimeError("no line is running; the allocation applies when it starts")
        running = Allocation.of(service.line.config)
        if new.live_over(running):
            batch_mb = reallocate_live(service.line, new)
            self.say(f"allocation applied live: expert pool {new.expert_pool_mb:.0f} MiB, "
                     f"{batch_mb:.1f} MiB of batches per executor")
            return "live"
        assert self.setup is not None
        config = replace(self.setup.service, line=new.applied_to(service.line.config))
        with self._lock:
            self._restart = replace(self.setup, service=config)
            self.phase = "stopping"
        self.say("allocation needs new executors: draining the line to restart it")
        service.request_stop()
        return "restart"

    def snapshot(self) -> dict[str, Any]:
        """The running line's snapshot (see snapshot.py) plus the controller's phase, error and log."""
        service = self.service
        out: dict[str, Any] = snapshot(service, self.rules) if service is not None else {"state": "idle"}
        if self.plc is not None and service is not None:
            out["plc"] = self.plc.snapshot()
        out["controller"] = {"phase": self.phase, "error": self.error, "log": list(self.log)[-50:],
                             "rules_path": str(self.setup.rules_path) if self.setup else None,
                             "source": self.setup.source if self.setup else None}
        return out

    def say(self, message: str) -> None:
        self.log.append(f"{time.strftime('%H:%M:%S')} {message}")
        self._say(message)

    def change_board(self, rules_path: Path, zoo: Zoo) -> RuleSet | None:
        """A taught board with its own zoo: the running line changed over to it from its next board (Line.change_board;
        its profiles measured first where the box lacks one), or a stopped one serving it from its start. The set
        when changed over live; None when it waits for the start."""
        with self._lock:
            service, watcher, running = self.service, self.rules, self.phase == "running"
        if not running or service is None or watcher is None:
            self.use_zoo(zoo)
            return None
        rules = load_rules(rules_path)
        backend = service.line.config.backend
        watcher.change_board(Path(rules_path), rules, zoo,
                             lambda: line_profiles(zoo, self.models_dir, self.say, backend, rules))
        if self._book is not None:  # the recipes: the new board's rule folder
            self._book.folders = [Path(rules_path).parent]
        self._follow(Path(rules_path), zoo)
        return rules

    def use_zoo(self, zoo: Zoo) -> None:
        """Serve `zoo` from the next start (a newly taught board brings its own experts); the line must be stopped:
        a running engine keeps the experts it profiled and loaded."""
        with self._lock:
            if self.busy:
                raise RuntimeError("stop the line first: a new board's experts are taken when the line starts")
            self._zoo, self.profiles = zoo, None

    # -- the boards installed in the data folder (app/installed_boards.py), as a kiosk serves its own ------------
    def boards(self, to_start: Path | None = None) -> dict[str, Any]:
        """Each installed board, the one served (None: the configured board) and the configured rule file: the one
        the running line started with, else `to_start` (what the next start runs)."""
        service, switch = self.service, self.switch
        configured = switch.configured[0] if switch is not None and service is not None else to_start
        doc = boards_document(self.data_dir, service.line.zoo.root if service is not None else None,
                              str(configured) if configured is not None else None)
        return {**doc, "running": service is not None and self.phase == "running"}  # none served while it is not

    def serve_board(self, name: str | None, timeout: float = 60.0) -> Served:
        """Installed board `name` (None: the configured one) served from the running line's next board on, with its
        own zoo (app/board_switch.py), and from this controller's next start."""
        switch = self._running_switch("change its board")
        done = switch.serve(name, timeout=timeout)
        self._follow(done.file, switch.line.zoo)
        return done

    def profile_board(self, name: str, timeout: float = 60.0) -> tuple[list[str], float]:
        """What installed board `name`'s first changeover would measure, measured now on the emptied line."""
        return self._running_switch("profile a board on it").profile(name, timeout=timeout)

    def install_package(self, package: Path) -> dict[str, Any]:
        """A board package (`board install --out`, carried here) installed in the data folder, not served; made
        ready for its changeover where the line runs (BoardSwitch.prepare). ValueError where the package is not
        whole or a board of its name is installed already (nothing written)."""
        service, switch = self.service, self.switch
        floor = int(service.crops.min_free_mb * 2**20) if service is not None else 0  # the line's results' room
        done = install_package(self.data_dir, Path(package), self._served_folder(), floor)
        answer = done.to_json()
        if switch is not None and self.phase == "running":
            try:
                answer["unprofiled"] = switch.prepare(done.name)
            except Exception as exc:  # noqa: BLE001 - installed all the same: its changeover prepares it, or says why
                answer["not_prepared"] = f"{type(exc).__name__}: {exc}"
        self.say(f"board {done.name} installed: recipe {done.recipe} {done.version}, not served")
        return answer

    def remove_board(self, name: str) -> Chosen:
        """Installed board `name` deleted (never the one served, nor the one chosen for the next start)."""
        served = self._served_folder()
        return remove(self.data_dir, name, served.name if served is not None else None)

    def _served_folder(self) -> Path | None:
        """The installed board's folder the line serves (None: the configured board, or no line)."""
        service = self.service
        return served_folder(self.data_dir, service.line.zoo.root) if service is not None else None

    def _running_switch(self, what: str) -> BoardSwitch:
        with self._lock:
            switch, running = self.switch, self.phase == "running"
        if switch is None or not running:
            raise RuntimeError(f"the line is not running: start it to {what}")
        return switch

    def _follow(self, rules_path: Path, zoo: Zoo) -> None:
        """The board the line serves now is the one a restart (an allocation's) and the next start take."""
        service = self.service
        with self._lock:
            self._zoo = zoo
            if service is not None:
                self.profiles = service.line.profiles
            if self.setup is not None:
                self.setup = replace(self.setup, rules_path=Path(rules_path))

    def _opener(self, backend: str) -> BoardOpener:
        """How this line opens a board: its zoo by folder, profiles measured into this controller's models folder."""
        assert self.setup is not None
        return BoardOpener(Path(self.setup.rules_path), lambda path, _rules: Zoo.load(Path(path)) if path else
                           self.zoo(), lambda zoo, rules: line_profiles(zoo, self.models_dir, self.say, backend, rules),
                           lambda zoo, rules: prepare_board(zoo, self.models_dir, self.say, backend, rules))

    # -- the line thread --------------------------------------------------------------------------
    @property
    def loaded_zoo(self) -> Zoo | None:
        """The zoo when it is loaded (never trains it): what a review's class is checked against."""
        return self._zoo

    def zoo(self) -> Zoo:
        if self._zoo is None:
            self.say("loading the demo experts (trained on first use: about 15 minutes on 2 cores)")
            self._zoo = demo_zoo(self.models_dir, self.say)
        return self._zoo

    def _run(self, setup: LineSetup) -> None:
        while setup is not None:
            try:
                self._serve(setup)
            except Exception as exc:  # noqa: BLE001 - shown to the operator; the GUI stays up
                self.error = f"{exc.__class__.__name__}: {exc}"
                self.phase = "failed"
                self.say(f"the line failed: {self.error}")
                return
            with self._lock:
                setup, self._restart = self._restart, None
                if setup is not None:
                    self.setup, self.phase = setup, "preparing"
        self.phase = "stopped"

    def _serve(self, setup: LineSetup) -> None:
        rules = load_rules(setup.rules_path)
        zoo = self.zoo()
        backend = setup.service.line.backend
        measured_for = {prof.fingerprint.get("backend", "torch") for prof in (self.profiles or {}).values()}
        if measured_for != {backend}:  # none yet, or another backend's: each backend has profiles of its own
            self.profiles = line_profiles(zoo, self.models_dir, self.say, backend, rules)
        camera = setup.camera if setup.source.startswith("synthetic") else None  # a real source is its own camera
        source = open_source(setup.source, rules, setup.boards, setup.seed, setup.interval_s, setup.defect_rate,
                             camera, gate=setup.gate, camera_settings=setup.camera_settings)
        store = ResultStore(self.db_url, connect=False)  # the line spools while the database is down
        try:
            service = LineService(rules, zoo, self.profiles, setup.service, store, self.data_dir, source,
                                  say=self.say)
            watcher = RulesWatcher(service.line, setup.rules_path, say=self.say)
            watcher.witness = self.witness  # a rule file edited on disk, a PLC's changeover: recorded by the owner
            self.service, self.rules = service, watcher
            self._book = RecipeBook(watcher, [Path(setup.rules_path).parent])
            # the boards installed in the data folder (`board install`), served live as a kiosk serves them
            self.switch = BoardSwitch(self._book, self.data_dir, self._opener(backend), (str(setup.rules_path),
                                                                                        str(zoo.root)), self.say)
            if setup.plc is not None and setup.plc.enabled:
                plc = PlcLink(setup.plc, setup.service.line.station)
                plc.attach(service, self._book)
                plc.start()
                plc.station.set_health("ok", True)
                self.plc = plc
            service.start()
            watcher.start()
            with self._lock:
                if self.phase == "preparing":
                    self.phase = "running"
                else:  # stopped while preparing
                    service.request_stop()
            self.say(f"inspecting {source.name} with {rules.recipe} ({rules.version}), policy "
                     f"{setup.service.line.policy}")
            service.run()
            watcher.stop()
            if self.plc is not None:
                self.plc.stop()
            w = service.writer.status()
            self.say(f"line stopped: {service.line.stats.boards} boards, {w.written} stored, {w.spooled} spooled")
        finally:
            store.close()
