"""The mechanics every MoE policy shares: pool slots per layer, reads, prefetch, pipelines, and the counting.

A policy (policies/) only decides; this object does. It is the experts
modules' `ExpertSource`: told each layer's routing before the experts run,
asked for each expert's weights, told when the layer is done. Reads that a
policy asks for ahead of need run on background threads (disk reads release
the GIL, so they overlap the main thread's compute); an expert whose read is
in flight is waited for, never read twice.

A read ahead of need lands in a staging area, not in the pool: a wrong
prediction then costs its read but evicts nothing. When the layer uses it,
the policy's `admit` decides whether it stays; when the layer passes without
it, its bytes are given back (and counted as an unused prefetch).

Three ways to read ahead, each asked for by the policy:
- `lookahead`: the policy's guess for later layers (DAOP, fMoE, FIRM, DuoServe decode, MoESys);
- `prefetch_parts`: a guess reads only the first n projections of each expert (FIRM's sub-experts);
  the rest is read when the expert is used, the down projection while gate/up compute;
- `pipelines_prefill`: in prefill, each used expert of a layer is read once, in compute order, with the
  next read in flight while one computes (DuoServe's prefill pipeline).

A batched decode step (several sequences) pipelines the same way, every read buffer of the pool's plan
but one in flight, since its rows use many experts per layer. A decode step computes its experts in the order
their weights are ready (`next_expert`: in memory first, then reads in the order they started), so its missed
experts are read while the others compute; the experts module still adds their outputs in ascending order.

An expert kept after its read never evicts one the running layer has still to run; with no other victim it
is used once from its read buffer and dropped.

Every read's bytes are reserved in the pool's ledger before the read starts
(`buffer:` entries), so the budget holds the experts in flight too, and the
peak the benchmark reports is what the pool really used.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

import torch
from torch.nn import functional as F

from ..runtime.memory import OverBudget
from .checkpoint import ExpertKey, MoECheckpoint
from .counters import PoolCounters
from .policies.base import MoEPolicy
from .store import PARTS, ExpertStore, ExpertWeights


class MoERuntime:
    def __init__(self, ckpt: MoECheckpoint, store: ExpertStore, policy: MoEPolicy, slots: dict[int, int],
                 routers: dict[int, torch.Tensor]) -> None:
        self.ckpt, self.store, self.policy = ckpt, store, policy
        self.slots = slots  # layer -> experts the pool keeps resident for it
        self.num_experts = ckpt.num_experts
        self.top_k = ckpt.top_k
        self.moe_layers = ckpt.moe_layers
        self._next = dict(zip(ckpt.moe_layers, ckpt.moe_layers[1:]))
        self.routers = routers  # layer -> gate weight [E, H]: the other layers' gates predict a layer's picks
        self.prefill = False
        self.decode_rows = 1  # sequences sharing this decode step (the batcher sets it)
        self.skip_tokens: torch.Tensor | None = None  # a batched prefill's padding [B*T]: no expert runs for it
        self.counters = PoolCounters()
        self.stall_s = 0.0  # seconds the computing thread waited for experts not in the pool (reads, landings)
        self.activity = {layer: torch.zeros(ckpt.num_experts) for layer in ckpt.moe_layers}  # this sequence
        self.decode_activity = {layer: torch.zeros(ckpt.num_experts) for layer in ckpt.moe_layers}  # all decodes
        self.embedding: torch.Tensor | None = None  # this sequence's prompt embedding (mean of its input embeddings)
        self.trajectory: dict[int, torch.Tensor] = {}  # this decode step: layer -> router probabilities so far
        self.path: dict[int, list[int]] = {}  # this decode step: layer -> picks so far
        self.trace: list[tuple[torch.Tensor, torch.Tensor]] | None = None  # (probs [L,E], picks [L,k]) per step
        self._predicted: dict[int, set[int]] = {}
        self._inflight: dict[ExpertKey, Future] = {}
        self._staged: dict[ExpertKey, ExpertWeights] = {}
        self._pipeline: dict[int, deque[ExpertKey]] = {}  # prefill: layer -> experts still to read, in order
        self._pipelined: set[ExpertKey] = set()
        self._deferred: deque[ExpertKey] = deque()  # guesses waiting for a buffer of a bounded expert cache
        self._used_now: dict[int, set[int]] = {}  # layers routed in this pass -> the experts they use
        self._to_run: dict[int, set[int]] = {}  # layers routed in this pass -> the experts not yet run: kept
        self._owed: set[ExpertKey] = set()  # routed, needed, not in memory and no read started yet
        self._visits = dict.fromkeys(ckpt.moe_layers, 0)  # forward passes through each layer so far
        self._room = threading.RLock()  # make room + install, from either thread
        self.max_staged = policy.staging(ckpt.top_k, ckpt.num_experts)  # reads ahead held at once
        self.read_buffers = policy.read_buffers(ckpt.top_k, ckpt.num_experts)  # what the pool's plan allows
        self.expert_cap = policy.expert_cache(ckpt.top_k)  # expert buffers in use at once (None: no bound)
        workers = max(self.max_staged, 2 if policy.pipelines_prefill else 0, 1 if policy.fine_grained else 0)
        self._io = ThreadPoolExecutor(workers, thread_name_prefix="moe-read") \
            if (policy.prefetches or policy.pipelines_prefill or policy.fine_grained) else None

    # -- PoolView (what policies read) ------------------------------------------------------------------
    @property
    def slots_per_layer(self) -> int:
        """The fewest slots any layer has (a layer may hold one more: the leftover of the ratio)."""
        return min(self.slots.values())

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
        """Start reading an expert a guess says is coming; skipped when the staging area is full. With a bounded
        expert cache (DuoServe: k experts in all) a guess with no free buffer waits for one instead."""
        if self._io is None or self.store.is_resident(key) or key in self._inflight or key in self._staged:
            return
        if self.expert_cap is not None and self._buffers_in_use() >= self.expert_cap:
            if key not in self._deferred:
                self._deferred.append(key)
            return
        if len(self._inflight) + len(self._staged) >= self.max_staged:
            return
        self._fetch_async(key, force=False, parts=self.policy.prefetch_parts)

    # -- ExpertSource (what the experts modules call) ---------------------------------------------------
    def begin_sequence(self, embedding: torch.Tensor | None = None, joining: bool = False) -> None:
        """A new sequence's prefill comes next. `joining`: others are mid-decode beside it (a batch), so the
        activity record stays the batch's rather than starting again."""
        if not joining:
            for counts in self.activity.values():
                counts.zero_()
        self._predicted.clear()
        self.drop_staged()
        self.embedding = embedding
        self.trajectory, self.path = {}, {}
        self._ask_ahead(self.policy.on_sequence(self, embedding))

    def drop_staged(self) -> None:
        """Give back what was read ahead for a sequence that ended (or failed) before using it."""
        for future in list(self._inflight.values()):
            future.exception()
        with self._room:
            for key in self._staged:
                self.store.release_buffer(key)
            self._staged.clear()
            self._pipeline.clear()
            self._pipelined.clear()
            self._deferred.clear()
            self._used_now.clear()
            self._to_run.clear()
            self._owed.clear()

    def route(self, layer: int, hidden: torch.Tensor, top_k_index: torch.Tensor,
              top_k_weights: torch.Tensor) -> None:
        decode = not self.prefill
        guess = self._predicted.pop(layer, None)
        if guess is not None and decode:  # judged against the model's own routing, before any change
            actual = set(top_k_index[-self.decode_rows:].flatten().tolist())
            self.counters.predicted += len(actual)
            self.counters.predicted_right += len(actual & guess)
            self.counters.guessed += len(guess)
        if decode:
            self.policy.adjust_route(self, layer, hidden, top_k_index, top_k_weights, guess)
        counts = torch.bincount(top_k_index.flatten().cpu(), minlength=self.num_experts)[:self.num_experts]
        self._drop_wrong(layer, {int(e) for e in torch.nonzero(counts).flatten()})
        self.activity[layer] += counts
        if decode:
            self.decode_activity[layer] += counts
            self.counters.step_experts += int(torch.count_nonzero(counts))
            if layer == self.moe_layers[0]:
                self.trajectory, self.path = {}, {}
            picks = top_k_index[-1].tolist()
            self.path[layer] = picks
            if self.policy.wants_probs or self.trace is not None:
                logits = self.router_logits(layer, hidden[-1:])[0].float()
                self.trajectory[layer] = torch.softmax(logits, dim=-1).cpu()
            self.policy.on_decode(self, layer, hidden, picks, guess)
        self.policy.on_route(self, layer, counts, self.prefill)
        if (self.prefill and self.policy.pipelines_prefill) or (self.decode_rows > 1 and self._io is not None):
            self._start_pipeline(layer, top_k_index)  # a batched step uses many experts: read them in compute order
        self._ask_ahead(self.policy.lookahead(self, layer, hidden, self.prefill))
        if decode and layer == self.moe_layers[-1]:
            self._end_step()

    def acquire(self, key: ExpertKey) -> ExpertWeights:
        self._to_run.get(key.layer, set()).discard(key.expert)
        w = self.store.pin_resident(key)
        if w is not None:
            self.counters.hits += 1
            return w
        started = time.perf_counter()
        try:
            return self._acquire_away(key)
        finally:
            self.stall_s += time.perf_counter() - started

    def _acquire_away(self, key: ExpertKey) -> ExpertWeights:
        """An expert not resident: staged, still reading (waited for), or read now."""
        pending = self._inflight.get(key)
        if pending is not None:
            self.counters.prefetch_waits += 1
            pending.exception()  # wait; a failed read falls through to a read of our own
            w = self.store.pin_resident(key)
            if w is not None:
                self.counters.misses += 1
                return w
        with self._room:
            w = self._staged.pop(key, None)
            pipelined = key in self._pipelined
            self._pipelined.discard(key)
        if w is not None:  # read ahead: in memory when needed (a pipelined prefill read is this use's own read)
            if pipelined:
                self.counters.misses += 1
            else:
                self.counters.hits += 1
                self.counters.prefetch_used += 1
            if not w.complete:  # a sub-expert prefetch: the rest now
                w = self._complete(key, w)
            if self.policy.admit(self, key, self.prefill):
                w.wait()
                self._install(key, w, pin=True)
            return w
        self.counters.misses += 1
        self._owed.discard(key)
        if self.store.device.type != "cpu" and self.policy.computes_on_host(self, key, self.prefill):
            self.counters.host_computed += 1  # host RAM is where it lies: no device buffer, nothing admitted
            return self.store.load_host(key)
        self._wait_for_room()
        self._reserve_buffer(key)
        try:
            w = self._read_for_use(key)
        except BaseException:
            self.store.release_buffer(key)  # a failed read leaves the pool as it was
            raise
        if self.policy.admit(self, key, self.prefill):
            w.wait()
            self._install(key, w, pin=True)
        return w  # not admitted: its buffer is given back at release

    def next_expert(self, layer: int, remaining: list[int]) -> int:
        """Which of the layer's remaining experts to compute next: one in memory (resident, or read ahead and
        landed) first, else the one whose read started first, else the lowest (read on the spot). A decode step
        so computes what it has while its missed experts are still being read."""
        with self._room:
            for e in remaining:
                key = ExpertKey(layer, e)
                if key in self._staged or self.store.is_resident(key):
                    return e
            reading = [k.expert for k in list(self._inflight) if k.layer == layer and k.expert in remaining]
        return reading[0] if reading else remaining[0]

    def release(self, key: ExpertKey) -> None:
        self.store.release(key)
        queue = self._pipeline.get(key.layer)
        while queue and self._held_buffers() < self._pipeline_depth():
            self._pipeline_next(key.layer)
        if self._deferred:  # a bounded cache: the freed buffer takes the next layer's guess
            self._issue_deferred()

    def layer_done(self, layer: int, hidden: torch.Tensor) -> None:
        """The layer has run: what was staged for it and not used gives its bytes back."""
        with self._room:
            self._visits[layer] += 1
            self._used_now.pop(layer, None)
            self._to_run.pop(layer, None)
            self._pipeline.pop(layer, None)
            for key in [k for k in self._staged if k.layer == layer]:
                del self._staged[key]
                self._give_back(key)

    # -- mechanics --------------------------------------------------------------------------------------
    def make_room(self, layer: int, n: int) -> None:
        """Evict the policy's victims until n more fit. Never one the running layer still has to run (a batched
        step's later experts: evicting one costs a second read within the step); LookupError when every
        resident expert is in use or still needed."""
        with self._room:
            while self.store.count_in(layer) + n > self.slots[layer]:
                protect = set(self.store.pinned) | {ExpertKey(layer, e) for e in self._predicted.get(layer, ())}
                protect |= {ExpertKey(layer, e) for e in self._to_run.get(layer, ())}
                victim = self.policy.victim(self, layer, protect=protect)
                self.store.evict(victim)

    def place(self, keys: list[ExpertKey]) -> None:
        """Initial placement: fill each layer's slots in the order given, never evicting."""
        for key in keys:
            if self.store.count_in(key.layer) < self.slots[key.layer] and not self.store.is_resident(key):
                self.store.install(key, self.store.load(key))

    def _give_back(self, key: ExpertKey) -> None:
        """A read ahead that its layer did not use: its buffer returns to the budget, counted as unused."""
        self.store.release_buffer(key)
        self._pipelined.discard(key)
        self.counters.prefetch_unused += 1

    def _held_buffers(self) -> int:
        return sum(1 for name in self.store.ledger.keys() if name.startswith("buffer:"))

    def _buffers_in_use(self) -> int:
        """Expert buffers held (reads and staged experts), plus those the routed layer still owes a read: a
        bounded cache serves the layer that is running before it reads ahead for the next one."""
        return self._held_buffers() + len(self._owed)

    def _wait_for_room(self) -> None:
        """A bounded cache full of reads under way (a wrong guess still landing): let them land first; a wrong
        one gives its buffer back as it lands."""
        if self.expert_cap is None:
            return
        for future in list(self._inflight.values()):
            if self._held_buffers() < self.expert_cap:
                return
            future.exception()

    def _issue_deferred(self) -> None:
        while self._deferred:
            if self.expert_cap is not None and self._buffers_in_use() >= self.expert_cap:
                return
            key = self._deferred.popleft()
            if key.layer not in self._used_now:  # its layer has not routed yet: still worth reading
                self.prefetch(key)

    def _drop_wrong(self, layer: int, used: set[int]) -> None:
        """The layer's routing is known: what was read ahead for it and is not used gives its buffer back now
        (not when the layer ends), so the read of a missed expert finds room; guesses still waiting are void."""
        with self._room:
            self._used_now[layer] = used
            self._to_run[layer] = set(used)
            for key in [k for k in self._staged if k.layer == layer and k.expert not in used]:
                del self._staged[key]
                self._give_back(key)
            if self._deferred:
                self._deferred = deque(k for k in self._deferred if k.layer != layer)
            if self.expert_cap is not None:
                have = set(self._staged) | set(self._inflight)
                self._owed = {k for k in (ExpertKey(layer, e) for e in used)
                              if k not in have and not self.store.is_resident(k)}

    def _ask_ahead(self, guesses: dict[int, list[ExpertKey]] | None) -> None:
        """A policy's guesses for later layers: recorded (to judge them) when it predicts, then read ahead."""
        wanted: list[ExpertKey] = []
        for target, keys in (guesses or {}).items():
            if self.policy.predicts:
                self._predicted[target] = {k.expert for k in keys}
            wanted += self.policy.to_prefetch(self, target, keys)
        for key in self.policy.prefetch_order(self, wanted):
            self.prefetch(key)

    def _end_step(self) -> None:
        """Every layer of a decode step has routed: the policy and the trace recorder see the whole step."""
        self.policy.on_step(self)
        if self.trace is not None and len(self.trajectory) == len(self.moe_layers):
            probs = torch.stack([self.trajectory[layer] for layer in self.moe_layers])
            picks = torch.tensor([self.path[layer] for layer in self.moe_layers], dtype=torch.int16)
            self.trace.append((probs.to(torch.float16), picks))

    def _read_for_use(self, key: ExpertKey) -> ExpertWeights:
        """A miss's read. Fine-grained: gate and up first, the down projection read in the background while
        they compute (FIRM-MoE: computation starts once each weight finishes loading)."""
        if not (self.policy.fine_grained and self._io is not None):
            return self.store.load(key)
        w = self.store.load_parts(key, PARTS[:2])
        return self._complete(key, w)

    def _complete(self, key: ExpertKey, w: ExpertWeights) -> ExpertWeights:
        """Read what a partial expert lacks: gate/up now when missing, down in the background when allowed."""
        first = [p for p in PARTS[:2] if p not in w.landed]
        if first:
            w = self.store.load_parts(key, first, into=w)
        if w.complete:
            return w
        if not (self.policy.fine_grained and self._io is not None) or self.store.device.type != "cpu":
            return self.store.load_parts(key, PARTS, into=w)
        out = ExpertWeights(w.gate_up, w.down, w.landed)
        out.pending = self._io.submit(self.store.load_parts, key, PARTS, w)
        return out

    def _start_pipeline(self, layer: int, top_k_index: torch.Tensor) -> None:
        """DuoServe prefill: every expert the layer's tokens use, in the experts loop's order (ascending),
        read once; two buffers, one computing and one reading (each computed expert's release starts the next)."""
        used = sorted(set(top_k_index.flatten().tolist()) - {self.num_experts})
        with self._room:  # what is resident, staged or already reading is not read again
            have = set(self._staged) | set(self._inflight)
        todo = deque(k for k in (ExpertKey(layer, e) for e in used) if not self.store.is_resident(k) and k not in have)
        self._pipeline[layer] = todo
        while todo and self._held_buffers() < self._pipeline_depth():
            self._pipeline_next(layer)

    def _pipeline_depth(self) -> int:
        """Buffers a pipeline may hold at once. Prefill (DuoServe): two, one computing and the next reading. A
        batched decode step: every read buffer the pool was planned with, so the disk is still reading the
        layer's later experts while the earlier ones compute (reads, not compute, bound such a step), all but one."""
        return 2 if self.prefill else max(2, self.read_buffers - 1)  # one left for a miss no read foresaw

    def _pipeline_next(self, layer: int) -> None:
        queue = self._pipeline.get(layer)
        while queue:
            key = queue.popleft()
            if self.store.is_resident(key) or key in self._inflight or key in self._staged:
                continue
            self._pipelined.add(key)
            self._owed.discard(key)
            self.counters.pipelined += 1
            self._fetch_async(key, force=True, install=False)
            return

    def _install(self, key: ExpertKey, w: ExpertWeights, pin: bool) -> bool:
        """Keep a read expert in the pool; False when no resident expert may leave for it (all in use or still
        needed by the running layer): it is then used from its read buffer once and that buffer given back."""
        with self._room:
            if not self.store.is_resident(key):
                try:
                    self.make_room(key.layer, 1)
                except LookupError:
                    if not pin:  # a swap's read with nowhere to go: nobody will release its buffer
                        self.store.release_buffer(key)
                    return False
            self.store.install(key, w, pin=pin)  # its read buffer becomes the resident bytes
            return True

    def _reserve_buffer(self, key: ExpertKey) -> None:
        """A read must have its bytes; when reads ahead hold them, wait for those to land first."""
        while True:
            try:
                self.store.reserve_buffer(key)
                return
            except OverBudget:
                pending = next(iter(self._inflight.values()), None)
                if pending is None:
                    raise
                pending.exception()

    def _fetch_async(self, key: ExpertKey, force: bool, parts: int = len(PARTS), install: bool = True) -> None:
        """A background read. `force` waits for room (a swap or a pipelined read must happen; a guess is
        dropped when the budget is full); `install` puts it in the pool (a swap) instead of staging it."""
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
                w = self.store.load_parts(key, PARTS[:parts])
                if force and install:  # a swap: the expert takes the slot its cold partner left
                    self._install(key, w, pin=False)
                    return
                with self._room:
                    used = self._used_now.get(key.layer)
                    if self._visits[key.layer] == visit and (used is None or key.expert in used):
                        self._staged[key] = w
                    else:  # landed after its layer ran, or after its routing showed it is not needed
                        self._give_back(key)
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
