"""An executor: one worker thread on one device with its own queue and model pool."""
from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import torch

from ...experts.base import Architecture, BadInput, Prediction
from ...runtime.devices import Device
from .expert_manager import HISTORY, ExpertManager, ExpertUnavailable
from .profile import ArchProfile, DeviceProfile
from .queue import ExecutorQueue
from .timeline import Concurrency, ExecutorTime

if TYPE_CHECKING:
    from .policies import Arranger
    from .request import Request

BatchDone = Callable[["Executor", list["Request"], list[Prediction] | None, str | None], None]


class ExecutorCore:
    """What the scheduler sees of an executor: its device, queue, pool and how it cuts batches.

    The threaded `Executor` runs batches for real; the simulator drives the
    same core on a virtual clock.
    """

    def __init__(self, index: int, device: Device, manager: ExpertManager, profile: DeviceProfile,
                 batch_bytes: int, threads: int, prefetch: bool, arranger: Arranger | None = None) -> None:
        self.index = index
        self.arranger = arranger  # the policy's: it may reorder the queue before each batch is cut
        self.device = device
        self.manager = manager
        self.profile = profile
        self.batch_bytes = batch_bytes
        self.threads = threads
        self.prefetch = prefetch
        self.queue = ExecutorQueue()
        self._profiles: dict[str, ArchProfile] = {}  # expert -> its architecture's profile here (asked per request)
        self.time = ExecutorTime()  # written by the executor's own thread (or the simulator) only
        self.concurrency = Concurrency()  # the engine gives the executors of one device one counter

    @property
    def name(self) -> str:
        return f"{self.device.key}#{self.index}"

    def profile_for(self, expert: str) -> ArchProfile:
        prof = self._profiles.get(expert)
        if prof is None:
            prof = self._profiles[expert] = self.profile.get(self.manager.zoo.architecture(expert).key, self.threads)
        return prof

    def cut_batch(self) -> tuple[str, list[Request]] | None:
        """The next batch (the threaded executor and the simulator both cut here, under the engine lock): the
        arranger brings the queue's order up to date with the pool, then the batch splitter cuts the head group."""
        if self.arranger is not None:
            self.arranger.refresh(self.queue, self.manager.has)
        return self.queue.take_batch(self.cut_limit)

    def cut_limit(self, expert: str) -> int:
        """The batch limit of the group being cut; 1 for an unprofiled or unknown expert (it fails at acquire,
        with its reason)."""
        try:
            return self.batch_limit(expert)
        except KeyError:
            return 1

    def batch_limit(self, expert: str) -> int:
        """min(memory-feasible, profiled max batch): the batch splitter's cut (§4.2)."""
        prof = self.profile_for(expert)
        feasible = max(1, self.batch_bytes // max(1, prof.act_bytes_per_sample))
        return max(1, min(prof.max_batch, feasible))

    def next_expert_to_prefetch(self, current: str) -> str | None:
        """The next group's expert, if it is not the one running (call under the engine lock).

        Only the next: prefetching the first queued expert the pool lacks, further back, was measured to triple
        the switches (bench, 2026-11-26: 166 against 62-68), its loads evicting experts the stream soon asked for
        again, which no queue showed yet."""
        upcoming = [e for e in self.queue.upcoming_experts() if e != current]
        return upcoming[0] if upcoming else None


def next_use(executors: Iterable[ExecutorCore], pool: str) -> dict[str, int]:
    """Experts waiting on the executors that draw on `pool` -> how many groups run before their first one.

    What queue-aware eviction consults; call under the engine lock.
    """
    ahead: dict[str, int] = {}
    for ex in executors:
        if ex.manager.name == pool:
            for pos, expert in enumerate(ex.queue.upcoming_experts()):
                ahead[expert] = min(pos, ahead.get(expert, pos))
    return ahead


class Executor(ExecutorCore):
    """One worker thread on one device, serving its queue batch by batch."""

    def __init__(
        self,
        index: int,
        device: Device,
        manager: ExpertManager,
        profile: DeviceProfile,
        batch_bytes: int,
        threads: int,
        prefetch: bool,
        lock: threading.RLock,
        on_done: BatchDone,
        arranger: Arranger | None = None,
    ) -> None:
        super().__init__(index, device, manager, profile, batch_bytes, threads, prefetch, arranger)
        self.wake = threading.Condition(lock)
        self._lock = lock
        self._on_done = on_done
        self._stopping = False
        # (architecture key, batch size, seconds computing, executors computing on the device meanwhile, a CPU
        # load in progress counted as one, the first batch since its expert's switch) of the newest batches;
        # bounded for a line's months
        self.served: deque[tuple[str, int, float, float, bool]] = deque(maxlen=HISTORY)
        self._stream: torch.cuda.Stream | None = None  # made by the executor's thread on first use (GPU only)
        self._thread = threading.Thread(target=self._loop, name=f"executor-{index}-{device.key}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            self.wake.notify_all()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _next_batch(self) -> tuple[str, list[Request]] | None:
        with self._lock:
            t0 = time.perf_counter()
            while not self.queue.groups:
                if self._stopping:
                    return None
                self.wake.wait()
            t1 = time.perf_counter()
            self.time.idle += t1 - t0
            batch = self.cut_batch()
            self.time.other += time.perf_counter() - t1
            return batch

    def _loop(self) -> None:
        torch.set_num_threads(self.manager.backend.torch_threads(self.threads))  # one where a runtime computes
        while True:
            item = self._next_batch()
            if item is None:
                return
            expert, batch = item
            self._serve(expert, batch)

    def _serve(self, expert: str, batch: list[Request]) -> None:
        try:
            module = self.manager.acquire(expert, self.time)
        except ExpertUnavailable as exc:
            self._on_done(self, batch, None, str(exc))
            return
        preds: list[Prediction] | None = None
        error: str | None = None
        try:
            if self.prefetch:
                self._prefetch_next(expert)
            arch = self.manager.zoo.architecture(expert)
            cold = self.manager.first_batch(expert)
            t_run = time.perf_counter()
            execs0, all0 = self.concurrency.enter()
            try:
                preds = self._run(arch, module, batch)
            finally:
                execs1, all1 = self.concurrency.leave()
            executors, beside = (execs0 + execs1) / 2, (all0 + all1) / 2
            ran = time.perf_counter() - t_run
            self.time.compute += ran
            self.time.profiled += self._expected_s(expert, len(batch), executors, cold)
            self.time.batches += 1
            self.time.requests += len(batch)
            self.served.append((arch.key, len(batch), ran, beside, cold))
        except BadInput as exc:
            error = str(exc)
        except Exception as exc:  # a failing expert must not take the executor down
            error = f"expert {expert!r} failed: {type(exc).__name__}: {exc}"
        finally:
            self.manager.release(expert)
        t_done = time.perf_counter()
        self._on_done(self, batch, preds, error)
        self.time.other += time.perf_counter() - t_done

    def _expected_s(self, expert: str, n: int, beside: float, cold: bool = False) -> float:
        """What the profile says this batch takes, shared with `beside` - 1 other executors of the device."""
        try:
            solo = self.profile_for(expert).batch_s(n, cold)
        except KeyError:
            return 0.0
        return solo * beside / self.profile.speedup(beside) if beside > 1 else solo

    def _run(self, arch: Architecture, module: torch.nn.Module, batch: list[Request]) -> list[Prediction]:
        """One batch: preprocess, forward, predictions; on a GPU on this executor's own CUDA stream.

        One stream per executor lets the executors of one GPU overlap their
        kernels (the paper's executors are processes, each with its own
        context); the predictions are read back on that stream.
        """
        if self.device.is_cuda and self._stream is None:
            self._stream = torch.cuda.Stream(self.device.torch)
        with torch.cuda.stream(self._stream) if self._stream is not None else contextlib.nullcontext():
            x = arch.preprocess_many([r.image for r in batch]).to(self.device.torch)
            return self.manager.backend.run(arch, module, x)

    def _prefetch_next(self, current: str) -> None:
        """Load the next group's expert while this batch runs (beyond the paper)."""
        with self._lock:
            nxt = self.next_expert_to_prefetch(current)
        if nxt:
            self.manager.prefetch(nxt)
