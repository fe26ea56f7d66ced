"""The factory events' own durable outbox: every message for the plant's MQTT broker, on disk the moment it is
decided, until the broker has acknowledged it.

Separate from the results spool on purpose: a verdict goes to the factory as soon as it is decided, whether the
database is up or not, and survives a restart of the box while the broker is away. An append-only file of JSON
lines, each `{"seq": n, "topic": ..., "payload": ...}`, fsynced, and a position file holding the highest
sequence number below which everything was acknowledged (replaced atomically). On opening, what lies past the
position is sent again, in order: at least once, so every message carries its key (the inspection id, or the
event's own id) for subscribers to drop a repeat. When everything is acknowledged, both files are emptied.
A torn last line (a power cut mid-append) is skipped with its byte count told, never parsed as a message.
"""
from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..runtime.diskio import write_atomically


@dataclass(frozen=True)
class Message:
    seq: int
    topic: str  # under the publisher's base: board, event
    payload: str  # the JSON text sent


class Outbox:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.pos_path = self.path.with_name(self.path.name + ".pos")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._acked = self._read_pos()
        self._done: set[int] = set()  # acknowledged past the position, waiting for the ones before them
        self.torn_bytes = 0
        self._index = self._read_index()  # (seq, byte offset) of every message not yet acknowledged, oldest first
        self._seq = max((seq for seq, _ in self._index), default=self._acked)
        self._file = open(self.path, "ab")  # noqa: SIM115 - held open for appends, closed in close()
        self._size = self._file.tell()

    def _read_pos(self) -> int:
        try:
            return int(self.pos_path.read_text(encoding="ascii").strip() or 0)
        except (OSError, ValueError):
            return 0

    def _read_index(self) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        try:
            data = self.path.read_bytes()
        except OSError:
            return out
        lines = data.split(b"\n")
        if lines and lines[-1]:  # no newline after the last line: torn by a power cut mid-append
            self.torn_bytes = len(lines[-1])
            with open(self.path, "r+b") as f:  # cut it off, so what is appended next stands on its own line
                f.truncate(len(data) - self.torn_bytes)
        offset = 0
        for raw in lines[:-1]:
            message = self._parse(raw)
            if message is None:
                self.torn_bytes += len(raw)
            elif message.seq > self._acked:
                out.append((message.seq, offset))
            offset += len(raw) + 1
        return out

    @staticmethod
    def _parse(raw: bytes) -> Message | None:
        try:
            entry: dict[str, Any] = json.loads(raw)
            return Message(int(entry["seq"]), str(entry["topic"]), str(entry["payload"]))
        except (ValueError, KeyError, TypeError):
            return None

    def pending(self, after: int = 0, limit: int | None = None) -> list[Message]:
        """Messages the broker has not acknowledged with a seq past `after`, oldest first, at most `limit`: read
        from disk, so a long outage costs disk, not memory."""
        with self._lock:
            wanted = [offset for seq, offset in self._index if seq > after][:limit]
            if not wanted:
                return []
            self._file.flush()
            out = []
            with open(self.path, "rb") as f:
                for offset in wanted:
                    f.seek(offset)
                    message = self._parse(f.readline())
                    if message is not None:
                        out.append(message)
            return out

    def append(self, topic: str, payload: str) -> Message:
        """Write one message durably (fsync) and give it its sequence number."""
        with self._lock:
            self._seq += 1
            message = Message(self._seq, topic, payload)
            line = json.dumps({"seq": message.seq, "topic": topic, "payload": payload}).encode() + b"\n"
            self._file.write(line)
            self._file.flush()
            os.fsync(self._file.fileno())
            self._index.append((message.seq, self._size))
            self._size += len(line)
            return message

    def acknowledge(self, seq: int) -> None:
        """The broker has `seq`; the position moves over every message acknowledged without a gap before it."""
        with self._lock:
            if seq <= self._acked:
                return
            self._done.add(seq)
            moved = False
            while self._acked + 1 in self._done:
                self._acked += 1
                self._done.discard(self._acked)
                moved = True
            if not moved:
                return
            while self._index and self._index[0][0] <= self._acked:
                self._index.pop(0)
            write_atomically(self.pos_path, str(self._acked).encode())
            if self._acked == self._seq:  # everything acknowledged: the file starts afresh
                self._file.truncate(0)
                self._size = 0

    @property
    def last_seq(self) -> int:
        """The newest message's sequence number."""
        with self._lock:
            return self._seq

    @property
    def unacknowledged(self) -> int:
        with self._lock:
            return self._seq - self._acked

    def close(self) -> None:
        with self._lock:
            self._file.close()
