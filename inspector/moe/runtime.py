"""The mechanics every MoE policy shares: pool slots per layer, reads, prefetch, and the counting.

A policy (policies.py) only decides; this object does. It is the experts
modules' `ExpertSource`: told each layer's routing before the experts run,
asked for each expert's weights, told when the layer is done. Reads that a
prediction asks for run on background threads (disk reads release the GIL,
so they overlap the main thread's compute); an expert whose read is in flight
is waited for, never read twice.

A predicted expert lands in a staging area, not in the pool: a wrong
prediction then costs its read but evicts nothing. When the layer uses it,
the policy's `admit` decides whether it stays; when the layer passes without
it, its bytes are given back.

Every read's bytes are reserved in the pool's ledger before the read starts
(`buffer:` entries), so the budget holds the experts in flight too, and the
peak the benchmark reports is what the pool really used.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from ..runtime.memory import OverBudget
from .checkpoint import ExpertKey, MoECheckpoint
from .policies import MoEPolicy
from .store import ExpertStore, ExpertWeights


@dataclass
class PoolCounters:
    hits: int = 0  # selected expert resident when its layer ran
    misses: int = 0
    prefetches: int = 0  # reads a prediction started ahead of need
    prefetch_waits: int = 0  # a layer waited for a read already under way
    prefetch_used: int = 0  # a staged (prefetched) expert was used by the layer it was read for
    swaps: int = 0  # sequence-specific allocation moves (DAOP Algorithm 1)
    predicted: int = 0  # predicted (layer, expert) picks checked against the real routing
    predicted_right: int = 0
    degraded: int = 0  # picks replaced by a resident expert (graceful degradation)

    @property
    def prediction_accuracy(self) -> float | None:
        return self.predicted_right / self.predicted if self.predicted else None


class MoERuntime:
    def __init__(self, ckpt: MoECheckpoint, store: ExpertStore, policy: MoEPolicy, slots_per_layer: int,
                 routers: dict[int, torch.Tensor]) -> None:
        self.ckpt, self.store, self.policy = ckpt, store, policy
        self.slots_per_layer = slots_per_layer
        self.num_experts = ckpt.num_experts
        self.top_k = ckpt.top_k
        self.moe_layers = ckpt.moe_layers
        self._next = dict(zip(ckpt.moe_layers, ckpt.moe_layers[1:]))
        self.routers = routers  # layer -> gate weight [E, H]: DAOP's next-layer prediction
        self.prefill = False
        self.counters = PoolCounters()
        self.activity = {layer: torch.zeros(ckpt.num_experts) for layer in ckpt.moe_layers}  # this sequence
        self.decode_activity = {layer: torch.zeros(ckpt.num_experts) for layer in ckpt.moe_layers}  # all decodes
        self._predicted: dict[int, set[int]] = {}
        self._inflight: dict[ExpertKey, Future] = {}
        self._staged: dict[ExpertKey, ExpertWeights] = {}
        self._visits = dict.fromkeys(ckpt.moe_layers, 0)  # forward passes through each layer so far
        self._room = threading.RLock()  # make room + install, from either thread
        self.max_inflight = ckpt.top_k  # one layer's picks read in parallel
        self._io = ThreadPoolExecutor(self.max_inflight, thread_name_prefix="moe-prefetch") \
            if policy.prefetches else None

    # -- PoolView (what policies read) ------------------------------------------------------------------
    def resident_in(self, layer: int) -> list[ExpertKey]:
        """The layer's resident experts, least recently used first."""
        return self.store.resident_in(layer)

    def is_resident(self, key: ExpertKey) -> bool:
        return self.store.is_resident(key)

    def next_layer(self, layer: int) -> int | None:
        return self._next.get(layer)

    def router_logits(self, layer: int, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self.routers[layer].to(hidden.dtype))

    # -- PoolView (what policies may ask for) -----------------------------------------------------------
    def swap(self, cold: ExpertKey, hot: ExpertKey) -> None:
        """Put `hot` where `cold` was; the read runs in the background when the policy prefetches."""
        with self._room:
            if self.store.is_resident(hot) or hot in self._inflight or cold in self.store.pinned:
                return
            self.store.evict(cold)
            self.counters.swaps += 1
        self._fetch_async(hot, force=True) if self._io else self._install(hot, self.store.load(hot), pin=False)

    def prefetch(self, key: ExpertKey) -> None:
        """Start reading an expert a prediction says is coming; skipped when the pool has no room for it."""
        if self._io is None or self.store.is_resident(key) or key in self._inflight or key in self._staged:
            return
        if len(self._inflight) + len(self._staged) >= self.max_inflight:
            return
        self._fetch_async(key, force=False)

    # -- ExpertSource (what the experts modules call) ---------------------------------------------------
    def begin_sequence(self) -> None:
        for counts in self.activity.values():
            counts.zero_()
        self._predicted.clear()
        self.drop_staged()

    def drop_staged(self) -> None:
        """Give back what was read ahead for a sequence that ended (or failed) before using it."""
        for future in list(self._inflight.values()):
            future.exception()
        with self._room:
            for key in self._staged:
                self.store.release_buffer(key)
            self._staged.clear()

    def route(self, layer: int, hidden: torch.Tensor, top_k_index: torch.Tensor,
              top_k_weights: torch.Tensor) -> None:
        guess = self._predicted.pop(layer, None)
        if guess is not None and not self.prefill:  # judged against the model's own routing, before any change
            actual = set(top_k_index[-1].tolist())
            self.counters.predicted += len(actual)
            self.counters.predicted_right += len(actual & guess)
        if not self.prefill:
            self.policy.adjust_route(self, layer, hidden, top_k_index, top_k_weights)
        counts = torch.bincount(top_k_index.flatten().cpu(), minlength=self.num_experts)[:self.num_experts]
        self.activity[layer] += counts
        if not self.prefill:
            self.decode_activity[layer] += counts
        self.policy.on_route(self, layer, counts, self.prefill)
        if not self.prefill:
            nxt = self.next_layer(layer)
            if nxt is not None and self.policy.predicts:
                want = self.policy.predict(self, nxt, hidden)
                self._predicted[nxt] = {k.expert for k in want}
                for key in self.policy.to_prefetch(self, nxt, hidden, want):
                    self.prefetch(key)

    def acquire(self, key: ExpertKey) -> ExpertWeights:
        w = self.store.pin_resident(key)
        if w is not None:
            self.counters.hits += 1
            return w
        pending = self._inflight.get(key)
        if pending is not None:
            self.counters.prefetch_waits += 1
            pending.exception()  # wait; a failed prefetch falls through to a read of our own
            w = self.store.pin_resident(key)
            if w is not None:
                self.counters.misses += 1
                return w
        with self._room:
            w = self._staged.pop(key, None)
        if w is not None:  # read ahead by a prediction: in device memory when needed
            self.counters.hits += 1
            self.counters.prefetch_used += 1
            if self.policy.admit(self, key, self.prefill):
                self._install(key, w, pin=True)
            return w
        self.counters.misses += 1
        self._reserve_buffer(key)
        try:
            w = self.store.load(key)
        except BaseException:
            self.store.release_buffer(key)  # a failed read leaves the pool as it was
            raise
        if self.policy.admit(self, key, self.prefill):
            self._install(key, w, pin=True)
        return w  # not admitted: its buffer is given back at release

    def release(self, key: ExpertKey) -> None:
        self.store.release(key)

    def layer_done(self, layer: int, hidden: torch.Tensor) -> None:
        """The layer has run: what was staged for it and not used gives its bytes back."""
        with self._room:
            self._visits[layer] += 1
            for key in [k for k in self._staged if k.layer == layer]:
                del self._staged[key]
                self.store.release_buffer(key)

    # -- mechanics --------------------------------------------------------------------------------------
    def make_room(self, layer: int, n: int) -> None:
        with self._room:
            while self.store.count_in(layer) + n > self.slots_per_layer:
                protect = set(self.store.pinned) | {ExpertKey(layer, e) for e in self._predicted.get(layer, ())}
                victim = self.policy.victim(self, layer, protect=protect)
                self.store.evict(victim)

    def place(self, keys: list[ExpertKey]) -> None:
        """Initial placement: fill each layer's slots in the order given, never evicting."""
        for key in keys:
            if self.store.count_in(key.layer) < self.slots_per_layer and not self.store.is_resident(key):
                self.store.install(key, self.store.load(key))

    def _install(self, key: ExpertKey, w: ExpertWeights, pin: bool) -> None:
        with self._room:
            self.store.release_buffer(key)
            if not self.store.is_resident(key):
                self.make_room(key.layer, 1)
            self.store.install(key, w, pin=pin)

    def _reserve_buffer(self, key: ExpertKey) -> None:
        """A read must have its bytes; when prefetches hold them, wait for those to land first."""
        while True:
            try:
                self.store.reserve_buffer(key)
                return
            except OverBudget:
                pending = next(iter(self._inflight.values()), None)
                if pending is None:
                    raise
                pending.exception()

    def _fetch_async(self, key: ExpertKey, force: bool) -> None:
        try:
            self.store.reserve_buffer(key)
        except OverBudget:
            if not force:
                return
            self._reserve_buffer(key)
        if not force:
            self.counters.prefetches += 1
        done = threading.Event()
        visit = self._visits[key.layer]

        def read() -> None:
            try:
                done.wait()
                w = self.store.load(key)
                if force:  # a swap: the expert takes the slot its cold partner left
                    self._install(key, w, pin=False)
                    return
                with self._room:
                    if self._visits[key.layer] == visit:
                        self._staged[key] = w
                    else:  # landed after its layer ran
                        self.store.release_buffer(key)
            except BaseException:
                self.store.release_buffer(key)
                raise
            finally:
                self._inflight.pop(key, None)

        self._inflight[key] = self._io.submit(read)
        done.set()  # the future is registered before the read can finish and unregister it

    def close(self) -> None:
        if self._io is not None:
            self._io.shutdown(wait=True)
            self._io = None
        self.drop_staged()
