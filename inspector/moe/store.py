"""Expert weights by (layer, expert): read from the checkpoint's shards, held in a pool under a ledger.

The pool is the device's expert cache (on a CPU-only box: a RAM pool in front
of the disk). Its bytes are reserved in a `MemoryLedger`, so the runtime's
budget accounts for the language model's experts beside the inspection experts.
Which experts stay is the policy's decision; the store only moves and counts.
"""
from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass, field

import torch

from ..runtime.buffers import empty_for_read
from ..runtime.diskio import read_ranges_into
from ..runtime.memory import MemoryLedger
from ..runtime.safetensors_io import CorruptWeights
from .checkpoint import CheckpointError, ExpertKey, ExpertSpans, MoECheckpoint
from .quant.copy import QuantSpans
from .quant.weights import QPair, QWeight

PARTS = ("gate", "up", "down")  # an expert's sub-experts (FIRM-MoE): its three projections, in compute order


@dataclass
class CopyTiming:
    """One host-to-GPU copy's CUDA events: its start and end on the copy stream, and the point on the compute stream
    where compute first needed it. What of the copy ran before that point was hidden behind compute; the rest,
    compute waited for."""

    started: object
    ended: object
    asked: object | None = None

    def done(self) -> bool:
        return self.asked is not None and self.ended.query() and self.asked.query()

    def seconds(self) -> tuple[float, float]:
        """(the copy's duration, the part of it compute waited for), from the events (all of them done)."""
        copy_ms = max(0.0, self.started.elapsed_time(self.ended))
        waited_ms = min(copy_ms, max(0.0, self.asked.elapsed_time(self.ended)))
        return copy_ms / 1e3, waited_ms / 1e3


@dataclass
class CopyOverlap:
    """The copy stream's copies that compute used: how long they ran and how much of that compute waited for."""

    copies: int = 0
    copy_s: float = 0.0
    waited_s: float = 0.0
    unused: int = 0  # copies dropped from the log before compute asked for them (evicted unused, or too old)
    pending: list[CopyTiming] = field(default_factory=list)
    KEEP = 4096  # copies kept waiting for their first use; beyond that the oldest unused are given up

    @property
    def hidden_share(self) -> float | None:
        return 1.0 - self.waited_s / self.copy_s if self.copy_s > 0 else None

    def add(self, timing: CopyTiming) -> None:
        self.pending.append(timing)
        if len(self.pending) > self.KEEP:
            self.fold(wait=False)

    def fold(self, wait: bool) -> None:
        """Count the copies whose events are done (`wait`: every used copy, synchronizing on them first)."""
        keep = []
        for t in self.pending:
            if t.asked is not None and wait:
                t.ended.synchronize()
                t.asked.synchronize()
            if t.done():
                copy_s, waited_s = t.seconds()
                self.copies += 1
                self.copy_s += copy_s
                self.waited_s += waited_s
            else:
                keep.append(t)
        excess = len(keep) - self.KEEP // 2
        if excess > 0:  # the oldest never asked for (prefetched and not, or not yet, used) are given up
            drop = {id(t) for t in [t for t in keep if t.asked is None][:excess]}
            keep = [t for t in keep if id(t) not in drop]
            self.unused += len(drop)
        self.pending = keep


@dataclass
class ExpertWeights:
    """One expert's weights. Its buffers exist whole from the start; `landed` says which projections are read
    into them (a sub-expert prefetch reads some), and `pending` is a read of the rest still in flight, which
    compute waits for only when it needs the down projection."""

    gate_up: torch.Tensor | QPair  # [2I, H]: gate rows then up rows, as transformers' fused layout (or quantized)
    down: torch.Tensor | QWeight  # [H, I]
    landed: frozenset[str] = frozenset(PARTS)
    pending: Future | None = field(default=None, repr=False, compare=False)
    ready: object | None = field(default=None, repr=False, compare=False)  # a CUDA event: its copy has landed
    timing: CopyTiming | None = field(default=None, repr=False, compare=False)  # the copy's events, for its overlap

    @property
    def nbytes(self) -> int:
        return _nbytes(self.gate_up) + _nbytes(self.down)

    @property
    def device(self) -> torch.device:
        return self.gate_up.device

    def to(self, device: torch.device) -> ExpertWeights:
        return ExpertWeights(self.gate_up.to(device, non_blocking=True), self.down.to(device, non_blocking=True),
                             self.landed)

    def tensors(self) -> list[torch.Tensor]:
        out = []
        for w in (self.gate_up, self.down):
            if isinstance(w, torch.Tensor):
                out.append(w)
            elif isinstance(w, QPair):
                out += [*w.gate.buffers(), *w.up.buffers()]
            else:
                out += list(w.buffers())
        return out

    def for_compute(self) -> None:
        """On a GPU, make the computing stream wait (on the device, not the host) for this expert's copy, and
        tell the allocator that stream uses its memory (so a release cannot hand it out while still in use)."""
        if self.ready is None:
            return
        stream = torch.cuda.current_stream(self.device)
        if self.timing is not None and self.timing.asked is None:
            self.timing.asked = torch.cuda.Event(enable_timing=True)
            self.timing.asked.record(stream)  # where compute stood when it first needed the copy
        stream.wait_event(self.ready)
        for t in self.tensors():
            t.record_stream(stream)

    def pinned(self) -> ExpertWeights:
        """The same buffers in page-locked memory (what has landed stays landed: an empty one stays empty)."""
        return ExpertWeights(self.gate_up.pin_memory(), self.down.pin_memory(), self.landed)

    @property
    def complete(self) -> bool:
        return self.landed == frozenset(PARTS)

    def wait(self) -> None:
        """Until every projection has landed (a failed read raises here, in the computing thread)."""
        if self.pending is not None:
            self.pending.result()
            self.pending = None


@dataclass
class StoreStats:
    loads: int = 0  # expert reads from disk (the switches)
    bytes_read: int = 0
    load_s: float = 0.0  # summed over reads (two at once count twice)
    busy_s: float = 0.0  # wall seconds with at least one read under way: how long the disk was kept busy
    part_reads: int = 0  # sub-expert reads (a whole expert is three)


def _nbytes(w: torch.Tensor | QPair | QWeight) -> int:
    return w.numel() * w.element_size() if isinstance(w, torch.Tensor) else w.nbytes


def _bytes_of(t: torch.Tensor) -> memoryview:
    return memoryview(t.reshape(-1).view(torch.uint8).numpy())


def _empty(spans: ExpertSpans | QuantSpans, pin: bool = False) -> ExpertWeights:
    """Buffers for one expert's read; `pin`: in page-locked memory, so the copy to a GPU is one async DMA."""
    w = _empty_pageable(spans)
    return w.pinned() if pin else w


def _empty_pageable(spans: ExpertSpans | QuantSpans) -> ExpertWeights:
    if isinstance(spans, QuantSpans):
        gate_up, down = spans.empty()
        return ExpertWeights(gate_up, down, frozenset())
    if spans.fused_index is None:
        gate, up, down = spans.gate, spans.up, spans.down
        if gate.shape != up.shape:
            raise CorruptWeights(f"{gate.path}: gate {gate.shape} and up {up.shape} projections differ in shape; "
                                 "the checkpoint does not match its config")
        # lined up with the file (buffers.py), so the disk reads in place: gate's half always, up's too when the
        # checkpoint's tensor sizes are multiples of the alignment (real checkpoints' are)
        return ExpertWeights(empty_for_read((gate.shape[0] * 2, *gate.shape[1:]), gate.dtype, gate.offset),
                             empty_for_read(down.shape, down.dtype, down.offset), frozenset())
    e, fused, down = spans.fused_index, spans.gate, spans.down
    return ExpertWeights(empty_for_read(fused.shape[1:], fused.dtype,  # gate_up_proj [E, 2I, H]
                                        fused.offset + e * (fused.nbytes // fused.shape[0])),
                         empty_for_read(down.shape[1:], down.dtype,  # down_proj [E, H, I]
                                        down.offset + e * (down.nbytes // down.shape[0])), frozenset())


def _quant_targets(spans: QuantSpans, w: ExpertWeights) -> dict[str, list[tuple[str, int, memoryview]]]:
    """A quantized expert: each projection's data and scales, from the copy into the expert's buffers."""
    held = {"gate": w.gate_up.gate, "up": w.gate_up.up, "down": w.down}
    out = {}
    for part, (data, scales) in spans.parts.items():
        out[part] = []
        for span, dest in ((data, held[part].data), (scales, held[part].scales)):
            if span.nbytes == 0:  # a bf16 copy has no scales
                continue
            view = _bytes_of(dest)
            if len(view) != span.nbytes:
                raise CorruptWeights(f"{span.path}: a {span.nbytes}-byte {part} tensor where {len(view)} bytes were "
                                     "expected; delete the quantized copy to write it again")
            out[part].append((span.path, span.offset, view))
    return out


def _targets(spans: ExpertSpans | QuantSpans, w: ExpertWeights) -> dict[str, list[tuple[str, int, memoryview]]]:
    """Each projection's (file, offset, destination) ranges: gate and up into the two halves of the fused gate_up,
    down into its own tensor; a fused checkpoint's expert is one row block of each fused tensor."""
    if isinstance(spans, QuantSpans):
        return _quant_targets(spans, w)
    halves = _bytes_of(w.gate_up)
    half = len(halves) // 2
    if spans.fused_index is None:
        out = {"gate": (spans.gate.path, spans.gate.offset, halves[:half]),
               "up": (spans.up.path, spans.up.offset, halves[half:]),
               "down": (spans.down.path, spans.down.offset, _bytes_of(w.down))}
        sizes = {"gate": spans.gate.nbytes, "up": spans.up.nbytes, "down": spans.down.nbytes}
    else:
        e = spans.fused_index
        row = spans.gate.nbytes // spans.gate.shape[0]
        drow = spans.down.nbytes // spans.down.shape[0]
        out = {"gate": (spans.gate.path, spans.gate.offset + e * row, halves[:half]),
               "up": (spans.gate.path, spans.gate.offset + e * row + half, halves[half:]),
               "down": (spans.down.path, spans.down.offset + e * drow, _bytes_of(w.down))}
        sizes = {"gate": row // 2, "up": row - row // 2, "down": drow}
    for part, (path, _, dest) in out.items():
        if len(dest) != sizes[part]:
            raise CorruptWeights(f"{path}: a {sizes[part]}-byte {part} projection where {len(dest)} bytes were "
                                 "expected; the checkpoint does not match its config")
    return {part: [target] for part, target in out.items()}


def _read_parts(spans: ExpertSpans | QuantSpans, w: ExpertWeights, parts: list[str], drop_cache: bool) -> int:
    """Read the named projections into `w`'s buffers, one open per file; returns the bytes read."""
    targets = _targets(spans, w)
    by_file: dict[str, list[tuple[int, memoryview]]] = {}
    for part in parts:
        for path, offset, dest in targets[part]:
            by_file.setdefault(path, []).append((offset, dest))
    for path, ranges in by_file.items():
        read_ranges_into(path, sorted(ranges, key=lambda r: r[0]), drop_cache)
    return sum(len(dest) for p in parts for _, _, dest in targets[p])


HOST_RESERVE = 4 * 2**30  # host RAM kept for the OS, the process and the line's own software


def physical_ram() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def pinnable_share(all_expert_bytes: int, other_bytes: int = 0, ram: int | None = None) -> float:
    """The share of all experts pinned host RAM can hold beside `other_bytes`, in hundredths (pinned pages
    cannot be swapped: asking for more than the box has fails the load or starves the system)."""
    free = max(0, (ram if ram is not None else physical_ram()) - HOST_RESERVE - other_bytes)
    return 1.0 if all_expert_bytes <= 0 else min(1.0, int(100 * free / all_expert_bytes) / 100)


class HostTier:
    """Experts held in host RAM between the pool and the disk, least recently used out first.

    On a box with a GPU this is the papers' CPU memory: experts wait here in pinned pages (a copy to the device
    is one DMA), and a policy that computes on the CPU (Fiddler, DAOP in decode) computes them here without
    moving them. On a CPU-only box it is a RAM cache in front of the disk beside the pool (the pool is host RAM
    too, so an expert in both is counted in both ledgers: the accounting errs on the safe side). Its bytes are
    a ledger of the host budget.
    """

    def __init__(self, ledger: MemoryLedger, pin: bool) -> None:
        self.ledger, self.pin = ledger, pin
        self.held: OrderedDict[ExpertKey, ExpertWeights] = OrderedDict()
        self.hits = 0
        self.lock = threading.RLock()

    def get(self, key: ExpertKey) -> ExpertWeights | None:
        with self.lock:
            w = self.held.get(key)
            if w is not None:
                self.held.move_to_end(key)
                self.hits += 1
            return w

    def put(self, key: ExpertKey, w: ExpertWeights) -> None:
        """Keep a complete host copy, making room by dropping the least recently used; too big: not kept."""
        with self.lock:
            if key in self.held or w.nbytes > self.ledger.capacity:
                return
            while self.ledger.free < w.nbytes and self.held:
                old, _ = self.held.popitem(last=False)
                self.ledger.release(f"host:{old}")
            if self.pin and torch.cuda.is_available():
                w = w.pinned()
            self.ledger.reserve(f"host:{key}", w.nbytes)
            self.held[key] = ExpertWeights(w.gate_up, w.down)

    def close(self) -> None:
        with self.lock:
            for key in self.held:
                self.ledger.release(f"host:{key}")
            self.held.clear()


class ExpertStore:
    """The pool's contents and its byte accounting; pinned experts (in use by a running layer) never leave."""

    def __init__(self, ckpt: MoECheckpoint, device: torch.device, ledger: MemoryLedger,
                 drop_page_cache: bool = True, host: HostTier | None = None) -> None:
        self.ckpt, self.device, self.ledger = ckpt, device, ledger
        self.host = host
        self.drop_page_cache = drop_page_cache
        self.resident: dict[ExpertKey, ExpertWeights] = {}
        self.recency: dict[int, OrderedDict[ExpertKey, None]] = {}  # per layer, least recently used first
        self.pinned: dict[ExpertKey, int] = {}
        self.stats = StoreStats()
        self.lock = threading.RLock()
        self.copy_stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.copies = CopyOverlap()  # the copy stream's overlap with compute (GPU pools)
        self._reading = 0  # reads under way, and since when one has been (for `stats.busy_s`)
        self._busy_since = 0.0

    def load(self, key: ExpertKey) -> ExpertWeights:
        """The expert's weights read from disk onto the pool's device (not installed), counted."""
        return self.load_parts(key, PARTS)

    def load_parts(self, key: ExpertKey, parts: tuple[str, ...] | list[str],
                   into: ExpertWeights | None = None, on_host: bool = False) -> ExpertWeights:
        """Read some of an expert's projections (all three: the whole expert) into fresh buffers, or into
        `into`, a partly read expert, to complete it. A whole expert held by the host tier comes from there (no
        disk read); a fresh disk read counts as one load (a switch); every projection read counts its bytes.
        On a GPU the buffers are read on the host and copied whole once complete (`on_host`: left there)."""
        if into is None and self.host is not None and set(parts) >= set(PARTS):
            held = self.host.get(key)
            if held is not None:
                return held if on_host else self._to_device(held)
        t0 = time.perf_counter()
        spans = self.ckpt.experts[key]
        w = into if into is not None else _empty(spans, pin=self.copy_stream is not None)
        todo = [p for p in PARTS if p in parts and p not in w.landed]
        self._reading_starts()
        try:
            nbytes = _read_parts(spans, w, todo, self.drop_page_cache) if todo else 0
        except (OSError, EOFError) as e:
            raise CheckpointError(f"expert {key} could not be read from {spans.gate.path} ({e}); the checkpoint "
                                  "changed or is damaged since it was opened: copy it again") from e
        finally:
            self._reading_ends()
        w = ExpertWeights(w.gate_up, w.down, w.landed | frozenset(todo))
        with self.lock:
            self.stats.loads += into is None
            self.stats.part_reads += len(todo)
            self.stats.bytes_read += nbytes
            self.stats.load_s += time.perf_counter() - t0
        if not w.complete:
            return w
        if self.host is not None:
            self.host.put(key, w)
        return w if on_host else self._to_device(w)

    def _reading_starts(self) -> None:
        with self.lock:
            if self._reading == 0:
                self._busy_since = time.perf_counter()
            self._reading += 1

    def _reading_ends(self) -> None:
        with self.lock:
            self._reading -= 1
            if self._reading == 0:
                self.stats.busy_s += time.perf_counter() - self._busy_since

    def load_host(self, key: ExpertKey) -> ExpertWeights:
        """The expert in host RAM, to compute on the CPU where it lies (from the host tier, else read)."""
        return self.load_parts(key, PARTS, on_host=True)

    def _to_device(self, w: ExpertWeights) -> ExpertWeights:
        """Onto the pool's device. On a GPU the copy runs on the store's copy stream with an event recorded
        after it, so reads ahead (on the read threads) overlap the compute stream; compute waits for the event
        on the device (`ExpertWeights.for_compute`), never with a device-wide synchronize."""
        if self.device.type == "cpu":
            return ExpertWeights(w.gate_up, w.down)
        if self.copy_stream is None:
            return w.to(self.device)
        with torch.cuda.stream(self.copy_stream):
            started = torch.cuda.Event(enable_timing=True)
            started.record(self.copy_stream)
            out = w.to(self.device)
            out.ready = torch.cuda.Event(enable_timing=True)
            out.ready.record(self.copy_stream)
        out.timing = CopyTiming(started, out.ready)
        with self.lock:
            self.copies.add(out.timing)
        return out

    def copy_overlap(self, keep_unused: bool = True) -> CopyOverlap:
        """The copies so far that compute used (CUDA events, waited for), and the log cleared for the next; copies
        not used yet stay in it unless not `keep_unused` (a run's start: the placement's copies are not its own)."""
        with self.lock:
            self.copies.fold(wait=True)
            out = self.copies
            self.copies = CopyOverlap(pending=out.pending if keep_unused else [])
            out.pending = []
        return out

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
        if self.host is not None:
            self.host.close()
        with self.lock:
            for key in list(self.resident):
                self.ledger.release(str(key))
            self.resident.clear()
            self.recency.clear()
            for name in self.ledger.keys():
                if name.startswith("buffer:"):
                    self.ledger.release(name)
