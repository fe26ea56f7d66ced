"""The Line: one rule set over one engine, boards in, board records out to the result writer and sinks.

Every crop of a board becomes a request; the engine hands each finished
request back (`Engine.on_result`), the part's verdict is worked out, and when
a board's last part is in, its record goes to the writer (database) and to
the sinks (MQTT, GUI). Boards overlap in the engine, which is what lets the
scheduler group same-expert parts across boards; at most `max_in_flight`
boards are inside at once, so a fast source waits instead of filling memory.

A new rule set applies between boards without a restart (`apply_rules`):
boards already inside finish under the set they were cut with, the engine
keeps its resident experts and takes the new usage probabilities. New weights
of one expert (a retrained version, a rollback) apply the same way
(`swap_weights`). Another board with its own zoo takes the line over at a board
boundary with an engine of its own (`change_board`).
"""
from __future__ import annotations

import itertools
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

import cv2
import numpy as np

from ..board.presence import crop_shares, overrule
from ..coserve.online.engine import Engine, EngineStats
from ..coserve.online.executor_plan import build_plan, devices_of
from ..coserve.online.policies import get_policy
from ..coserve.online.profile import DeviceProfile
from ..coserve.online.request import Request, RequestResult
from ..coserve.online.workload import MiB, Workload
from ..experts.backends import get_backend
from ..experts.zoo import ExpertEntry, Zoo
from ..ingest.alternates import alternate_windows
from ..ingest.bad_marks import marked_boards
from ..ingest.board_codes import read_board_codes, unit_serials
from ..ingest.compare import box_in_crop, cut_differences, difference_tensors
from ..ingest.crops import BoardSizeMismatch, Crop, check_board, crop_tensors, cut_board
from ..ingest.golden import composed_tensors, golden_image
from ..ingest.identity import CodeRead, noread_serial, read_code
from ..ingest.photometric import INPUT_VERSION
from ..ingest.registration import Registration, RegistrationFailed, register
from ..ingest.transform_watch import TransformWatch
from ..results.records import BoardRecord
from ..results.scope import Scope
from ..results.units import board_verdicts
from ..routing.rules import RuleSet
from .board_photos import photo_registration_of, register_photo
from .comparisons import check_comparisons, golden_types
from .histogram import BOARD_BUCKETS_S, PART_BUCKETS_S, Histogram, nearest_rank
from .verdict import part_verdict

BoardSink = Callable[[BoardRecord], None]
AUTHORITATIVE = ("sidecar", "filename", "upstream")  # serial origins the line keeps without reading the code
LATE = "late: its deadline passed before the line could take it (rejected by the fail-safe, not inspected)"
LATENCY_WINDOW = 512  # results the latency percentiles are taken over
T = TypeVar("T")


@dataclass(frozen=True)
class LineConfig:
    line: str = "line-1"
    station: str = "aoi-1"
    policy: str = "coserve"
    device_mb: float = 160.0  # experts + batches on the main device
    max_in_flight: int = 4  # boards inside the engine at once
    expert_pool_mb: float | None = None  # None: 75% of device_mb (the casual split); the rest is batches
    executors: int | None = None  # executors on the main device; None: one per core on a CPU box
    register: bool = True  # register boards on their recipe's fiducials (False: cut at nominal positions)
    backend: str = "torch"  # what runs a loaded expert: torch, or onnxruntime (experts/backends)

    @property
    def scope(self) -> Scope:
        """This line's and station's boards in a database other lines may share."""
        return Scope(self.line, self.station)

    @property
    def pool_mb(self) -> float:
        return self.expert_pool_mb if self.expert_pool_mb is not None else 0.75 * self.device_mb


def rules_workload(rules: RuleSet, config: LineConfig, profiles: dict[str, DeviceProfile]) -> Workload:
    """The engine's view of a rule set: component types, counts per board, routes, budget, executors
    (a count in the config is for the main device of `profiles`)."""
    pool, device_mb = config.pool_mb, config.device_mb
    main_is_cuda = bool(profiles) and devices_of(profiles)[0].is_cuda
    if pool >= device_mb:
        raise ValueError(f"an expert pool of {pool:.0f} MiB leaves no batch memory in a device of {device_mb:.0f} MiB; "
                         f"make the pool smaller or the device memory larger")
    return Workload(
        name=rules.recipe, seed=rules.seed, classifier=rules.classifier_spec,
        detectors=rules.detectors,
        components=tuple(c.kind for c in rules.components),
        requests=len(rules.placements()), arrival_interval_s=0.0, expert_pool_bytes=int(pool * MiB),
        cpu_pool_bytes=int(pool * MiB), host_cache_bytes=2048 * MiB, batch_bytes=None,
        source=rules.source, device_bytes=int(device_mb * MiB), pool_fixed=False,
        executors={} if config.executors is None else {"cuda" if main_is_cuda else "cpu": config.executors},
        executors_fixed=config.executors is not None,
    )


@dataclass
class _Pending:
    record: BoardRecord
    remaining: int
    rules: RuleSet
    parts: dict[int, Crop] = field(default_factory=dict)
    shares: dict[int, float | None] = field(default_factory=dict)  # presence check: body contrast kept (presence.py)
    admitted_at: float = field(default_factory=time.monotonic)  # into the engine
    alternates: dict[str, str] = field(default_factory=dict)  # REF -> the approved make's window it was compared with


@dataclass
class LineStats:
    boards: int = 0
    parts: int = 0
    board_verdicts: Counter = field(default_factory=Counter)
    panel_board_verdicts: Counter = field(default_factory=Counter)  # the boards of panels, each by its own verdict
    defects: Counter = field(default_factory=Counter)
    rejected_boards: int = 0  # images refused before inspection (unreadable, wrong size): board-level errors
    registration_failed: int = 0  # boards stored with one board-level error instead of part verdicts
    residual_px_max: float = 0.0  # the largest registration residual of a board inspected
    residual_px_sum: float = 0.0  # over the boards registered, for the mean
    registered: int = 0
    serials_read: int = 0  # boards whose serial was read from their own code
    noreads: int = 0  # boards whose code could not be read (NOREAD)
    noread_refused: int = 0  # ... of which refused by the rule set's on_noread
    late_refused: int = 0  # boards whose deadline passed while they waited for room in the engine: not inspected
    identity_mismatches: int = 0  # boards (or a panel's boards) whose own code read another serial than upstream gave
    bad_marks: int = 0  # boards of panels read as x-outs on their bad-mark pads: not inspected
    unit_serials_read: int = 0  # boards of panels whose own code was read
    unit_noreads: int = 0  # ... whose own code was not read, read twice or contradicted upstream (NOREAD-<id>-<k>)
    alternates: Counter = field(default_factory=Counter)  # REF -> parts compared with an approved alternate's window
    first_error: str | None = None  # the first board-level error's reason (what a run that inspected nothing says)

    @property
    def inspected(self) -> int:
        """Boards that got part verdicts (the others are stored with one board-level error)."""
        return self.boards - self.board_verdicts["error"]

    def count_panel(self, record: BoardRecord) -> None:
        """A panel's boards, each by its own verdict (results/units.py); nothing for a board that is no panel."""
        if record.panel_boards:
            self.panel_board_verdicts.update(board_verdicts(record.panel_boards, record.parts, record.error,
                                                            record.panel_skipped).values())

    def add_registration(self, residual_px: float) -> None:
        """A board registered (on its fiducials, or photographed and registered on its outline, points or golden
        board) with this residual."""
        self.registered += 1
        self.residual_px_sum += residual_px
        self.residual_px_max = max(self.residual_px_max, residual_px)

    @property
    def residual_px_mean(self) -> float | None:
        return self.residual_px_sum / self.registered if self.registered else None


class Line:
    def __init__(self, rules: RuleSet, zoo: Zoo, profiles: dict[str, DeviceProfile], config: LineConfig,
                 sinks: list[BoardSink] | None = None) -> None:
        check_served(rules, zoo)
        # Registration and cutting are small OpenCV calls on the ingest thread; OpenCV's own thread pool would spin
        # on every core the engine's torch threads need (on 2 cores it cost the line ~15% of its parts/s).
        cv2.setNumThreads(1)
        self.rules, self.zoo, self.config = rules, zoo, config
        self.sinks = list(sinks or [])
        self.on_rules: list[Callable[[RuleSet], None]] = []  # told of each set before its first board (its text kept)
        # the station set up for a set before its first board (its camera's settings): each returns how to undo it,
        # and a ValueError refuses the set with nothing changed
        self.set_ups: list[Callable[[RuleSet], Callable[[], None]]] = []
        self.profiles = profiles
        self.engine = self._engine_for(rules, zoo, profiles)
        self._engines_before = EngineStats()  # what the engines of the boards served before this one counted
        self._ids = itertools.count()
        self._lock = threading.Condition()
        self._pending: dict[int, _Pending] = {}  # request id -> its board
        self._boards_in = 0
        self._held = 0  # swaps waiting at a board boundary: no new board goes in meanwhile
        self._served = 0  # counts the boards (zoos) this line served: a board cut for another is cut again
        self._changing = threading.Lock()  # one swap or change of board at a time: each stops what the other uses
        self.stats = LineStats()
        self.started = time.perf_counter()
        self.last_progress = time.monotonic()  # last board finished, or work arriving at an idle line
        self.last_finished: float | None = None  # time.monotonic() of the last board finished
        self._part_latency: deque[float] = deque(maxlen=LATENCY_WINDOW)  # seconds, arrival -> result
        self._board_latency: deque[float] = deque(maxlen=LATENCY_WINDOW)  # seconds, cut -> last part's result
        self._engine_s: deque[float] = deque(maxlen=32)  # seconds, into the engine -> last part's result
        self._part_hist, self._board_hist = Histogram(PART_BUCKETS_S), Histogram(BOARD_BUCKETS_S)
        self.last_finished_at: float | None = None  # time.time() of the last board finished (a timestamp)
        self.transform_watch = TransformWatch()  # whether the boards' marks say the camera is tilted (said once)

    def _engine_for(self, rules: RuleSet, zoo: Zoo, profiles: dict[str, DeviceProfile]) -> Engine:
        """An engine for `rules` over `zoo`, planned for this line's allocation, its pools filled by usage."""
        workload = rules_workload(rules, self.config, profiles)
        policy = get_policy(self.config.policy)
        plan = build_plan(workload, policy, profiles)
        backend = get_backend(self.config.backend, threads=max((s.threads for s in plan.executors), default=1))
        engine = Engine(zoo, rules.usage(), policy, plan, profiles, backend)
        engine.on_result = self._on_result
        engine.place_by_usage()
        return engine

    @property
    def board_changes(self) -> int:
        """Changeovers to another board with its own zoo since the line started (change_board)."""
        return self._served

    def engine_stats(self) -> EngineStats:
        """The engine's counts since the line started, over every board it served (a change of board starts an
        engine of its own)."""
        return self._engines_before.plus(self.engine.stats())

    def stalled_for(self) -> float:
        """Seconds boards have been inside without one finishing; 0 when idle or flowing."""
        with self._lock:
            return time.monotonic() - self.last_progress if self._boards_in else 0.0

    def check_rules(self, rules: RuleSet) -> None:
        """ValueError when this line's zoo lacks an expert `rules` names (nothing is applied)."""
        check_rule_set(rules, self.zoo)

    def apply_rules(self, rules: RuleSet) -> None:
        """Use `rules` for every board from now on; raises ValueError (and keeps the running set) when the
        zoo lacks one of its experts or the station cannot be set up for it (its camera refused its settings)."""
        check_served(rules, self.zoo)
        self._set_up(rules)
        for hook in self.on_rules:
            hook(rules)
        with self._lock:
            self.rules = rules
            self.engine.set_usage(rules.usage())

    def _set_up(self, rules: RuleSet) -> Callable[[], None]:
        """The station set up for `rules` (set_ups, in order); how to undo it. ValueError from one: those done are
        undone, in reverse, and it propagates."""
        done: list[Callable[[], None]] = []

        def undo() -> None:
            for step in reversed(done):
                step()

        try:
            for set_up in self.set_ups:
                done.append(set_up(rules))
        except Exception:
            undo()
            raise
        return undo

    def swap_weights(self, entry: ExpertEntry, timeout: float = 60.0) -> None:
        """Serve `entry` (a new version of one expert's weights, or its weights at a new operating point) from the
        next board on, without a restart.

        At a board boundary: new boards wait while the boards inside that still have a part for this expert
        finish under the old weights; then the engine drops the old weights and the held boards go in. So every
        board is inspected by one version of each expert, and each result names the hash it was given with.
        TimeoutError (nothing changed, boards flow again) when those boards do not finish within `timeout`.
        """
        name = entry.name
        with self._changing, self._holding():
            with self._lock:
                if not self._lock.wait_for(lambda: not self._routes_to(name), timeout):
                    raise TimeoutError(f"boards using {name} did not finish within {timeout:g} s; weights not swapped")
            # outside the line's lock: results of other boards keep arriving while the engine lets go of the expert
            self.engine.replace_weights(name, entry, timeout)

    def change_board(self, rules: RuleSet, zoo: Zoo, profiles: Callable[[], dict[str, DeviceProfile]],
                     timeout: float = 60.0) -> None:
        """Serve another board, `rules` with its own `zoo`, from the next board on, without a restart.

        At a board boundary: new boards wait while every board inside finishes on the board it was cut for; then
        the station is set up for it (`set_ups`: its camera's settings; refused, nothing changed), the old engine
        stops (its experts leave memory), `profiles()` gives the new zoo's device profiles (measured now, on a line
        with nothing inside, where the box lacks one of its architectures), and the new board's engine starts with
        its pools filled by usage. A board cut for the old board meanwhile is cut again for the new one. When the
        new engine cannot start, the set-up is undone, the old board's engine starts again and ValueError says why:
        the line serves what it served. TimeoutError (nothing changed, boards flow again) when the boards inside do
        not finish within `timeout`.
        """
        check_served(rules, zoo)
        with self._emptied(timeout):
            undo = self._set_up(rules)  # ValueError: refused before the old engine stops, nothing changed
            self._stop_engine()
            engine: Engine | None = None
            try:
                measured = profiles()
                engine = self._engine_for(rules, zoo, measured)
                engine.start()
            except Exception as exc:  # noqa: BLE001 - whatever stops the new board, the old one is served again
                if engine is not None:  # its pools and executors let go
                    engine.stop()
                undo()
                self._restart_engine()
                raise ValueError(f"{rules.recipe} cannot be served ({type(exc).__name__}: {exc}); the line serves "
                                 f"{self.rules.recipe} again") from exc
            with self._lock:
                self.rules, self.zoo, self.engine, self.profiles = rules, zoo, engine, measured
                self._served += 1
            for hook in self.on_rules:  # before the first board of the new one goes in
                hook(rules)

    def measure_quietly(self, measure: Callable[[], T], timeout: float = 60.0) -> T:
        """What `measure()` returns, run on an empty line: new boards wait, those inside finish, the engine lets go
        of its experts (their memory is the measurement's, as at a changeover), and starts again with its pools
        filled by usage. TimeoutError (nothing measured, boards flow again) when the boards inside do not finish
        within `timeout`."""
        with self._emptied(timeout):
            self._stop_engine()
            try:
                return measure()
            finally:
                self._restart_engine()

    @contextmanager
    def _emptied(self, timeout: float) -> Iterator[None]:
        """One change at a time, no new board in, every board inside finished (TimeoutError where they do not
        within `timeout`: nothing changed, boards flow again)."""
        with self._changing, self._holding():
            with self._lock:
                if not self._lock.wait_for(lambda: not self._boards_in, timeout):
                    raise TimeoutError(f"the {self._boards_in} board(s) inside did not finish within {timeout:g} s; "
                                       f"the line serves {self.rules.recipe} still")
            yield

    def _stop_engine(self) -> None:
        """The engine stops (its experts leave memory); its counts go on in the line's."""
        self.engine.stop()
        self._engines_before = self._engines_before.plus(self.engine.stats())

    def _restart_engine(self) -> None:
        """An engine for the board in force started again after `_stop_engine`, its pools filled by usage."""
        self.engine = self._engine_for(self.rules, self.zoo, self.profiles)
        self.engine.start()

    @contextmanager
    def _holding(self) -> Iterator[None]:
        """No new board goes in meanwhile (boards inside go on)."""
        with self._lock:
            self._held += 1
        try:
            yield
        finally:
            with self._lock:
                self._held -= 1
                self._lock.notify_all()

    def _routes_to(self, expert: str) -> bool:
        """A part still inside routes to `expert` (under the lock)."""
        return any(expert in (p.parts[rid].component.classifier, p.parts[rid].component.detector)
                   for rid, p in self._pending.items())

    def start(self) -> None:
        self.engine.start()
        self.started = time.perf_counter()

    def _record(self, serial: str, source: str, inspection_id: str | None) -> BoardRecord:
        rules, now = self.rules, datetime.now(timezone.utc)
        record = BoardRecord(serial, rules.recipe, rules.version, now, now, self.config.line, self.config.station,
                             source, panel_boards=rules.panel.boards if rules.panel is not None else None)
        if inspection_id:
            record.inspection_id = inspection_id
        return record

    def inspect(self, image: np.ndarray, serial: str, source: str = "", inspection_id: str | None = None,
                serial_origin: str = "synthetic", registration: Registration | None = None,
                code: CodeRead | None = None, rules_version: str | None = None, in_frame: bool = False,
                expires_at: float | None = None, skip_boards: frozenset[int] = frozenset(),
                unit_serials: dict[int, str] | None = None) -> None:
        """Cut one board and hand its parts to the engine; waits while `max_in_flight` boards are inside.

        An image that does not fit the layout, or a board that cannot be registered on its fiducials, is
        finished at once with one board-level error and no part verdicts. The board's serial is read from its
        code when the rule set has one (identity.py), unless the source vouches for its own (a sidecar, a file
        name pattern). `registration` and `code`, when a board gate already worked them out under the rule set
        of version `rules_version`, are used as they are. A rule set with photo registration finds the board in the
        frame first, unless `in_frame` says the image is already in the recipe's pixels (board check's boards).
        A board that, given room in the engine, would still be inside at `expires_at` (time.monotonic(): its line
        controller's deadline, judged by the engine's recent boards) is not inspected: the controller rejects it
        at its deadline anyway, so it is finished as rejected late and the line's time goes to the boards behind.
        On a panel, the boards in `skip_boards` (x-outs the machine before marked skip or missing) are not inspected:
        their parts are left out of the result, and the record names them (`panel_skipped`). Its other boards are
        identified by their own codes where the rule set gives them, or by `unit_serials` the machine before handed on.
        """
        with self._lock:  # a board that comes in while the line changes boards is cut for the board served next
            self._lock.wait_for(lambda: not self._held)
            rules, served, original = self.rules, self._served, image
        record = self._record(serial, source, inspection_id)
        record.serial_source = serial_origin
        if rules.panel is not None and skip_boards:  # x-outs: named whatever becomes of the board
            record.panel_skipped = sorted(k for k in skip_boards if 1 <= k <= rules.panel.boards)
        fresh = rules_version == rules.version
        composite = golden_types(rules, self.zoo)  # the types that compare with the golden board
        photo = None
        if rules.photo is not None and not in_frame and self.config.register:  # found in the frame, warped
            try:
                image, photo = register_photo(image, rules, golden_image(rules) if rules.golden else None,
                                              light=bool(composite))
            except ValueError as exc:  # RegistrationError, or a file the rule set names gone since it was applied
                self.stats.registration_failed += 1
                self._finish_with_error(record, f"registration failed: {exc}")
                return
            record.residual_px = photo.residual_px
        try:
            check_board(image, rules)
        except BoardSizeMismatch as exc:
            self.stats.rejected_boards += 1
            self._identify(record, image, rules, None, None, serial_origin)
            self._finish_with_error(record, str(exc))
            return
        if not (fresh and registration is not None) and rules.fiducials is not None and self.config.register:
            try:
                registration = register(image, rules.fiducials)
            except RegistrationFailed as exc:
                self._watch_marks(rules, exc.found, refused=True)
                self.stats.registration_failed += 1
                self._identify(record, image, rules, None, None, serial_origin)  # read where it should lie
                self._finish_with_error(record, str(exc))
                return
        if not self.config.register or rules.fiducials is None:
            registration = None
        if registration is not None:
            self._watch_marks(rules, registration.found, refused=False)
            record.transform, record.residual_px = registration.matrix, registration.residual_px
            record.fiducials = dict(registration.found)
        refused = self._identify(record, image, rules, registration, code if fresh else None, serial_origin)
        if refused:
            self.stats.noread_refused += refused.startswith("NOREAD")
            self._finish_with_error(record, refused)
            return
        if rules.panel is not None and rules.panel.bad_marks is not None:  # x-outs the board maker marked
            try:
                marked = marked_boards(image, rules.panel.bad_marks,
                                       registration.homography if registration is not None else None,
                                       golden_image(rules) if rules.golden else None)
            except ValueError as exc:  # a golden image gone since the set was applied
                self._finish_with_error(record, str(exc))
                return
            self.stats.bad_marks += len(marked)
            record.panel_skipped = sorted(set(record.panel_skipped) | set(marked))
        if rules.panel is not None and (rules.panel.codes or unit_serials):
            refused = self._identify_units(record, image, rules, registration, unit_serials or {})
            if refused:
                self.stats.noread_refused += 1
                self._finish_with_error(record, refused)
                return
        if rules.compare is not None:  # a bare board: its parts are its differences from the golden board
            try:
                crops = _inspected(cut_differences(image, rules), record, rules)
            except ValueError as exc:  # a golden image gone or of another size since the set was applied
                self._finish_with_error(record, str(exc))
                return
            tensors = difference_tensors(crops, composite)
            shares: list[float | None] = [None] * len(crops)
            makes: dict[str, str] = {}
        else:
            crops = _inspected(cut_board(image, rules, registration), record, rules)
            try:
                tensors, matched = composed_tensors(crops, crop_tensors(crops), rules, composite)
                shares = crop_shares(crops, rules, matched)
            except ValueError as exc:  # a golden or approved alternate's image gone since the set was applied
                self._finish_with_error(record, str(exc))
                return
            makes = {ref: Path(rules.alternates[ref][k - 1]).name for ref, k in matched.items()}
            self.stats.alternates.update(matched.keys())
        with self._lock:
            self._lock.wait_for(lambda: self._boards_in < self.config.max_in_flight and not self._held)
            again = served != self._served  # cut for the board the line served before its change
            late = not again and expires_at is not None and time.monotonic() + self._expected_engine_s() > expires_at
            if not (late or again):
                if not self._boards_in:
                    self.last_progress = time.monotonic()  # the clock of a stall starts when work comes in
                self._boards_in += 1
        if again:
            self.inspect(original, serial, source, inspection_id, serial_origin, in_frame=in_frame,
                         expires_at=expires_at, skip_boards=skip_boards, unit_serials=unit_serials)
            return
        if late:  # its deadline passed while it waited for room: rejected already, its time is the line's
            self.stats.late_refused += 1
            self._finish_with_error(record, LATE)
            return
        with self._lock:
            if registration is not None or photo is not None:
                self.stats.add_registration((registration or photo).residual_px)
            pending = _Pending(record, len(crops), rules, alternates=makes)
            requests = []
            for crop, tensor, measured in zip(crops, tensors, shares):
                rid = next(self._ids)
                pending.parts[rid] = crop
                pending.shares[rid] = measured
                self._pending[rid] = pending
                requests.append(Request(rid, crop.component.name, crop.component.route, tensor,
                                        arrival=time.perf_counter()))
            if not crops:  # a bare board no different from its golden one: nothing for the engine
                self._finish(pending)
        if not crops:
            for sink in self.sinks:
                sink(record)
        for r in requests:
            self.engine.submit(r)

    def _identify(self, record: BoardRecord, image: np.ndarray, rules: RuleSet, registration: Registration | None,
                  code: CodeRead | None, origin: str) -> str | None:
        """Set the record's serial and where it came from; the reason when the board is refused: a NOREAD the rule
        set refuses, or a serial from upstream (Hermes) that the board's own code contradicts (never guessed which
        is right: the board is not inspected as either)."""
        if origin == "upstream" and rules.serial_code is not None and record.board_serial:
            if code is None:
                code = read_code(image, rules.serial_code,
                                 registration.homography if registration is not None else None)
            if code.ok and code.text != record.board_serial:
                self.stats.identity_mismatches += 1
                return (f"identity mismatch: upstream says {record.board_serial!r}, the board's code reads "
                        f"{code.text!r}")
            return None
        if origin in AUTHORITATIVE or rules.serial_code is None:
            if origin == "none" or not record.board_serial:
                record.board_serial, record.serial_source = noread_serial(record.inspection_id), "none"
            return None
        if code is None:
            code = read_code(image, rules.serial_code, registration.homography if registration is not None else None)
        if code.ok:
            record.board_serial, record.serial_source = code.text, "code"  # type: ignore[assignment]
            self.stats.serials_read += 1
            return None
        self.stats.noreads += 1
        record.board_serial, record.serial_source = noread_serial(record.inspection_id), "noread"
        return f"NOREAD: {code.reason}" if rules.serial_code.on_noread == "refuse" else None

    def _identify_units(self, record: BoardRecord, image: np.ndarray, rules: RuleSet,
                        registration: Registration | None, upstream: dict[int, str]) -> str | None:
        """Set each of a panel's boards' own serial (ingest/board_codes.py); the reason when a board's NOREAD
        refuses the panel (its codes' `on_noread: refuse`)."""
        codes = rules.panel.codes or {}  # type: ignore[union-attr]
        reads = read_board_codes(image, codes, registration.homography if registration is not None else None,
                                 record.panel_skipped)
        found = unit_serials(reads, record.inspection_id, upstream, record.panel_skipped)
        record.panel_serials = found.serials
        self.stats.unit_serials_read += sum(1 for k in reads if k not in found.unread)
        self.stats.unit_noreads += len(found.unread)
        self.stats.identity_mismatches += len(found.mismatched)
        refusing = [k for k in found.unread if k in codes and codes[k].on_noread == "refuse"]
        if refusing:
            k = refusing[0]
            return f"NOREAD on board {k} of the panel: {found.unread[k]}"
        return None

    def _watch_marks(self, rules: RuleSet, found: dict[str, tuple[float, float]], refused: bool) -> None:
        """Every board's marks to the transform watch (it logs its hint once the boards agree)."""
        if rules.fiducials is not None:
            self.transform_watch.see(rules.fiducials, found, refused)

    def refuse(self, serial: str, source: str, reason: str, inspection_id: str | None = None,
               serial_origin: str | None = None) -> None:
        """A board that came in but cannot be inspected (an unreadable file, a board failed upstream): stored as a
        board-level error."""
        self.stats.rejected_boards += 1
        record = self._record(serial, source, inspection_id)
        record.serial_source = serial_origin if serial else None
        if not serial:
            record.board_serial, record.serial_source = noread_serial(record.inspection_id), "none"
        self._finish_with_error(record, reason)

    def _finish_with_error(self, record: BoardRecord, reason: str) -> None:
        """One board-level `error` record, never a flood of false part failures."""
        record.error, record.finished_at = reason, datetime.now(timezone.utc)
        with self._lock:
            self.stats.boards += 1
            self.stats.board_verdicts["error"] += 1
            self.stats.count_panel(record)
            if self.stats.first_error is None:
                self.stats.first_error = reason
            if not self._boards_in:
                self.last_progress = time.monotonic()
        for sink in self.sinks:
            sink(record)

    def _on_result(self, result: RequestResult) -> None:
        with self._lock:
            pending = self._pending.pop(result.id)
            self._part_latency.append(result.latency)
            self._part_hist.observe(result.latency)
            crop = pending.parts[result.id]
            part = part_verdict(result, crop.ref, crop.component, self.zoo, pending.rules.crop_margin,
                                crop_size=(crop.image.shape[1], crop.image.shape[0]))
            share = pending.shares.get(result.id)
            part = overrule(part, share, crop.component.body_contrast)
            part.body_share = None if share is None else round(float(share), 4)
            part.alternate = pending.alternates.get(crop.ref)
            part.part_number = pending.rules.part_numbers.get(crop.ref)
            if crop.at is not None:
                part.at, part.box = crop.at, box_in_crop(crop)
            pending.record.parts.append(part)
            pending.remaining -= 1
            if pending.remaining:
                return
            record = self._finish(pending)
        for sink in self.sinks:
            sink(record)

    def _expected_engine_s(self) -> float:
        """How long a board now spends in the engine: the median of the recent ones (0 before any)."""
        recent = sorted(self._engine_s)
        return recent[len(recent) // 2] if recent else 0.0

    def _finish(self, pending: _Pending) -> BoardRecord:
        """A board's last part is in (under the lock): its record completed and counted."""
        record = pending.record
        record.finished_at = datetime.now(timezone.utc)
        board_s = (record.finished_at - record.started_at).total_seconds()
        self._board_latency.append(board_s)
        self._engine_s.append(time.monotonic() - pending.admitted_at)
        self._board_hist.observe(board_s)
        self.last_finished_at = record.finished_at.timestamp()
        order = {c.ref: i for i, c in enumerate(pending.parts.values())}  # the crops' scan order, as cut
        record.parts.sort(key=lambda p: order[p.ref])
        record.crops = {c.ref: c.image for c in pending.parts.values()}
        self._boards_in -= 1
        self.last_progress = self.last_finished = time.monotonic()
        self.stats.boards += 1
        self.stats.parts += len(record.parts)
        self.stats.board_verdicts[record.verdict] += 1
        self.stats.count_panel(record)
        self.stats.defects.update(p.defect_class for p in record.parts if p.verdict != "pass")
        self._lock.notify_all()
        return record

    @property
    def boards_in_flight(self) -> int:
        with self._lock:
            return self._boards_in

    def drain(self, timeout: float | None = None) -> bool:
        with self._lock:
            return self._lock.wait_for(lambda: self._boards_in == 0, timeout)

    def stop(self) -> None:
        self.drain()
        self.engine.stop()

    def latency_ms(self) -> dict[str, float | None]:
        """Median and 95th percentile of the last boards' and parts' latencies, in milliseconds."""
        with self._lock:
            parts, boards = sorted(self._part_latency), sorted(self._board_latency)

        def q(xs: list[float], f: float) -> float | None:
            v = nearest_rank(xs, f)
            return None if v is None else 1000 * v
        return {"part_p50": q(parts, 0.5), "part_p95": q(parts, 0.95),
                "board_p50": q(boards, 0.5), "board_p95": q(boards, 0.95)}

    def latency_histograms(self) -> dict[str, dict]:
        """Every board's and part's latency since the start, bucketed (histogram.py)."""
        with self._lock:
            return {"part": self._part_hist.to_json(), "board": self._board_hist.to_json()}

    def throughput(self) -> tuple[float, float]:
        """(boards/s, parts/s) since start."""
        dt = max(time.perf_counter() - self.started, 1e-9)
        return self.stats.boards / dt, self.stats.parts / dt


def _inspected(crops: list[Crop], record: BoardRecord, rules: RuleSet) -> list[Crop]:
    """The crops of a panel's boards that are inspected: none of an x-out's (a bare board's differences in an x-out's
    windows, `k-W1.3`, are its too)."""
    if not record.panel_skipped or rules.panel is None:
        return crops
    return [c for c in crops if rules.panel.position_of(c.ref) not in record.panel_skipped]


def check_served(rules: RuleSet, zoo: Zoo) -> None:
    """ValueError, naming what to fix, when `zoo` cannot serve `rules` (an expert missing, crops of another input
    version, a golden board or an approved window not there)."""
    if zoo.input_version != INPUT_VERSION:
        raise ValueError(f"the zoo at {zoo.root} was trained on crops of input version {zoo.input_version} but "
                         f"this line feeds version {INPUT_VERSION} (registered, normalised per crop); rebuild it "
                         f"with `inspector zoo build --demo` or retrain its experts")
    missing = sorted(set(rules.expert_specs()) - set(zoo.entries))
    if missing:
        raise ValueError(f"rule set {rules.recipe} names experts the zoo at {zoo.root} does not have: "
                         f"{', '.join(missing)}; build them with `inspector zoo build --demo` or fix the rules")
    check_comparisons(rules, zoo)
    composite = golden_types(rules, zoo)
    if composite:
        golden_image(rules)  # GoldenMissing (a ValueError) names what to add or fix
    if rules.alternates:
        type_of = {p.ref: c.name for c, p in rules.placements()}
        live = sorted(ref for ref in rules.alternates if type_of[ref] not in composite)
        if live:
            raise ValueError(f"{', '.join(live)} have approved alternates (`alternates:`), but their experts read "
                             "the live crop alone, not beside a golden window: approving a make changes nothing "
                             "there; serve them a golden comparison (`board teach`) or remove them")
        alternate_windows(rules)  # AlternateMissing (a ValueError) names the file and what to do


def check_rule_set(rules: RuleSet, zoo: Zoo) -> None:
    """check_served, and the files a set's photo registration names (a ValueError naming the one missing): what a
    running line checks before it takes a set, and a kiosk before it keeps an installed board."""
    check_served(rules, zoo)
    if rules.photo is not None:
        photo_registration_of(rules)
