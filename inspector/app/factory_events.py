"""The line's factory events to the plant's MQTT broker, each the moment it happens, never waiting for the database.

- every board as its verdict is decided (CFX UnitsInspected), before the results writer sees it;
- every board rejected: by the line controller's station where there is one (its verdict, or its fail-safe at
  the deadline), else every board that did not pass (CFX UnitsDisqualified);
- a rule set activated, at start and at every changeover (CFX RecipeActivated);
- the source failing (a camera lost, a folder gone) and coming back (CFX FaultOccurred / FaultCleared).
The publisher sends them through its durable outbox (results/outbox.py), in the order they happened.
"""
from __future__ import annotations

import threading
import time
import uuid
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


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


class FactoryEvents:
    def __init__(self, publisher: MqttPublisher, line: str, station: str, say: Say = lambda _m: None) -> None:
        self.publisher, self.line, self.station, self.say = publisher, line, station, say
        self._service: LineService | None = None
        self._hooked: Any = None  # the station listened to
        self._fault: str | None = None  # the open fault's occurrence id
        self._seen_error_at: float | None = None
        self._stop = threading.Event()
        self._watch = threading.Thread(target=self._watch_source, name="factory-events", daemon=True)

    def attach(self, service: LineService) -> None:
        """Hear the service's verdicts, changeovers and source; says the rule set in force now."""
        self._service = service
        service.decided.append(self.board)
        service.line.on_rules.append(self.recipe)
        self.recipe(service.line.rules)
        self._seen_error_at = service.source.counters.last_error_at
        self._watch.start()

    def close(self, timeout: float = 5.0) -> None:
        """Stop watching; send what is queued (up to `timeout`; the durable outbox keeps the rest for the next
        start), say offline, disconnect."""
        self._stop.set()
        self.publisher.close(timeout)

    # -- the events ---------------------------------------------------------------------------------------
    def board(self, record: BoardRecord) -> None:
        self.publisher(record)
        self._hook_station()
        if self._hooked is None and record.verdict != "pass":  # no line controller: a board not passed is rejected
            self._reject(record.inspection_id, record.board_serial, record.verdict)

    def recipe(self, rules: RuleSet) -> None:
        self.publisher.event(cfx.recipe_activated(self.line, self.station, rules.recipe, rules.version, _now()))

    def _reject(self, inspection_id: str, serial: str, reason: str) -> None:
        self.publisher.event(cfx.units_disqualified(inspection_id, serial, self.line, self.station, reason, _now()))

    def _on_station(self, _tags: Tags, published: Published | None) -> None:
        if published is not None and published.reject:
            self._reject(published.inspection_id, published.serial, published.reason or published.verdict)

    def _hook_station(self) -> None:
        station = self._service.station if self._service is not None else None
        if station is not None and self._hooked is not station:
            self._hooked = station
            station.listen(self._on_station)

    def _watch_source(self) -> None:
        """Faults from the source's counters: a new error opens one, a frame after it clears it."""
        while not self._stop.wait(WATCH_S):
            self._hook_station()
            service = self._service
            if service is None:
                continue
            counters = service.source.counters
            error_at, frame_at = counters.last_error_at, counters.last_frame_at
            if error_at is not None and error_at != self._seen_error_at:
                self._seen_error_at = error_at
                if self._fault is None:
                    self._fault = str(uuid.uuid4())
                    code = "CameraLost" if getattr(service.source.origin, "settings", None) is not None or \
                        "camera" in service.source.name else "SourceError"
                    self.publisher.event(cfx.fault(self.line, self.station, self._fault, code,
                                                   counters.last_error or "the source failed", _now()))
            elif self._fault is not None and frame_at is not None and error_at is not None and frame_at > error_at \
                    and time.monotonic() - frame_at < 10 * WATCH_S:
                self.publisher.event(cfx.fault(self.line, self.station, self._fault, "", "", _now(), cleared=True))
                self._fault = None
