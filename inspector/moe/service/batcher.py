"""Serving several requests on one offloaded model: one engine thread, continuous batching of decode steps.

Requests wait in a bounded first-come queue. Between decode steps the engine
thread takes what is waiting, as many as the batch has room for, prefills them
in one pass and, when the policy allows (`MoEPolicy.batches`) and the model's
cache can be padded, adds them as rows to the running batch; every decode step
then serves every row at once, so an expert read for one sequence serves all of
them. A policy that keeps per-sequence state serves one request after another
in arrival order. The first prefill runs alone: it tells whether this model's
cache can be padded at all.

The engine thread's torch thread count is the operator's, or measured on its
first decode steps (threads.py). All of the model's compute runs on this
thread, the batched-step kernel timing included: a second thread that once ran
a parallel torch op keeps an OpenMP team, and two teams on a small box make
libgomp stop spin-waiting, so every op of the engine then pays a wake-up.

Only this thread touches the model and the runtime, so requests never share a
policy's per-sequence state by accident. A request that fails (its prefill
raises) fails alone: a prefill of several that raises is tried again one
request at a time. A decode step that raises fails the rows in it, and the
engine goes on with the next request. A fault in the engine's own code between
the model's calls ends the requests it held, never the thread.
"""
from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..engine import GenStats, Meter, OffloadedLM
from .kvbatch import KVBatch, batchable
from .sampling import Sampling, next_token
from .threads import REMEASURE_S, ComputeThreads, candidates


class QueueFull(RuntimeError):
    """More requests are waiting than the server takes; try again shortly."""


@dataclass
class Event:
    """What a request hears from the engine: a token, or its end (`finish`: stop, length, cancelled, error)."""

    token: int | None
    stats: GenStats
    finish: str | None = None
    error: BaseException | None = None


@dataclass
class Job:
    prompt: torch.Tensor  # [1, T], already fitted to the context
    max_new_tokens: int
    sampling: Sampling
    emit: Callable[[Event], None]  # called on the engine thread; must not block
    eos: frozenset[int] = frozenset()
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    stats: GenStats = field(default_factory=GenStats)
    submitted: float = field(default_factory=time.perf_counter)
    cancelled: threading.Event = field(default_factory=threading.Event)
    ended: bool = False  # its finish was sent: a request ends once

    def cancel(self) -> None:
        """The client has gone or has what it wanted (a stop string): free the row at the next step."""
        self.cancelled.set()


@dataclass
class _Row:
    job: Job
    last: int  # the newest token, fed at the next step
    generator: torch.Generator | None
    started: float


@dataclass
class BatcherStats:
    requests: int = 0
    failed: int = 0
    prefills: int = 0  # prefill passes (several requests may share one: requests / prefills)
    steps: int = 0
    rows_stepped: int = 0  # sum over steps of the rows in them (mean batch = rows_stepped / steps)
    peak_rows: int = 0


class Batcher:
    def __init__(self, lm: OffloadedLM, max_batch: int = 8, max_waiting: int = 64,
                 threads: int | None = None, remeasure_s: float | None = REMEASURE_S) -> None:
        """`threads`: the engine's torch thread count; None: the fastest of 1, 2, 4, ... cores, measured (and
        measured again once a choice is `remeasure_s` old)."""
        self.lm = lm
        self.threads = ComputeThreads(candidates(), given=threads or None, remeasure_s=remeasure_s)
        self._threads_before = torch.get_num_threads()
        self.max_batch = max(1, max_batch) if lm.runtime.policy.batches else 1
        self.max_waiting = max_waiting
        self.stats = BatcherStats()
        self._waiting: deque[Job] = deque()
        self._rows: list[_Row] = []
        self._kv = KVBatch()
        self._prefill_together = False  # set once a prefill showed this model's cache can be padded
        self._cond = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="llm-engine", daemon=True)
        self._thread.start()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def active(self) -> int:
        return len(self._rows)

    def submit(self, job: Job) -> None:
        with self._cond:
            if self._stop:
                raise RuntimeError("the language model is shutting down")
            if len(self._waiting) >= self.max_waiting:
                raise QueueFull(f"{len(self._waiting)} requests are already waiting; retry in a moment")
            self._waiting.append(job)
            self._cond.notify()

    def close(self, timeout: float = 30.0) -> None:
        """Finish nothing new; requests still waiting end as cancelled."""
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join(timeout)

    # -- the engine thread ------------------------------------------------------------------------------
    def _run(self) -> None:
        meter = self.lm.meter()
        if self.threads.given is not None:  # the operator's count, from the first prefill on
            torch.set_num_threads(self.threads.given)
        if self.max_batch > 1:  # how this box multiplies a batched step's few rows by an expert (moe/kernels.py)
            try:  # timed here, not by the caller: this thread's OpenMP team is to be the process's only one
                self.lm.tune_batched(self.max_batch)
            except Exception:  # noqa: BLE001 - untuned products are F.linear's: slower, never wrong
                pass
        while True:
            with self._cond:
                while not self._stop and not self._waiting and not self._rows:
                    self._cond.wait()
                if self._stop:
                    break
                jobs: list[Job] = []
                while self._waiting and len(self._rows) + len(jobs) < self.max_batch \
                        and (not jobs or self._prefill_together):
                    jobs.append(self._waiting.popleft())
            self.stats.requests += len(jobs)
            try:
                if jobs:
                    self._start(jobs, meter)
                if self._rows:
                    self._step(meter)
            except Exception as exc:  # noqa: BLE001 - a fault outside the model's calls: its requests end, not
                self._fault(jobs, exc)  # the thread (a dead engine thread would leave every client waiting)
        for row in self._rows:
            self._end(row.job, "cancelled")
        for job in self._waiting:
            self._end(job, "cancelled")
        torch.set_num_threads(self._threads_before)  # the process as it was (a bench runs engines one by one)

    def _fault(self, jobs: list[Job], exc: Exception) -> None:
        """The engine's own code raised between the model's calls: the requests it held end with the error (once
        each), the batch starts empty, and the engine goes on with those still waiting."""
        for job in [*jobs, *(r.job for r in self._rows)]:
            if not job.ended:
                self.stats.failed += 1
                self._end(job, "error", exc)
        self._rows, self._kv = [], KVBatch()
        self.lm.runtime.drop_staged()

    def _start(self, jobs: list[Job], meter: Meter) -> None:
        """Prefill these requests together, send each its first token, and add those that go on as rows."""
        for job in [job for job in jobs if job.cancelled.is_set()]:
            jobs.remove(job)
            self._end(job, "cancelled")
        if not jobs:
            return
        for job in jobs:
            job.stats.prompt_tokens = job.prompt.shape[1]
        started = time.perf_counter()
        meter.charge([])
        try:
            logits, cache, pads = self.lm.prefill_many([job.prompt for job in jobs], joining=bool(self._rows))
        except Exception as exc:  # noqa: BLE001 - the request fails alone; the engine goes on
            if len(jobs) > 1:  # which one? each alone, so the others still run
                for job in jobs:
                    self._start([job], meter)
                return
            self.stats.failed += 1
            self._end(jobs[0], "error", exc)
            return
        self.stats.prefills += 1
        meter.charge([job.stats for job in jobs])  # a shared prefill is charged to each of its requests
        if not batchable(cache):  # this model's cache cannot be padded: one sequence at a time
            self.max_batch = 1
        else:
            self._prefill_together = self.max_batch > 1
        rows = [_Row(job, 0, job.sampling.generator(), started) for job in jobs]
        keep = [i for i, row in enumerate(rows) if self._emit(row, logits[i])]
        if not keep:
            return
        fresh = KVBatch()
        fresh.join(cache, pads)
        fresh.keep(keep)  # those that ended at their first token leave no row
        self._rows += [rows[i] for i in keep]
        self._kv.join(fresh.cache, fresh.pads)

    def _step(self, meter: Meter) -> None:
        rows = self._rows
        tokens = torch.tensor([[r.last] for r in rows], dtype=torch.long, device=self.lm.device)
        mask, positions = self._kv.step_inputs()
        meter.charge([])
        self.threads.begin_step(len(rows))
        stalled = self.lm.runtime.stall_s
        try:
            logits = self.lm.step(tokens, self._kv.cache, mask, positions)
            self.threads.end_step(len(rows), waited=self.lm.runtime.stall_s - stalled)
        except Exception as exc:  # noqa: BLE001 - the rows of this step fail; the engine goes on
            for r in rows:
                self.stats.failed += 1
                self._end(r.job, "error", exc)
            self._rows, self._kv = [], KVBatch()
            return
        meter.charge([r.job.stats for r in rows])
        self.stats.steps += 1
        self.stats.rows_stepped += len(rows)
        self.stats.peak_rows = max(self.stats.peak_rows, len(rows))
        keep = [i for i, r in enumerate(rows) if self._emit(r, logits[i])]
        self._rows = [rows[i] for i in keep]
        self._kv.keep(keep)

    def _emit(self, row: _Row, logits: torch.Tensor) -> bool:
        """Pick and send the row's next token; whether the row goes on."""
        job = row.job
        if job.cancelled.is_set():
            self._end(job, "cancelled")
            return False
        token = next_token(logits, job.sampling, row.generator)
        now = time.perf_counter()
        s = job.stats
        if s.tokens == 0:
            s.ttft_s = now - job.submitted  # what the client waited, queueing included
        s.tokens += 1
        s.seconds = now - row.started
        row.last = token
        if not _send(job, Event(token, s)):
            return False
        if token in job.eos:
            self._end(job, "stop")
            return False
        if s.tokens >= job.max_new_tokens:
            self._end(job, "length")
            return False
        return True

    @staticmethod
    def _end(job: Job, finish: str, error: BaseException | None = None) -> None:
        if not job.ended:
            job.ended = True
            _send(job, Event(None, job.stats, finish, error))


def _send(job: Job, event: Event) -> bool:
    """Hand an event to the request's listener; one that cannot take it (its client's loop has closed) cancels
    that request only, never the engine thread."""
    try:
        job.emit(event)
        return True
    except Exception:  # noqa: BLE001 - the listener's failure is its request's end
        job.cancel()
        return False
