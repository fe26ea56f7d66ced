"""Expert weights by (layer, expert): read from the checkpoint's shards, held in a pool under a ledger.

The pool is the device's expert cache (on a CPU-only box: a RAM pool in front
of the disk). Its bytes are reserved in a `MemoryLedger`, so the runtime's
budget accounts for the language model's experts beside the inspection experts.
Which experts stay is the policy's decision; the store only moves and counts.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import torch

from ..runtime.diskio import read_range
from ..runtime.memory import MemoryLedger
from .checkpoint import ExpertKey, ExpertSpans, MoECheckpoint


@dataclass
class ExpertWeights:
    gate_up: torch.Tensor  # [2I, H]: gate rows then up rows, as transformers' fused layout
    down: torch.Tensor  # [H, I]

    @property
    def nbytes(self) -> int:
        return self.gate_up.numel() * self.gate_up.element_size() + self.down.numel() * self.down.element_size()


@dataclass
class StoreStats:
    loads: int = 0  # expert reads from disk into the pool (the switches)
    hits: int = 0
    bytes_read: int = 0
    load_s: float = 0.0
    prefetches: int = 0
    prefetch_hits: int = 0
    loads_per_layer: dict[int, int] = field(default_factory=dict)


def _read(spans: ExpertSpans, drop_cache: bool) -> ExpertWeights:
    if spans.fused_index is None:
        parts = [s.from_bytes(read_range(s.path, s.offset, s.nbytes, drop_cache)) for s in (spans.gate, spans.up)]
        gate_up = torch.cat(parts, dim=0)
        down = spans.down.from_bytes(read_range(spans.down.path, spans.down.offset, spans.down.nbytes, drop_cache))
        return ExpertWeights(gate_up, down.clone())
    e = spans.fused_index
    out = []
    for span in (spans.gate, spans.down):  # gate is gate_up_proj [E, 2I, H], down is down_proj [E, H, I]
        row = span.nbytes // span.shape[0]
        buf = read_range(span.path, span.offset + e * row, row, drop_cache)
        out.append(torch.frombuffer(buf, dtype=span.dtype).view(span.shape[1:]))
    return ExpertWeights(out[0], out[1])


class ExpertStore:
    def __init__(self, ckpt: MoECheckpoint, device: torch.device, ledger: MemoryLedger,
                 drop_page_cache: bool = True, dtype: torch.dtype | None = None) -> None:
        self.ckpt, self.device, self.ledger = ckpt, device, ledger
        self.drop_page_cache = drop_page_cache
        self.dtype = dtype
        self.resident: OrderedDict[ExpertKey, ExpertWeights] = OrderedDict()  # least recently used first
        self.pinned: dict[ExpertKey, int] = {}  # in use by a running layer: never evicted
        self.stats = StoreStats()
        self.lock = threading.RLock()
        self._loading: dict[ExpertKey, threading.Event] = {}
        self.prefetched: set[ExpertKey] = set()

    def expert_nbytes(self, key: ExpertKey) -> int:
        return self.ckpt.experts[key].nbytes

    def read(self, key: ExpertKey) -> ExpertWeights:
        """The expert's weights from disk, on the pool's device (not installed)."""
        w = _read(self.ckpt.experts[key], self.drop_page_cache)
        if self.dtype is not None:
            w = ExpertWeights(w.gate_up.to(self.dtype), w.down.to(self.dtype))
        if self.device.type != "cpu":
            w = ExpertWeights(w.gate_up.to(self.device, non_blocking=True), w.down.to(self.device, non_blocking=True))
        return w

    def is_resident(self, key: ExpertKey) -> bool:
        with self.lock:
            return key in self.resident

    def touch(self, key: ExpertKey) -> ExpertWeights | None:
        """A resident expert, marked most recently used; None when it is not in the pool."""
        with self.lock:
            w = self.resident.get(key)
            if w is not None:
                self.resident.move_to_end(key)
            return w

    def install(self, key: ExpertKey, w: ExpertWeights) -> None:
        with self.lock:
            if key in self.resident:
                return
            self.ledger.reserve(str(key), w.nbytes)
            self.resident[key] = w

    def evict(self, key: ExpertKey) -> None:
        with self.lock:
            if self.pinned.get(key):
                raise RuntimeError(f"expert {key} is in use and cannot be evicted")
            self.resident.pop(key)
            self.ledger.release(str(key))
            self.prefetched.discard(key)

    def load(self, key: ExpertKey, prefetch: bool = False) -> ExpertWeights:
        """Read from disk, counted; concurrent loads of one expert wait for the first."""
        with self.lock:
            waiting = self._loading.get(key)
            if waiting is None:
                self._loading[key] = threading.Event()
        if waiting is not None:
            waiting.wait()
            with self.lock:
                w = self.resident.get(key)
            return w if w is not None else self.load(key, prefetch)
        t0 = time.perf_counter()
        try:
            w = self.read(key)
        finally:
            with self.lock:
                self._loading.pop(key).set()
        dt = time.perf_counter() - t0
        with self.lock:
            s = self.stats
            s.loads += 1
            s.bytes_read += w.nbytes
            s.load_s += dt
            s.loads_per_layer[key.layer] = s.loads_per_layer.get(key.layer, 0) + 1
            if prefetch:
                s.prefetches += 1
                self.prefetched.add(key)
        return w

    def close(self) -> None:
        with self.lock:
            for key in list(self.resident):
                self.ledger.release(str(key))
            self.resident.clear()
