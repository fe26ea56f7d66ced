"""The line's factory events to the plant's MQTT broker, each the moment it happens, never waiting for the database.

- every board as its verdict is decided (CFX UnitsInspected), before the results writer sees it;
- every board rejected: by the line controller's station where there is one (its verdict, or its fail-safe at
  the deadline), else every board that did not pass (CFX UnitsDisqualified);
- a rule set activated, at start and at every changeover (CFX RecipeActivated);
- the source failing (a camera lost, a folder gone) and coming back (CFX FaultOccurred / FaultCleared);
- the results not reaching the database (they wait in the spool: the line goes on), the disk too full to spool them
  (ingest waits), the results writer stopped, each opened once however long it lasts and cleared when it ends.
The publisher sends them through its durable outbox (results/outbox.py), in the order they happened.
"""
from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..results import cfx
from ..results.records import BoardRecord
from ..routing.rules import RuleSet

if TYPE_CHECKING:
    from ..plc.station import Published, Tags
    from ..results.mqtt import MqttPublisher
    from .service import LineService

Say = Callable[[str], None]
WATCH_S = 0.5  # how often the source's health is looked at
REMEMBERED = 256  # boards kept for the line controller's reject, or rejects for their board's verdict


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


class FactoryEvents:
    def __init__(self, publisher: MqttPublisher, line: str, station: str, say: Say = lambda _m: None) -> None:
        self.publisher, self.line, self.station, self.say = publisher, line, station, say
        self._service: LineService | None = None
        self._hooked: Any = None  # the station listened to
        self._faults: dict[str, str] = {}  # condition -> the occurrence id of its open fault
        self._seen_error_at: float | None = None
        # a board's failed units heard before the controller's reject, and rejects heard before the board (by
        # inspection id); the line's thread and the station's listener meet here
        self._failed: OrderedDict[str, tuple[list[int], dict[int, str]]] = OrderedDict()  # positions, their serials
        self._rejected: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watch = threading.Thread(target=self._watch_line, name="factory-events", daemon=True)

    def attach(self, service: LineService) -> None:
        """Hear the service's verdicts, changeovers and source; says the rule set in force now."""
        self._service = service
        service.decided.append(self.board)
        service.line.on_rules.append(self.recipe)
        self.recipe(service.line.rules)
        self._seen_error_at = service.source.counters.last_error_at
        self._watch.start()

    def close(self, timeout: float = 5.0) -> None:
        """Stop watching, with a last look at the results (a fault that began since the last look is said); send
        what is queued (up to `timeout`; the durable outbox keeps the rest for the next start), say offline,
        disconnect."""
        self._stop.set()
        if self._watch.is_alive():
            self._watch.join(2 * WATCH_S)
        if self._service is not None and not self._watch.is_alive():
            self._watch_results(self._service)
        self.publisher.close(timeout)

    # -- the events ---------------------------------------------------------------------------------------
    def board(self, record: BoardRecord) -> None:
        self.publisher(record)
        self._hook_station()
        if self._hooked is None:  # no line controller: a board not passed is rejected
            if record.verdict != "pass":
                self._reject(record.inspection_id, record.board_serial, record.verdict, cfx.reject_positions(record),
                             record.panel_serials)
            return
        positions = cfx.reject_positions(record)  # the controller may reject it, even passed (its code unread)
        with self._lock:  # the controller's reject came first (it is told before the factory) or comes later
            waiting = self._rejected.pop(record.inspection_id, None)
            if waiting is None:
                self._remember(self._failed, record.inspection_id, (positions, record.panel_serials))
        if waiting is not None:
            self._reject(record.inspection_id, waiting[0], waiting[1], positions, record.panel_serials)

    def recipe(self, rules: RuleSet) -> None:
        self.publisher.event(cfx.recipe_activated(self.line, self.station, rules.recipe, rules.version, _now()))

    def _reject(self, inspection_id: str, serial: str, reason: str, positions: list[int],
                serials: dict[int, str] | None = None) -> None:
        self.publisher.event(cfx.units_disqualified(inspection_id, serial, self.line, self.station, reason, _now(),
                                                    positions, serials))

    def _on_station(self, _tags: Tags, published: Published | None) -> None:
        """The line controller's reject: at once where it failed a board safe at its deadline (no verdict came: the
        whole unit, position 1) or where the board's verdict was heard already; else when the verdict is heard
        (the service tells the factory right after the controller), so a panel's reject names its failed boards."""
        if published is None or not published.reject:
            return
        reason = published.reason or published.verdict
        positions, serials = [1], None
        if not published.deadline:
            with self._lock:
                heard = self._failed.pop(published.inspection_id, None)
                if heard is None:
                    self._remember(self._rejected, published.inspection_id, (published.serial, reason))
                    return
            positions, serials = heard
        self._reject(published.inspection_id, published.serial, reason, positions, serials)

    @staticmethod
    def _remember(kept: OrderedDict, key: str, value: Any) -> None:
        kept[key] = value
        while len(kept) > REMEMBERED:
            kept.popitem(last=False)

    def _hook_station(self) -> None:
        station = self._service.station if self._service is not None else None
        if station is not None and self._hooked is not station:
            self._hooked = station
            station.listen(self._on_station)

    def _watch_line(self) -> None:
        while not self._stop.wait(WATCH_S):
            self._hook_station()
            service = self._service
            if service is not None:
                self._watch_source(service)
                self._watch_results(service)

    def _watch_source(self, service: LineService) -> None:
        """A fault from the source's counters: a new error opens one, a frame after it clears it."""
        counters = service.source.counters
        error_at, frame_at = counters.last_error_at, counters.last_frame_at
        if error_at is not None and error_at != self._seen_error_at:
            self._seen_error_at = error_at
            code = "CameraLost" if getattr(service.source.origin, "settings", None) is not None or \
                "camera" in service.source.name else "SourceError"
            self._fault("source", True, code, counters.last_error or "the source failed")
        elif "source" in self._faults and frame_at is not None and error_at is not None and frame_at > error_at \
                and time.monotonic() - frame_at < 10 * WATCH_S:
            self._fault("source", False)

    def _watch_results(self, service: LineService) -> None:
        """Faults from the results writer's state: what the plant loses sight of while it lasts."""
        writer = getattr(service, "writer", None)
        if writer is None:
            return
        s = writer.status()
        self._fault("results-database", s.spooled > 0, "ResultsDatabaseUnreachable",
                    f"results wait on this box's disk for the database ({s.spooled} boards so far): "
                    f"{s.last_error or 'the database refused them'}", "Warning")
        self._fault("results-disk", s.disk_full, "ResultsDiskFull",
                    "the results can be neither stored nor spooled (the disk is full): the line waits", "Error")
        self._fault("results-writer", not s.alive, "ResultsWriterStopped",
                    "the results writer stopped: new results are spooled as they come, none is stored", "Error")

    def _fault(self, condition: str, on: bool, code: str = "", description: str = "",
               severity: str = "Error") -> None:
        """Open `condition`'s fault when it starts (once however long it lasts); clear it when it ends."""
        if on and condition not in self._faults:
            self._faults[condition] = str(uuid.uuid4())
            self.publisher.event(cfx.fault(self.line, self.station, self._faults[condition], code, description,
                                           _now(), severity=severity))
        elif not on and condition in self._faults:
            self.publisher.event(cfx.fault(self.line, self.station, self._faults.pop(condition), "", "", _now(),
                                           cleared=True))
