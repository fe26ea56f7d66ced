"""Per-board results to an MQTT broker, for the plant's MES and dashboards (paho-mqtt).

Topics, under a prefix (default `inspector`):
- `<prefix>/<line>/<station>/board`   one JSON message per board (QoS 1), parts included, shaped after IPC-CFX
                                      UnitsInspected (cfx.py: its schema version and layout);
- `<prefix>/<line>/<station>/event`   the line's other factory events, CFX-shaped: a recipe activated, a fault (the
                                      camera lost), a board rejected (cfx.py);
- `<prefix>/<line>/<station>/status`  retained `online`, and `offline` as the last will when the
                                      appliance disappears without saying goodbye.
The line publishes each board the moment its verdict is decided, whatever the database is doing, and with a
durable outbox (outbox.py) every message is on disk before it is sent and until the broker acknowledges it, so a
restart of the box while the broker is away loses nothing. Messages go in the order they were decided: while the
broker is unreachable they wait in the publisher's own queue (up to `max_queued` in memory; beyond that a message
stays on disk only, read back as the queue drains, or without a durable outbox is dropped and counted), never in
paho's, because paho marks a connection up and lets a new publish through before it re-sends what it
queued, so a board stored during the reconnect would overtake the older ones. After a reconnect the outbox is sent
once paho's re-sent messages are acknowledged. The client reconnects with backoff; what is queued, dropped and
acknowledged is counted. Every message carries the board's inspection id, so a subscriber can drop a re-sent one
(QoS 1 is at least once).

Locks: paho calls `on_publish` holding its own message lock, which `publish()` takes too, so the publisher never
holds its state lock across a `publish()` (the writer thread and paho's network thread once held one each and
waited on the other: a kiosk hung at shutdown). Hand-overs are serialised by a lock of their own that paho's
callbacks never take; a drain that an acknowledgement makes due runs on a thread of its own.
"""
from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass

import paho.mqtt.client as mqtt

from .cfx import units_inspected
from .outbox import Outbox
from .records import BoardRecord


@dataclass
class MqttStatus:
    connected: bool
    published: int  # acknowledged by the broker
    queued: int  # waiting in the outbox or handed to the client, not yet acknowledged
    last_error: str | None
    dropped: int = 0  # not queued: the queue was full while the broker was away


def parse_broker(spec: str) -> tuple[str, int]:
    """`host`, `host:port` or `mqtt://host:port` -> (host, port); 1883 by default."""
    spec = spec.removeprefix("mqtt://")
    host, _, port = spec.rpartition(":") if ":" in spec else (spec, "", "")
    if not host:
        raise ValueError(f"MQTT broker {spec!r} has no host: use HOST or HOST:PORT")
    try:
        return host, int(port) if port else 1883
    except ValueError:
        raise ValueError(f"MQTT broker port {port!r} is not a number: use HOST:PORT") from None


class MqttPublisher:
    def __init__(self, broker: str, line: str, station: str, prefix: str = "inspector",
                 client_id: str | None = None, username: str | None = None, password: str | None = None,
                 tls: bool = False, ca_file: str | None = None, max_queued: int = 10_000,
                 outbox: Outbox | None = None) -> None:
        """`tls` encrypts the connection (verifying the broker against `ca_file`, or the system's CAs); `outbox`
        keeps every message on disk until the broker has it (what a restart sends again first)."""
        self.host, self.port = parse_broker(broker)
        self.base = f"{prefix}/{line}/{station}"
        self._lock = threading.Lock()
        self._published = 0
        self._pending: dict[int, int] = {}  # message ids handed to paho, not yet acknowledged -> their outbox seq
        self._durable = outbox
        self._spilled = False  # messages on disk that the in-memory queue does not hold (a long outage)
        self._in_hand = 0  # boards taken off the outbox whose publish() has not returned yet
        self._send_lock = threading.Lock()  # one hand-over at a time, in order; never taken in a paho callback
        self._early: set[int] = set()  # acknowledgements that overtook their publish() call
        self._last_seq = 0  # the newest outbox seq taken into the in-memory queue
        self._status_mids: set[int] = set()
        self._connected = False
        # (outbox seq or 0, topic, payload, what it is about) not yet handed to paho, oldest first
        self._outbox: deque[tuple[int, str, str, str]] = deque()
        if outbox is not None:  # what a previous run left unacknowledged goes first
            self._last_seq = outbox.last_seq - outbox.unacknowledged  # everything up to here was acknowledged
            for message in outbox.pending(limit=max_queued):
                self._outbox.append((message.seq, message.topic, message.payload, f"message {message.seq}"))
                self._last_seq = message.seq
            self._spilled = outbox.last_seq > self._last_seq
        self._pending_before_reconnect: set[int] = set()  # handed over before a drop, re-sent by paho, unacknowledged
        self._max_queued = max_queued
        self._dropped = 0
        self._refused: str | None = None  # why the broker refused the last connection attempt
        self._last_error: str | None = None
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2,
                                  client_id=client_id or f"inspector-{line}-{station}", clean_session=False)
        if username:
            self.client.username_pw_set(username, password)
        if tls or ca_file:
            self.client.tls_set(ca_certs=ca_file)
        self.client.will_set(f"{self.base}/status", "offline", qos=1, retain=True)
        self.client.reconnect_delay_set(min_delay=1, max_delay=30)
        self.client.max_queued_messages_set(max_queued + 16)  # room beyond ours for the status messages
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_publish = self._on_publish

    @property
    def board_topic(self) -> str:
        return f"{self.base}/board"

    @property
    def event_topic(self) -> str:
        return f"{self.base}/event"

    def start(self) -> None:
        self.client.connect_async(self.host, self.port, keepalive=30)
        self.client.loop_start()

    def __call__(self, board: BoardRecord) -> None:
        """Publish one board as its verdict is decided (a LineService `decided` sink); never blocks on the network
        (a durable outbox writes it to disk first)."""
        self.send("board", json.dumps(units_inspected(board)), f"board {board.board_serial}")

    def event(self, message: dict) -> None:
        """Publish one of the line's other factory events (cfx.py builds them)."""
        self.send("event", json.dumps(message), message.get("MessageName", "event"))

    def send(self, topic: str, payload: str, label: str) -> None:
        seq = self._durable.append(topic, payload).seq if self._durable is not None else 0
        with self._lock:
            if len(self._outbox) + len(self._pending) >= self._max_queued or self._spilled:
                if self._durable is None:
                    self._dropped += 1
                    self._last_error = f"MQTT queue full while the broker is away: {label} not sent"
                    return
                self._spilled = True  # on disk; read back as the queue drains
            else:
                self._outbox.append((seq, topic, payload, label))
                self._last_seq = seq or self._last_seq
        self._drain()

    def _refill(self) -> None:
        """Messages that were only on disk into the in-memory queue, oldest first (under the state lock)."""
        assert self._durable is not None
        room = self._max_queued - len(self._outbox) - len(self._pending)
        for message in self._durable.pending(after=self._last_seq, limit=max(0, room)):
            self._outbox.append((message.seq, message.topic, message.payload, f"message {message.seq}"))
            self._last_seq = message.seq
        self._spilled = self._durable.last_seq > self._last_seq

    def _drain(self) -> None:
        """Hand the outbox over, oldest first (the order boards were stored), once nothing of an earlier connection
        awaits its acknowledgement. Never called holding the state lock, nor from a callback paho runs holding its
        message lock (see the module's docstring)."""
        with self._send_lock:
            while True:
                with self._lock:
                    if not self._outbox and self._spilled:
                        self._refill()
                    if not self._connected or self._pending_before_reconnect or not self._outbox:
                        return
                    seq, topic, payload, label = self._outbox.popleft()
                    self._in_hand += 1
                info = self.client.publish(f"{self.base}/{topic}", payload, qos=1)
                acked = False
                with self._lock:
                    self._in_hand -= 1
                    if info.rc == mqtt.MQTT_ERR_QUEUE_SIZE:  # paho's own queue is full: first again, sent on an ack
                        self._outbox.appendleft((seq, topic, payload, label))
                        self._early.discard(info.mid)
                        return
                    if info.mid in self._early:  # its acknowledgement overtook this call's return
                        self._early.discard(info.mid)
                        self._published += 1
                        acked = True
                    else:
                        self._pending[info.mid] = seq
                    if info.rc not in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_NO_CONN):
                        self._last_error = f"publish of {label} failed: {mqtt.error_string(info.rc)}"
                if acked and seq and self._durable is not None:
                    self._durable.acknowledge(seq)

    def wait_published(self, timeout: float) -> bool:
        """Wait until the broker has acknowledged everything handed over; False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._pending and not self._outbox and not self._in_hand and not self._spilled:
                    return True
            time.sleep(0.02)
        return False

    def close(self, timeout: float = 5.0) -> MqttStatus:
        """Flush what is queued (up to `timeout`), say `offline`, disconnect."""
        self.wait_published(timeout)
        if self._connected:
            info = self.client.publish(f"{self.base}/status", "offline", qos=1, retain=True)
            info.wait_for_publish(timeout)
            with self._lock:
                self._early.discard(info.mid)
        self.client.disconnect()
        self.client.loop_stop()
        if self._durable is not None:
            self._durable.close()
        return self.status()

    def status(self) -> MqttStatus:
        with self._lock:
            queued = self._durable.unacknowledged if self._durable is not None else \
                len(self._pending) + len(self._outbox)
            return MqttStatus(self._connected, self._published, queued, self._last_error, self._dropped)

    # -- paho callbacks (its network thread) --------------------------------------------------------
    def _on_connect(self, client, _userdata, _flags, reason, _props) -> None:  # noqa: ANN001
        with self._lock:
            self._connected = not reason.is_failure
            if reason.is_failure:
                self._refused = f"broker {self.host}:{self.port} refused the connection: {reason}"
                self._last_error = self._refused
                return
            self._refused = None
        mid = client.publish(f"{self.base}/status", "online", qos=1, retain=True).mid
        with self._lock:
            self._status_mids.add(mid)  # its acknowledgement comes later on this same thread
            # boards handed over before a drop are re-sent by paho after this callback: the outbox waits for them
            self._pending_before_reconnect = set(self._pending)
        self._drain()  # paho holds no message lock while it runs on_connect

    def _on_disconnect(self, _client, _userdata, _flags, reason, _props) -> None:  # noqa: ANN001
        with self._lock:
            self._connected = False
            if reason.is_failure:  # after a refusal, the refusal is what the operator must read (credentials)
                self._last_error = self._refused or f"lost broker {self.host}:{self.port} ({reason}); reconnecting"

    def _on_publish(self, _client, _userdata, mid, _reason, _props) -> None:  # noqa: ANN001
        seq, ours = 0, False
        with self._lock:
            if mid in self._status_mids:
                self._status_mids.discard(mid)
            elif mid in self._pending:
                seq, ours = self._pending.pop(mid), True
                self._published += 1
                self._pending_before_reconnect.discard(mid)
            else:
                self._early.add(mid)
        if seq and self._durable is not None:
            self._durable.acknowledge(seq)
        if not ours:
            return
        with self._lock:  # what waits may go: the re-sent ones are in, or there is room again (on disk, behind paho)
            due = (self._spilled or bool(self._outbox)) and self._connected and not self._pending_before_reconnect \
                and not self._in_hand
        if due:  # paho holds its message lock here: drain on a thread of its own
            threading.Thread(target=self._drain, name="mqtt-drain", daemon=True).start()
