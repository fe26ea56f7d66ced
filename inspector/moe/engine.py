"""The MoE engine: a transformers model whose routed experts live in the runtime's tiered store.

`OffloadedLM.load(dir, policy, cache_ratio)` builds the model on the meta device,
loads every non-expert weight with `load_state_dict(assign=True)`, and puts an
`OffloadedExperts` in place of each MoE layer's fused experts. The expert pool is
a ledger of the device's `DeviceBudget` (shared with the inspection experts when
the caller passes that budget). `generate` runs greedy decoding with a KV cache
and yields each token with the live statistics.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, DynamicCache

from ..runtime.memory import DeviceBudget
from .checkpoint import CheckpointError, ExpertKey, MoECheckpoint
from .offloaded import OffloadedExperts
from .policies import MoEPolicy, get_policy
from .store import ExpertStore, ExpertWeights

POOL_LEDGER = "moe-pool"


class ContextTooLong(ValueError):
    """A prompt and its new tokens do not fit the model's context."""


class BudgetTooSmall(ValueError):
    """The expert pool cannot hold one layer's top-k experts."""


@dataclass
class GenStats:
    tokens: int = 0
    prompt_tokens: int = 0
    ttft_s: float = 0.0
    seconds: float = 0.0
    hits: int = 0
    misses: int = 0
    expert_loads: int = 0
    residency: dict[int, int] = field(default_factory=dict)  # layer -> experts resident in the pool
    peak_pool_bytes: int = 0
    truncated: int = 0  # oldest prompt tokens dropped to fit the context

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.misses
        return self.hits / n if n else 0.0


class MoERuntime:
    """The mechanics every policy shares: pool slots per layer, acquire/release, counting."""

    def __init__(self, ckpt: MoECheckpoint, store: ExpertStore, policy: MoEPolicy, slots_per_layer: int) -> None:
        self.ckpt, self.store, self.policy = ckpt, store, policy
        self.slots_per_layer = slots_per_layer
        self.num_experts = ckpt.num_experts
        self.moe_layers = ckpt.moe_layers
        self.prefill = False
        self.hits = 0
        self.misses = 0

    # -- PoolView ---------------------------------------------------------------------------------------
    def resident_in(self, layer: int) -> list[ExpertKey]:
        with self.store.lock:
            return [k for k in self.store.resident if k.layer == layer]

    def is_resident(self, key: ExpertKey) -> bool:
        return self.store.is_resident(key)

    # -- ExpertSource -----------------------------------------------------------------------------------
    def route(self, layer: int, hidden: torch.Tensor, top_k_index: torch.Tensor) -> None:
        self.policy.on_route(self, layer, top_k_index, self.prefill)

    def acquire(self, key: ExpertKey) -> ExpertWeights:
        w = self.store.pin_resident(key)
        if w is not None:
            self.hits += 1
            return w
        self.misses += 1
        if not self.policy.caches:
            w = self.store.load(key)
            self.store.hold_transient(key, w)
            return w
        self.make_room(key.layer, 1)
        w = self.store.load(key)
        self.store.install(key, w, pin=True)
        return w

    def release(self, key: ExpertKey) -> None:
        self.store.release(key)

    def layer_done(self, layer: int, hidden: torch.Tensor) -> None:
        self.policy.after_layer(self, layer, hidden, self.prefill)

    def make_room(self, layer: int, n: int) -> None:
        while len(self.resident_in(layer)) + n > self.slots_per_layer:
            victim = self.policy.victim(self, layer, protect=self.store.pinned)
            self.store.evict(victim)

    def place(self, keys: list[ExpertKey]) -> None:
        """Initial placement: fill each layer's slots in the order given, never evicting."""
        for key in keys:
            if len(self.resident_in(key.layer)) < self.slots_per_layer and not self.store.is_resident(key):
                self.store.install(key, self.store.load(key))


def _pool_slots(ckpt: MoECheckpoint, cache_ratio: float) -> int:
    slots = int(round(cache_ratio * ckpt.num_experts))
    if slots < ckpt.top_k:
        smallest = ckpt.top_k / ckpt.num_experts
        raise BudgetTooSmall(f"cache ratio {cache_ratio:.3f} gives {slots} expert slot(s) per layer, fewer than the "
                             f"{ckpt.top_k} experts a token needs in one layer; the smallest ratio that works is "
                             f"{smallest:.3f} ({ckpt.top_k} of {ckpt.num_experts} experts per layer)")
    return min(slots, ckpt.num_experts)


class OffloadedLM:
    def __init__(self, ckpt: MoECheckpoint, model: torch.nn.Module, runtime: MoERuntime,
                 device: torch.device, budget: DeviceBudget | None = None) -> None:
        self.ckpt, self.model, self.runtime, self.device = ckpt, model, runtime, device
        self.budget = budget  # the pool's ledger is open in it until close()

    @classmethod
    def load(cls, root: str | Path, policy: str | MoEPolicy = "lru", cache_ratio: float = 0.25,
             device: torch.device | str = "cpu", budget: DeviceBudget | None = None,
             drop_page_cache: bool = True) -> OffloadedLM:
        ckpt = MoECheckpoint.open(root)
        device = torch.device(device)
        pol = get_policy(policy) if isinstance(policy, str) else policy
        slots = _pool_slots(ckpt, cache_ratio)
        expert_bytes = max(s.nbytes for s in ckpt.experts.values())
        pool_bytes = slots * expert_bytes * len(ckpt.moe_layers)
        if budget is None:
            budget = DeviceBudget(f"{device}", pool_bytes)
        ledger = budget.open(POOL_LEDGER, pool_bytes)  # OverBudget when the inspection pools left too little
        model = _build(ckpt, device)
        store = ExpertStore(ckpt, device, ledger, drop_page_cache)
        runtime = MoERuntime(ckpt, store, pol, slots)
        act = _act_fn(ckpt)
        for layer in ckpt.moe_layers:
            block = model.model.layers[layer].mlp
            block.experts = OffloadedExperts(layer, ckpt.num_experts, act, runtime)
        runtime.place(pol.initial(runtime))
        return cls(ckpt, model, runtime, device, budget)

    # -- generation -------------------------------------------------------------------------------------
    @torch.inference_mode()
    def generate(self, input_ids: list[int] | torch.Tensor, max_new_tokens: int,
                 eos_token_id: int | None = None, truncate: bool = False) -> Iterator[tuple[int, GenStats]]:
        """Greedy decoding; yields (token id, statistics so far) per new token.

        A prompt that leaves no room for `max_new_tokens` in the context is refused (ContextTooLong), or with
        `truncate` loses its oldest tokens, and `stats.truncated` says how many.
        """
        ids = torch.as_tensor(input_ids, dtype=torch.long).reshape(1, -1).to(self.device)
        context = int(getattr(self.ckpt.config, "max_position_embeddings", 0) or 0)
        room = context - max_new_tokens
        dropped = 0
        if context and ids.shape[1] > room:
            if not truncate or room < 1:
                raise ContextTooLong(f"prompt of {ids.shape[1]} tokens plus {max_new_tokens} new ones exceeds the "
                                     f"model's context of {context}; shorten the prompt, ask for fewer tokens, or "
                                     "let it truncate the oldest tokens")
            dropped = ids.shape[1] - room
            ids = ids[:, dropped:]
        stats = GenStats(prompt_tokens=ids.shape[1], truncated=dropped)
        rt = self.runtime
        h0, m0, l0 = rt.hits, rt.misses, rt.store.stats.loads
        cache = DynamicCache(config=self.model.config)
        t0 = time.perf_counter()
        rt.prefill = True
        out = self.model(input_ids=ids, past_key_values=cache, use_cache=True)
        rt.prefill = False
        for i in range(max_new_tokens):
            token = int(out.logits[0, -1].argmax())
            now = time.perf_counter()
            if i == 0:
                stats.ttft_s = now - t0
            stats.tokens += 1
            stats.seconds = now - t0
            stats.hits, stats.misses = rt.hits - h0, rt.misses - m0
            stats.expert_loads = rt.store.stats.loads - l0
            stats.residency = {layer: len(rt.resident_in(layer)) for layer in rt.moe_layers}
            stats.peak_pool_bytes = rt.store.ledger.peak
            yield token, stats
            if token == eos_token_id or i + 1 == max_new_tokens:
                return
            out = self.model(input_ids=torch.tensor([[token]], device=self.device), past_key_values=cache,
                             use_cache=True)

    def close(self) -> None:
        """Give the pool's bytes back to the device budget."""
        self.runtime.store.close()
        if self.budget is not None:
            self.budget.close(POOL_LEDGER)
            self.budget = None


def _act_fn(ckpt: MoECheckpoint) -> torch.nn.Module:
    from transformers.activations import ACT2FN

    return ACT2FN[ckpt.config.hidden_act]


def _build(ckpt: MoECheckpoint, device: torch.device) -> torch.nn.Module:
    """The model on the meta device, non-expert weights assigned, buffers made real, experts left to us."""
    state = ckpt.non_expert_state()
    dtype = state["model.embed_tokens.weight"].dtype
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(ckpt.config, dtype=dtype)
    if getattr(ckpt.config, "tie_word_embeddings", False) and "lm_head.weight" not in state:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    expected = {n for n, _ in model.named_parameters()}
    unknown = sorted(set(state) - expected)
    if unknown:
        raise CheckpointError(f"{ckpt.root}: tensors {unknown[:5]} match no parameter of {ckpt.config.model_type}; "
                              "is the config the one this checkpoint was saved with?")
    missing = sorted(n for n in expected - set(state) if ".experts." not in n or ".shared_expert" in n)
    if missing:
        raise CheckpointError(f"{ckpt.root}: the checkpoint lacks {missing[:5]}; copy the whole checkpoint again")
    state = {k: v.to(device) for k, v in state.items()}
    model.load_state_dict(state, strict=False, assign=True)
    for name, module in list(model.named_modules()):
        buffers = [b for b in module.buffers(recurse=False) if b.is_meta]
        if buffers:  # non-persistent buffers (rotary frequencies) are computed at construction: build it again
            with torch.device(device):
                fresh = type(module)(config=ckpt.config)
            parent_name, _, attr = name.rpartition(".")
            setattr(model.get_submodule(parent_name) if parent_name else model, attr, fresh)
    model.eval()
    return model
