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
from dataclasses import dataclass

import torch

from ..runtime.diskio import read_ranges_into
from ..runtime.memory import MemoryLedger
from ..runtime.safetensors_io import CorruptWeights
from .checkpoint import CheckpointError, ExpertKey, ExpertSpans, MoECheckpoint


@dataclass
class ExpertWeights:
    gate_up: torch.Tensor  # [2I, H]: gate rows then up rows, as transformers' fused layout
    down: torch.Tensor  # [H, I]

    @property
    def nbytes(self) -> int:
        return self.gate_up.numel() * self.gate_up.element_size() + self.down.numel() * self.down.element_size()


@dataclass
class StoreStats:
    loads: int = 0  # expert reads from disk (the switches)
    bytes_read: int = 0
    load_s: float = 0.0


def _bytes_of(t: torch.Tensor) -> memoryview:
    return memoryview(t.view(-1).view(torch.uint8).numpy())


def _read(spans: ExpertSpans, drop_cache: bool) -> ExpertWeights:
    """Read one expert straight into its final tensors: gate and up into the two halves of the fused
    gate_up, down into its own; one open per file, no copy after the read."""
    if spans.fused_index is None:
        gate, up, down = spans.gate, spans.up, spans.down
        gate_up = torch.empty((gate.shape[0] + up.shape[0], *gate.shape[1:]), dtype=gate.dtype)
        out = torch.empty(down.shape, dtype=down.dtype)
        halves = _bytes_of(gate_up)
        for span, dest in ((gate, halves[:gate.nbytes]), (up, halves[gate.nbytes:]), (down, _bytes_of(out))):
            if len(dest) != span.nbytes:
                raise CorruptWeights(f"{span.path}: a {span.nbytes}-byte projection where {len(dest)} bytes "
                                     "were expected; the checkpoint does not match its config")
        by_file: dict[str, list[tuple[int, memoryview]]] = {}
        by_file.setdefault(gate.path, []).append((gate.offset, halves[:gate.nbytes]))
        by_file.setdefault(up.path, []).append((up.offset, halves[gate.nbytes:]))
        by_file.setdefault(down.path, []).append((down.offset, _bytes_of(out)))
        for path, ranges in by_file.items():
            read_ranges_into(path, ranges, drop_cache)
        return ExpertWeights(gate_up, out)
    e = spans.fused_index
    gate_up = torch.empty(spans.gate.shape[1:], dtype=spans.gate.dtype)  # gate_up_proj [E, 2I, H]
    down = torch.empty(spans.down.shape[1:], dtype=spans.down.dtype)  # down_proj [E, H, I]
    for span, t in ((spans.gate, gate_up), (spans.down, down)):
        row = span.nbytes // span.shape[0]
        read_ranges_into(span.path, [(span.offset + e * row, _bytes_of(t))], drop_cache)
    return ExpertWeights(gate_up, down)


class ExpertStore:
    """The pool's contents and its byte accounting; pinned experts (in use by a running layer) never leave."""

    def __init__(self, ckpt: MoECheckpoint, device: torch.device, ledger: MemoryLedger,
                 drop_page_cache: bool = True) -> None:
        self.ckpt, self.device, self.ledger = ckpt, device, ledger
        self.drop_page_cache = drop_page_cache
        self.resident: dict[ExpertKey, ExpertWeights] = {}
        self.recency: dict[int, OrderedDict[ExpertKey, None]] = {}  # per layer, least recently used first
        self.pinned: dict[ExpertKey, int] = {}
        self.stats = StoreStats()
        self.lock = threading.RLock()

    def load(self, key: ExpertKey) -> ExpertWeights:
        """The expert's weights read from disk onto the pool's device (not installed), counted."""
        t0 = time.perf_counter()
        spans = self.ckpt.experts[key]
        try:
            w = _read(spans, self.drop_page_cache)
        except (OSError, EOFError) as e:
            raise CheckpointError(f"expert {key} could not be read from {spans.gate.path} ({e}); the checkpoint "
                                  "changed or is damaged since it was opened: copy it again") from e
        if self.device.type != "cpu":
            w = ExpertWeights(w.gate_up.to(self.device, non_blocking=True), w.down.to(self.device, non_blocking=True))
        with self.lock:
            self.stats.loads += 1
            self.stats.bytes_read += w.nbytes
            self.stats.load_s += time.perf_counter() - t0
        return w

    def resident_in(self, layer: int) -> list[ExpertKey]:
        """The layer's resident experts, least recently used first."""
        with self.lock:
            return list(self.recency.get(layer, ()))

    def count_in(self, layer: int) -> int:
        with self.lock:
            return len(self.recency.get(layer, ()))

    def is_resident(self, key: ExpertKey) -> bool:
        with self.lock:
            return key in self.resident

    def pin_resident(self, key: ExpertKey) -> ExpertWeights | None:
        """A resident expert, pinned and marked most recently used; None when it is not in the pool."""
        with self.lock:
            w = self.resident.get(key)
            if w is not None:
                self.recency[key.layer].move_to_end(key)
                self.pinned[key] = self.pinned.get(key, 0) + 1
            return w

    def install(self, key: ExpertKey, w: ExpertWeights, pin: bool = False) -> None:
        """Keep the expert in the pool (its read buffer, if one was reserved, becomes the resident bytes)."""
        with self.lock:
            self.release_buffer(key)
            if key not in self.resident:
                self.ledger.reserve(str(key), w.nbytes)
                self.resident[key] = w
                self.recency.setdefault(key.layer, OrderedDict())[key] = None
            if pin:
                self.pinned[key] = self.pinned.get(key, 0) + 1

    def expert_bytes(self, key: ExpertKey) -> int:
        return self.ckpt.experts[key].nbytes

    def reserve_buffer(self, key: ExpertKey) -> None:
        """Account for a read's buffer before it is read: a prefetch in flight or an expert used once and dropped."""
        self.ledger.reserve(f"buffer:{key}", self.expert_bytes(key))

    def holds_buffer(self, key: ExpertKey) -> bool:
        return self.ledger.holds(f"buffer:{key}")

    def release_buffer(self, key: ExpertKey) -> None:
        if self.ledger.holds(f"buffer:{key}"):
            self.ledger.release(f"buffer:{key}")

    def release(self, key: ExpertKey) -> None:
        """The running layer is done with the expert: unpin it, or give back its buffer when it was not kept."""
        with self.lock:
            if self.pinned.get(key):
                self.pinned[key] -= 1
                if not self.pinned[key]:
                    del self.pinned[key]
            else:
                self.release_buffer(key)

    def evict(self, key: ExpertKey) -> None:
        with self.lock:
            if self.pinned.get(key):
                raise RuntimeError(f"expert {key} is in use and cannot be evicted")
            self.resident.pop(key)
            self.recency[key.layer].pop(key)
            self.ledger.release(str(key))

    def close(self) -> None:
        with self.lock:
            for key in list(self.resident):
                self.ledger.release(str(key))
            self.resident.clear()
            self.recency.clear()
            for name in self.ledger.keys():
                if name.startswith("buffer:"):
                    self.ledger.release(name)
