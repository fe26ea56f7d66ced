"""What a plant's subscriber sees of the line's factory events, measured for `inspector bench-io --mqtt`: each
board message's delay from its verdict (the record's finished_at) to its arrival, whether they came in the order
the verdicts were decided, and how many came twice (QoS 1 is at least once; the key is the inspection id)."""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

import paho.mqtt.client as mqtt

from ..results.mqtt import parse_broker


@dataclass
class EventsSeen:
    boards: int = 0
    duplicates: int = 0
    in_order: bool = True
    delays_ms: list[float] = field(default_factory=list)  # verdict decided -> message at the subscriber


class EventsProbe:
    def __init__(self, broker: str, topic: str) -> None:
        self.host, self.port = parse_broker(broker)
        self._seen: list[tuple[float, bytes]] = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"bench-io-probe-{time.time_ns()}")
        self.client.on_connect = lambda c, *_: c.subscribe(topic, qos=1)
        self.client.on_subscribe = lambda *_: self._ready.set()
        self.client.on_message = self._on_message

    def _on_message(self, _c, _u, message) -> None:  # noqa: ANN001
        with self._lock:
            self._seen.append((time.time(), message.payload))

    def start(self, timeout: float = 10.0) -> EventsProbe:
        self.client.connect(self.host, self.port)
        self.client.loop_start()
        if not self._ready.wait(timeout):
            raise RuntimeError(f"MQTT broker {self.host}:{self.port}: no subscription within {timeout:g} s")
        return self

    def wait(self, boards: int, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                if len(self._seen) >= boards:
                    return
            time.sleep(0.02)

    def stop(self, decided: list[str]) -> EventsSeen:
        """What was seen; `decided`: the inspection ids in the order the line decided them (the order its results
        writer got them: the database's rows, or the spool's lines)."""
        self.client.disconnect()
        self.client.loop_stop()
        out, arrived = EventsSeen(), []
        for at, payload in self._seen:
            record = json.loads(payload)["Record"]
            if record["inspection_id"] in arrived:
                out.duplicates += 1
                continue
            arrived.append(record["inspection_id"])
            out.delays_ms.append(1000 * (at - datetime.fromisoformat(record["finished_at"]).timestamp()))
        seen = set(arrived)
        out.in_order = arrived == [key for key in decided if key in seen]
        out.boards = len(arrived)
        return out
