"""One batched writer thread between the line and the database.

`put` hands a board over through a bounded queue: when the writer falls behind (a full disk, a slow
database) the line waits instead of filling memory. The thread writes batches in one transaction each; a
board is *stored* once its transaction commits (SQLite: synchronous=FULL) and *durable* once it is stored
or spooled (`on_durable`: a watched folder may then move its image away). While the database is
unreachable, batches go to the spool (results/spool.py) and are retried with exponential backoff, oldest
first; on the next start the spool is replayed before anything new. Writes are idempotent by inspection
id, so a replay or a commit whose acknowledgement was lost stores each board once. A board the database
refuses goes to its dead-letter table (or file) with the reason, and every other board is stored. When
even the spool cannot be written (a full disk) the boards are held in memory, first in line, the queue
fills, and the line stops taking boards until space returns: `status().disk_full` says so.
"""
from __future__ import annotations

import json
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .records import BoardRecord
from .rule_texts import TextOf
from .spool import Spool, SpoolEntry
from .store import ResultStore, StoreRejected, StoreUnavailable

Sink = Callable[[BoardRecord], None]
MAX_RETRY_S = 30.0
DRAIN_CHUNKS = 8  # spool chunks replayed per turn of the loop, so new boards keep moving to disk meanwhile


@dataclass
class WriterStatus:
    written: int  # boards stored by this writer (new rows)
    pending: int  # in memory: queued for the thread, or held back by a full disk
    spooled: int  # on disk, waiting for the database
    last_error: str | None
    duplicates: int = 0  # boards the database already had (a replay after a crash): skipped, not stored twice
    dead_letters: int = 0  # boards set aside with a reason (refused by the database, unreadable in the spool)
    disk_full: bool = False  # boards could neither be stored nor spooled: ingest waits
    alive: bool = True  # the thread runs (or has not started / stopped as asked)


class ResultWriter:
    def __init__(self, store: ResultStore, spool: Path, batch: int = 64, max_wait_s: float = 0.2,
                 retry_s: float = 1.0, on_written: Sink | None = None, prepare: Sink | None = None,
                 on_durable: Sink | None = None, capacity: int = 256, max_retry_s: float = MAX_RETRY_S,
                 rule_text: TextOf | None = None) -> None:
        """`prepare` runs on this thread for each board before it is stored (the crop keeper); `on_durable`
        once it is stored or spooled; `on_written` after its transaction commits (MQTT and other
        acknowledged-only sinks). `capacity` bounds the boards waiting in memory; retries back off from `retry_s`
        doubling up to `max_retry_s`. `rule_text` gives the text of a rule-set version, stored with its first board."""
        self.store = store
        self.rule_text = rule_text
        self.spool = Spool(spool)
        self.batch = batch
        self.max_wait_s = max_wait_s
        self.retry_s = retry_s
        self.max_retry_s = max_retry_s
        self.on_written = on_written
        self.on_durable = on_durable
        self.prepare = prepare
        self._queue: queue.Queue[BoardRecord | None] = queue.Queue(maxsize=max(1, capacity))
        self._held: deque[BoardRecord] = deque()  # neither stored nor spooled (disk full): retried first
        self._lock = threading.Lock()
        self._written = 0
        self._duplicates = 0
        self._dead_db = 0
        self._last_error: str | None = None
        self._disk_full = False
        self._failures = 0  # consecutive: the backoff's exponent
        self._thread = threading.Thread(target=self._loop, name="result-writer", daemon=True)
        self._stopping = False
        self._started = False

    def start(self) -> None:
        self._started = True
        self._thread.start()

    def put(self, board: BoardRecord) -> None:
        """Hand a board over; waits while `capacity` boards are already waiting (back-pressure). If the
        thread has died the board is spooled here, so a dead writer loses nothing it was given."""
        if self._stopping:
            raise RuntimeError("the result writer is stopping; no new results")
        while True:
            try:
                self._queue.put(board, timeout=0.5)
                return
            except queue.Full:
                if self._started and not self._thread.is_alive():
                    try:
                        with self._lock:
                            self.spool.append([board])
                    except OSError as exc:
                        self._hold([board], exc)
                    return

    def close(self, timeout: float | None = 30.0) -> WriterStatus:
        """Flush what was put, then stop; whatever the database refused stays in the spool."""
        self._stopping = True
        deadline = time.monotonic() + (timeout or 30.0)
        while self._thread.is_alive() and time.monotonic() < deadline:
            try:
                self._queue.put(None, timeout=0.2)
                break
            except queue.Full:
                continue
        self._thread.join(max(0.0, deadline - time.monotonic()))
        return self.status()

    @property
    def disk_full(self) -> bool:
        """Results are held in memory because neither the database nor the spool takes them."""
        with self._lock:
            return self._disk_full

    def status(self) -> WriterStatus:
        with self._lock:
            alive = not self._started or self._thread.is_alive() or self._stopping
            return WriterStatus(self._written, self._queue.qsize() + len(self._held), self.spool.count,
                                self._last_error, self._duplicates, self._dead_db + self.spool.dead,
                                self._disk_full, alive)

    # -- the thread ---------------------------------------------------------------------------------
    def _loop(self) -> None:
        done = False
        retry_at = 0.0
        give_up_at: float | None = None
        while True:
            batch: list[BoardRecord] = []
            try:
                batch, sentinel = self._take()
                done = done or sentinel
                self._prepare(batch)
                if self.spool.count and time.monotonic() >= retry_at and not self._drain_spool():
                    retry_at = time.monotonic() + self._backoff()
                if batch:
                    if self.spool.count:  # keep the order: behind what is already waiting on disk
                        self._to_spool(batch)
                    elif not self._store(batch):
                        retry_at = time.monotonic() + self._backoff()
                batch = []
            except Exception as exc:  # noqa: BLE001 - the writer must outlive any one bad turn
                self._fail(f"result writer: {type(exc).__name__}: {exc}")
                if batch:
                    with self._lock:
                        self._held.extendleft(reversed(batch))
                time.sleep(self.retry_s)
            if done:  # a few last tries for what is spooled or held, then stop; the spool stays for next start
                if not (self.spool.count or self._held) and self._queue.empty():
                    return
                give_up_at = give_up_at or time.monotonic() + 5 * self.retry_s
                if time.monotonic() > give_up_at:
                    return
                time.sleep(self.retry_s / 5)

    def _backoff(self) -> float:
        with self._lock:
            self._failures += 1
            return min(self.max_retry_s, self.retry_s * 2 ** (self._failures - 1))

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

    def _store(self, batch: list[BoardRecord], durable_already: bool = False) -> bool:
        """Store a batch; refused boards are set aside one by one. False (and the rest spooled, unless they
        are already on disk) when the database is unavailable."""
        try:
            new = self.store.write(batch, self.rule_text)
        except StoreUnavailable as exc:
            self._fail(str(exc))
            if not durable_already:
                self._to_spool(batch)
            return False
        except StoreRejected:
            return self._store_one_by_one(batch, durable_already)
        self._acknowledge(batch, new, durable_already)
        return True

    def _store_one_by_one(self, batch: list[BoardRecord], durable_already: bool) -> bool:
        for i, board in enumerate(batch):
            try:
                new = self.store.write([board], self.rule_text)
            except StoreUnavailable as exc:
                self._fail(str(exc))
                if not durable_already:
                    self._to_spool(batch[i:])
                return False
            except StoreRejected as exc:
                self._set_aside(board, str(exc))
                if not durable_already and self.on_durable:
                    self.on_durable(board)
                continue
            self._acknowledge([board], new, durable_already)
        return True

    def _set_aside(self, board: BoardRecord, reason: str) -> None:
        """A refused board: into the database's dead_letters table, else the dead-letter file."""
        self._fail(f"board {board.board_serial} ({board.inspection_id}) refused and set aside: {reason}")
        try:
            self.store.dead_letter(board, reason)
            with self._lock:
                self._dead_db += 1
            return
        except StoreUnavailable:
            pass
        if not self.spool.dead_letter(json.dumps(board.to_json()).encode(), reason):
            raise OSError(f"cannot set board {board.board_serial} aside in the database or {self.spool.dead_path}")

    def _acknowledge(self, batch: list[BoardRecord], new: int, durable_already: bool = False) -> None:
        with self._lock:
            self._written += new
            self._duplicates += len(batch) - new
            self._last_error = None
            self._failures = 0
            if not self._held:
                self._disk_full = False  # whatever was held found its way to the database
        for board in batch:
            if self.on_durable and not durable_already:
                self.on_durable(board)
            if self.on_written:  # a replayed duplicate too: its publication may have been lost with the crash
                self.on_written(board)

    def _fail(self, message: str) -> None:
        with self._lock:
            self._last_error = message

    # -- the spool ----------------------------------------------------------------------------------
    def _to_spool(self, batch: list[BoardRecord]) -> None:
        try:
            with self._lock:
                self.spool.append(batch)
                self._disk_full = False
        except OSError as exc:
            self._hold(batch, exc)
            time.sleep(self.retry_s)
            return
        if self.on_durable:
            for board in batch:
                self.on_durable(board)

    def _hold(self, batch: list[BoardRecord], exc: OSError) -> None:
        """Neither stored nor spooled (disk full): keep them in memory, first in line, and say so."""
        with self._lock:
            self._last_error = (f"cannot spool {len(batch)} board(s) to {self.spool.path}: {exc.strerror or exc}; "
                                "held in memory and ingest waits until space returns")
            self._disk_full = True
            self._held.extendleft(reversed(batch))

    def _drain_spool(self) -> bool:
        """Store spooled boards, oldest first, a few chunks a turn; True when the spool is empty afterwards."""
        for _ in range(DRAIN_CHUNKS):
            entries = self.spool.peek(self.batch)
            if not entries:
                return True
            unreadable = [e for e in entries if e.board is None]
            for e in unreadable:
                if not self.spool.dead_letter(e.raw, e.reason or "unreadable"):
                    self._fail(f"cannot write {self.spool.dead_path}; an unreadable spool line waits")
                    return False
            if unreadable:
                self._fail(f"{len(unreadable)} unreadable spool line(s) moved to {self.spool.dead_path}: "
                           f"{unreadable[-1].reason}")
            boards = [e.board for e in entries if e.board is not None]
            if boards and not self._store(boards, durable_already=True):
                return False
            self._consume(entries)
        return not self.spool.count

    def _consume(self, entries: list[SpoolEntry]) -> None:
        with self._lock:
            self.spool.consume(entries)
