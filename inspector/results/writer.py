"""One batched writer thread between the line and the database.

`put` never blocks inference: it appends to an in-memory queue. The thread
writes batches in one transaction each; a board is *acknowledged* once its
transaction commits (SQLite: synchronous=FULL). While the database is
unreachable or the disk is full, batches go to a spool file (JSON lines,
fsynced) and are retried with backoff, oldest first; on the next start the
spool is replayed before anything new. When even the spool cannot be written
(a full disk), boards are held in memory, first in line, until space returns.
Nothing is dropped silently: what is waiting, spooled, held and failing is in
`status()` for the operator.
"""
from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .records import BoardRecord
from .store import ResultStore, StoreUnavailable

Sink = Callable[[BoardRecord], None]


@dataclass
class WriterStatus:
    written: int
    pending: int  # in memory: queued for the thread, or held back by a full disk
    spooled: int
    last_error: str | None


class ResultWriter:
    def __init__(self, store: ResultStore, spool: Path, batch: int = 64, max_wait_s: float = 0.2,
                 retry_s: float = 1.0, on_written: Sink | None = None, prepare: Sink | None = None) -> None:
        """`prepare` runs on this thread for each board before it is stored (the crop keeper);
        `on_written` after its transaction commits (MQTT and other acknowledged-only sinks)."""
        self.store = store
        self.spool = Path(spool)
        self.batch = batch
        self.max_wait_s = max_wait_s
        self.retry_s = retry_s
        self.on_written = on_written
        self.prepare = prepare
        self._queue: queue.Queue[BoardRecord | None] = queue.Queue()
        self._held: deque[BoardRecord] = deque()  # neither stored nor spooled (disk full): retried first
        self._lock = threading.Lock()
        self._written = 0
        self._spooled = self._spool_count()
        self._last_error: str | None = None
        self._thread = threading.Thread(target=self._loop, name="result-writer", daemon=True)
        self._stopping = False

    def start(self) -> None:
        self._thread.start()

    def put(self, board: BoardRecord) -> None:
        if self._stopping:
            raise RuntimeError("the result writer is stopping; no new results")
        self._queue.put(board)

    def close(self, timeout: float | None = 30.0) -> WriterStatus:
        """Flush what was put, then stop; whatever the database refused stays in the spool."""
        self._stopping = True
        self._queue.put(None)
        self._thread.join(timeout)
        return self.status()

    def status(self) -> WriterStatus:
        with self._lock:
            return WriterStatus(self._written, self._queue.qsize() + len(self._held), self._spooled, self._last_error)

    # -- the thread ---------------------------------------------------------------------------------
    def _loop(self) -> None:
        done = False
        retry_at = 0.0
        give_up_at: float | None = None
        while True:
            batch, sentinel = self._take()
            done = done or sentinel
            self._prepare(batch)
            if self._spooled and time.monotonic() >= retry_at and not self._drain_spool():
                retry_at = time.monotonic() + self.retry_s
            if batch:
                if self._spooled:  # keep the order: behind what is already waiting on disk
                    self._to_spool(batch)
                else:
                    try:
                        self.store.write(batch)
                        self._acknowledge(batch)
                    except StoreUnavailable as exc:
                        self._fail(str(exc))
                        self._to_spool(batch)
                        retry_at = time.monotonic() + self.retry_s
            if done:  # a few last tries for what is spooled or held, then stop; the spool stays for next start
                if not (self._spooled or self._held):
                    return
                give_up_at = give_up_at or time.monotonic() + 5 * self.retry_s
                if time.monotonic() > give_up_at:
                    return
                time.sleep(self.retry_s / 5)

    def _take(self) -> tuple[list[BoardRecord], bool]:
        """Up to `batch` boards: those held back first (oldest), then new ones; True once `close` was called."""
        with self._lock:
            batch = [self._held.popleft() for _ in range(min(self.batch, len(self._held)))]
        if batch:
            return batch, False
        end = time.monotonic() + self.max_wait_s
        while len(batch) < self.batch:
            try:
                item = self._queue.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                return batch, False
            if item is None:
                return batch, True
            batch.append(item)
        return batch, False

    def _prepare(self, batch: list[BoardRecord]) -> None:
        if self.prepare is None:
            return
        for board in batch:
            try:
                self.prepare(board)
            except Exception as exc:  # noqa: BLE001 - the result is stored even when its extras fail
                self._fail(f"preparing board {board.board_serial} failed: {exc}")

    def _acknowledge(self, batch: list[BoardRecord]) -> None:
        with self._lock:
            self._written += len(batch)
            self._last_error = None
        if self.on_written:
            for board in batch:
                self.on_written(board)

    def _fail(self, message: str) -> None:
        with self._lock:
            self._last_error = message

    # -- the spool ----------------------------------------------------------------------------------
    def _spool_count(self) -> int:
        if not self.spool.is_file():
            return 0
        with self.spool.open("rb") as f:
            return sum(1 for line in f if line.strip())

    def _to_spool(self, batch: list[BoardRecord]) -> None:
        self.spool.parent.mkdir(parents=True, exist_ok=True)
        try:
            with self.spool.open("a", encoding="utf-8") as f:
                for board in batch:
                    f.write(json.dumps(board.to_json()) + "\n")
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:  # disk full too: hold them in memory, first in line, and say so
            self._fail(f"cannot spool {len(batch)} board(s) to {self.spool}: {exc.strerror}; held in memory")
            with self._lock:
                self._held.extendleft(reversed(batch))
            time.sleep(self.retry_s)
            return
        with self._lock:
            self._spooled += len(batch)

    def _drain_spool(self) -> bool:
        """Write the spool to the database, oldest first; True when it is empty afterwards."""
        try:
            lines = [ln for ln in self.spool.read_text(encoding="utf-8").splitlines() if ln.strip()]
        except FileNotFoundError:
            lines = []
        boards = [BoardRecord.from_json(json.loads(ln)) for ln in lines]
        for i in range(0, len(boards), self.batch):
            chunk = boards[i:i + self.batch]
            try:
                self.store.write(chunk)
            except StoreUnavailable as exc:
                self._fail(str(exc))
                self._rewrite_spool(lines[i:])
                return False
            self._acknowledge(chunk)
        self._rewrite_spool([])
        return True

    def _rewrite_spool(self, lines: list[str]) -> None:
        tmp = self.spool.with_suffix(".tmp")
        tmp.write_text("".join(ln + "\n" for ln in lines), encoding="utf-8")
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, self.spool)
        if not lines:
            self.spool.unlink(missing_ok=True)
        with self._lock:
            self._spooled = len(lines)
