"""A running line as one object: source thread -> ingest queue -> Line -> result writer (+ crops) -> sinks.

`inspector run`, `inspector kiosk` and the dashboard all run a line through
this, so they stop the same way: the source stops, what the ingest queue
already accepted is inspected, the engine drains, the writer flushes, the
published results are flushed, and only then does `stop` return.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..coserve.online.profile import DeviceProfile
from ..experts.zoo import Zoo
from ..ingest.queue import IngestQueue, feed
from ..ingest.sources import Frame, Source
from ..results.crops import CropKeeper
from ..results.records import BoardRecord
from ..results.rule_texts import RuleArchive
from ..results.store import ResultStore
from ..results.writer import ResultWriter
from ..routing.rules import RuleSet
from ..runtime.heap import Trimmer
from .camera_changeover import CameraChangeover
from .detection import Detection
from .detector_scale import scale_notes
from .line import LATE, Line, LineConfig

if TYPE_CHECKING:  # types only: the line imports nothing of the PLC or Hermes rooms at run time
    from ..plc.station import Station
    from .hermes_link import HermesLink

Say = Callable[[str], None]
FEEDER_STOP_S = 10.0  # a stopped source ends within a frame's wait (a camera's grab timeout) at most
Sink = Callable[[BoardRecord], None]


@dataclass(frozen=True)
class ServiceConfig:
    line: LineConfig = LineConfig()
    queue_capacity: int = 8
    overflow: str = "wait"  # wait | drop-oldest | drop-newest (see ingest/queue.py)
    keep_crops: str = "failed"  # failed | all | none
    writer_capacity: int = 256  # boards waiting in memory for the result writer before the line waits
    db_retry_max_s: float = 30.0  # the longest wait between retries of an unreachable database
    min_free_mb: float = 512.0  # below this much free disk, crops are not kept (the spool and database need it)
    skip_late: bool = True  # a board past its line controller's deadline before the line took it: refused uninspected


class LineService:
    def __init__(self, rules: RuleSet, zoo: Zoo, profiles: dict[str, DeviceProfile], config: ServiceConfig,
                 store: ResultStore, data_dir: Path, source: Source, published: list[Sink] | None = None,
                 say: Say = lambda _m: None) -> None:
        self.config, self.store, self.source, self.say = config, store, source, say
        self.queue = IngestQueue(config.queue_capacity, config.overflow)
        self.crops = CropKeeper(data_dir / "crops", config.keep_crops, config.min_free_mb)
        self.published = list(published or [])  # told of each board once the database has it
        self.decided: list[Sink] = []  # told of each board the moment its verdict is decided (factory events)
        self.rule_archive = RuleArchive(data_dir / "rulesets")  # every set's text, for the results that name it
        self.rule_archive.keep(rules.recipe, rules.text)
        self.writer = ResultWriter(store, data_dir / "spool.jsonl", prepare=self.crops, on_written=self._written,
                                   on_durable=self._durable, capacity=config.writer_capacity,
                                   max_retry_s=config.db_retry_max_s, rule_text=self.rule_archive.text)
        self.detection = Detection()
        # inspection id -> (true defects, true printed serial or None) of synthetic boards
        self._truths: dict[str, tuple[dict[str, str], str | None]] = {}
        self._on_stored: dict[str, Callable[[], None]] = {}  # inspection id -> the source's hook (archive the file)
        self._hooks = threading.Lock()
        self._finish_lock = threading.Lock()
        self.line = Line(rules, zoo, profiles, config.line, sinks=[self._finished])
        self.line.on_rules.append(lambda r: self.rule_archive.keep(r.recipe, r.text))
        self.camera_sets = CameraChangeover(source.origin, rules, say)  # each set's camera settings at its changeover
        self.line.set_ups.append(self.camera_sets)
        self.scale_notes: list[str] = []  # what the line says of the set in force (app/detector_scale.py)
        self._say_scale(rules)
        self.line.on_rules.append(self._say_scale)
        follow = getattr(source, "follow", None)
        if follow is not None:  # a board gate judges frames by the rule set in force, which a changeover switches
            follow(lambda: self.line.rules)
        self._feeder = threading.Thread(target=feed, args=(source, self.queue), name="ingest", daemon=True)
        self.running = False
        self.started_at = time.monotonic()
        self.stopped = threading.Event()
        self._resumed = threading.Event()  # cleared while paused
        self._resumed.set()
        self._trimmer = Trimmer()  # freed image and tensor buffers back to the OS, so RSS stays flat for months
        self._images: dict[str, np.ndarray] = {}  # inspection id -> image, for boards inside the line
        self.last_board: tuple[np.ndarray, BoardRecord] | None = None  # the newest finished board, for a display
        self.station: Station | None = None  # the line controller's station, told of each verdict at once
        self._plc_keys: dict[str, Any] = {}  # inspection id -> the station's key (the trigger's time, or the id)
        self.handoff: HermesLink | None = None  # the Hermes lanes: boards' identities in, verdicts on, in order
        # before a board is inspected: its product served (the line changed over to it where it was not), or why the
        # board is not inspected (app/product_changeover.py)
        self.products: Callable[[Frame], str | None] | None = None
        self.rejected_late = 0  # boards refused uninspected: their deadline had passed before the line took them
        self.inspected_late = 0  # boards inspected although their deadline had passed (skip_late off)

    def _say_scale(self, rules: RuleSet) -> None:
        """A taught detector served windows far from the size it was taught on: said once a set applied, and kept for
        the kiosk and the dashboard to show beside the edit that applied it."""
        self.scale_notes = scale_notes(rules, self.line.zoo)
        for note in self.scale_notes:
            self.say(note)

    @property
    def paused(self) -> bool:
        return not self._resumed.is_set()

    def pause(self) -> None:
        """Take no new frames (boards inside finish); the source waits or drops by the queue's overflow policy."""
        self._resumed.clear()

    def resume(self) -> None:
        self._resumed.set()

    def start(self) -> None:
        self.started_at = time.monotonic()
        self.writer.start()
        self.line.start()
        self._feeder.start()
        self.running = True

    def run(self, on_board: Callable[[], None] | None = None) -> None:
        """Inspect queued frames until the source ends or `request_stop`; then drain and flush (blocking)."""
        try:
            while True:
                if not self._resumed.wait(0.25) and not self.queue.closed:
                    continue
                if self.writer.disk_full and not self.queue.closed:
                    time.sleep(0.25)  # ingest waits while results cannot be stored or spooled (health: critical)
                    continue
                frame = self.queue.get(timeout=0.25)
                if frame is None:
                    if self.queue.closed and not len(self.queue):
                        break
                    continue
                self._inspect(frame)
                self._trimmer.maybe()
                if on_board:
                    on_board()
        finally:
            self._shutdown()

    def request_stop(self) -> None:
        """Stop taking frames from the source; what is already queued is still inspected (SIGTERM, Stop button)."""
        self.source.stop()
        self.queue.close()
        self.resume()

    def _inspect(self, frame: Frame) -> None:
        key = frame.inspection_id
        if self.handoff is not None:
            self.handoff.board_in(frame)
        if self.station is not None:  # the PLC waits for this board's verdict from its trigger (or frame) on
            plc_key = frame.triggered_at if frame.triggered_at is not None else key
            self._plc_keys[key] = plc_key
            serial = frame.code.text if frame.code is not None and frame.code.ok else ""
            self.station.board_in(plc_key, since=frame.triggered_at or frame.acquired_at, serial=serial,
                                  inspection_id=key)
        if frame.on_stored is not None:
            with self._hooks:
                self._on_stored[key] = frame.on_stored
        if frame.image is not None and self.products is not None:
            refused = self.products(frame)
            if refused:
                self.line.refuse(frame.serial or "", frame.source, refused, key, frame.serial_origin)
                self.say(f"board {frame.serial or key} {refused}")
                return
        if frame.image is not None and self._late(frame):
            if self.config.skip_late:  # the PLC already rejected it on the fail-safe: the line's time goes on
                self.rejected_late += 1
                self.line.refuse(frame.serial or "", frame.source, LATE, key, frame.serial_origin)
                return
            self.inspected_late += 1
        if frame.image is None:
            self.line.refuse(frame.serial or "", frame.source, frame.error or "no image", key, frame.serial_origin)
            self.say(f"board {frame.serial} not inspected: {frame.error}")
            return
        if frame.truth is not None:
            printed = self.line.rules.serial_code is not None and self.line.rules.serial_code.at is not None
            self._truths[key] = (frame.truth, frame.serial if printed and frame.serial_origin == "synthetic" else None)
        self._images[key] = frame.image
        self.line.inspect(frame.image, frame.serial, frame.source, key, frame.serial_origin, frame.registration,
                          frame.code, frame.rules_version, expires_at=self._expires_at(frame),
                          skip_boards=frame.skip_boards, unit_serials=frame.unit_serials)

    def _late(self, frame: Frame) -> bool:
        """Its line controller's deadline passed while it waited to be inspected (no controller: never late)."""
        expires = self._expires_at(frame, always=True)
        return expires is not None and time.monotonic() > expires

    def _expires_at(self, frame: Frame, always: bool = False) -> float | None:
        """When its line controller's deadline passes (time.monotonic()); None without a controller, or when late
        boards are inspected anyway (unless `always`)."""
        if self.station is None or not (self.config.skip_late or always):
            return None
        since = frame.triggered_at if frame.triggered_at is not None else frame.acquired_at
        return since + self.station.fail_safe.deadline_ms / 1000

    def _finished(self, record: BoardRecord) -> None:
        """A board's verdict, to everyone who hears of it, one board at a time: the line controller, the next machine,
        the factory and the results writer all see the boards in one order, whichever thread decided them."""
        with self._finish_lock:
            self._tell(record)

    def _tell(self, record: BoardRecord) -> None:
        plc_key = self._plc_keys.pop(record.inspection_id, None)
        if self.station is not None and plc_key is not None:  # the verdict to the PLC first, the database after
            self.station.verdict(plc_key, record.inspection_id, record.board_serial, record.verdict,
                                 noread=record.serial_source == "noread",
                                 boards=record.failed_boards(), unread=record.unread_boards())
        if self.handoff is not None:  # the board goes on down the line with its verdict (and gets its BoardId)
            self.handoff.verdict(record)
        for sink in self.decided:  # the factory hears it now, whatever the database is doing
            try:
                sink(record)
            except Exception as exc:  # noqa: BLE001 - a broken sink must not stop the results
                self.say(f"event sink failed for board {record.board_serial}: {exc}")
        image = self._images.pop(record.inspection_id, None)
        if image is not None:
            self.last_board = (image, record)
        self.writer.put(record)
        truth = self._truths.pop(record.inspection_id, None)
        if truth is not None:
            self.detection.add(truth[0], record, truth[1])

    def _durable(self, record: BoardRecord) -> None:
        """Its result is stored or spooled: the source may let go of the board (move the file away)."""
        with self._hooks:
            hook = self._on_stored.pop(record.inspection_id, None)
        if hook is not None:
            hook()

    def _written(self, record: BoardRecord) -> None:
        for sink in self.published:
            try:
                sink(record)
            except Exception as exc:  # noqa: BLE001 - a broken sink must not stop the results
                self.say(f"result sink failed for board {record.board_serial}: {exc}")

    def _shutdown(self) -> None:
        self.request_stop()
        self.line.stop()
        if self._feeder.is_alive():  # the source lets go of its camera (a camera's driver left open aborts the exit)
            self._feeder.join(FEEDER_STOP_S)
        status = self.writer.close()
        if status.pending:
            self.say(f"{status.pending} board result(s) could not be written or spooled: {status.last_error}")
        for sink in self.published:
            close = getattr(sink, "close", None)
            if close:
                close()
        self.running = False
        self.stopped.set()
