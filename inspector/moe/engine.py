"""The MoE engine: a transformers model whose routed experts live in the runtime's tiered store.

`OffloadedLM.load(dir, policy, cache_ratio)` builds the model on the meta device,
loads every non-expert weight with `load_state_dict(assign=True)`, and puts an
`OffloadedExperts` in place of each MoE layer's fused experts. The expert pool is
a ledger of the device's `DeviceBudget` (shared with the inspection experts when
the caller passes that budget). `generate` runs greedy decoding with a KV cache
and yields each token with the live statistics.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, DynamicCache

from ..runtime.memory import DeviceBudget
from .calibration import Calibration
from .checkpoint import CheckpointError, MoECheckpoint
from .counters import GuessRates
from .kernels import RowKernels
from .offloaded import OffloadedExperts
from .policies import MoEPolicy, get_policy
from .quant.copy import QUANT_DIR, open_quantized
from .runtime import MoERuntime
from .store import ExpertStore, HostTier, pinnable_share

POOL_LEDGER = "moe-pool"
HOST_LEDGER = "moe-host"


class ContextTooLong(ValueError):
    """A prompt and its new tokens do not fit the model's context."""


class BudgetTooSmall(ValueError):
    """The expert pool cannot hold one layer's top-k experts."""


@dataclass
class GenStats(GuessRates):
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
    prefetches: int = 0
    prefetch_waits: int = 0
    prefetch_used: int = 0
    prefetch_unused: int = 0
    pipelined: int = 0
    guessed: int = 0
    host_computed: int = 0
    host_hits: int = 0
    bytes_read: int = 0
    swaps: int = 0
    degraded: int = 0
    predicted: int = 0
    predicted_right: int = 0
    step_experts: int = 0  # distinct experts the decode steps it was in ran (a batch's rows are charged alike)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.misses
        return self.hits / n if n else 0.0


def pool_slots(ckpt: MoECheckpoint, cache_ratio: float) -> int:
    """Slots every layer gets: the ratio of its experts, rounded down (never more than the ratio allows)."""
    slots = int(cache_ratio * ckpt.num_experts + 1e-9)
    if slots < ckpt.top_k:
        smallest = ckpt.top_k / ckpt.num_experts
        raise BudgetTooSmall(f"cache ratio {cache_ratio:.3f} gives {slots} expert slot(s) per layer, fewer than the "
                             f"{ckpt.top_k} experts a token needs in one layer; the smallest ratio that works is "
                             f"{smallest:.3f} ({ckpt.top_k} of {ckpt.num_experts} experts per layer)")
    return min(slots, ckpt.num_experts)


def layer_slots(ckpt: MoECheckpoint, cache_ratio: float, calibration: Calibration | None = None) -> dict[int, int]:
    """Slots per layer: the floor everywhere, and the leftover of the whole pool (ratio x all experts, rounded
    down) one slot each to the layers whose calibrated popularity is least concentrated (their top experts
    cover the smallest share of selections), or to the first layers without a calibration."""
    base = pool_slots(ckpt, cache_ratio)
    layers = list(ckpt.moe_layers)
    total = min(int(cache_ratio * ckpt.num_experts * len(layers) + 1e-9), ckpt.num_experts * len(layers))
    leftover = max(0, total - base * len(layers)) if base < ckpt.num_experts else 0

    def coverage(layer: int) -> float:
        row = calibration.counts.get(layer) if calibration is not None else None
        if not row or not sum(row):
            return 0.0
        return sum(sorted(row, reverse=True)[:base]) / sum(row)

    extra = set(sorted(layers, key=lambda layer: (coverage(layer), layers.index(layer)))[:leftover])
    return {layer: base + (layer in extra) for layer in layers}


def pool_plan(ckpt: MoECheckpoint, policy: MoEPolicy, cache_ratio: float,
              calibration: Calibration | None = None) -> tuple[dict[int, int], int]:
    """Slots per layer and the pool's bytes: the resident experts plus read buffers, one for a miss and those
    the policy reads ahead into (its staging; two for a prefill pipeline). What a memory grant must cover."""
    slots = layer_slots(ckpt, cache_ratio, calibration if calibration is not None else policy.calibration)
    expert_bytes = max(s.nbytes for s in ckpt.experts.values())
    return slots, (sum(slots.values()) + policy.read_buffers(ckpt.top_k, ckpt.num_experts)) * expert_bytes


def serving_checkpoint(root: str | Path, expert_dtype: str = "native", device: torch.device | str = "cpu",
                       quant_dir: Path = QUANT_DIR, log: Callable[[str], None] | None = None) -> MoECheckpoint:
    """The checkpoint with its experts as they will be served: as stored, or from the quantized copy."""
    ckpt = MoECheckpoint.open(root)
    if expert_dtype == "native" or (expert_dtype == "bf16" and ckpt.stored_dtype == torch.bfloat16):
        return ckpt
    copy = open_quantized(ckpt, expert_dtype, device, quant_dir, log)
    return ckpt.served_as(expert_dtype, copy.experts)


class OffloadedLM:
    def __init__(self, ckpt: MoECheckpoint, model: torch.nn.Module, runtime: MoERuntime,
                 device: torch.device, budget: DeviceBudget | None = None, kernels: RowKernels | None = None) -> None:
        self.ckpt, self.model, self.runtime, self.device = ckpt, model, runtime, device
        self.budget = budget  # the pool's ledger is open in it until close()
        self.kernels = kernels or RowKernels()  # what the experts modules use in a batched decode step

    def tune_batched(self, max_rows: int) -> dict[tuple[int, int, int], float]:
        """Before serving batches: time both forms of a batched step's expert products (1..max_rows rows: an
        expert one row of the batch picked is a product too) on the resident experts (kernels.py); the flipped
        form's time over F.linear's per (rows, out, in)."""
        weights = [t for w in self.runtime.store.resident.values() for t in (w.gate_up, w.down)
                   if isinstance(t, torch.Tensor)]  # quantized experts use their own kernel, untuned
        with torch.inference_mode():
            return self.kernels.tune(weights, range(1, max_rows + 1))

    @classmethod
    def load(cls, root: str | Path, policy: str | MoEPolicy = "lru", cache_ratio: float = 0.25,
             device: torch.device | str = "cpu", budget: DeviceBudget | None = None,
             drop_page_cache: bool = True, calibration: Calibration | None = None,
             host_ratio: float | None = None, expert_dtype: str = "native", quant_dir: Path = QUANT_DIR,
             log: Callable[[str], None] | None = None) -> OffloadedLM:
        """The pool holds `cache_ratio` of the experts (`layer_slots`), plus read buffers: one for a miss, and
        those the policy reads ahead into (its staging; two for a prefill pipeline).

        `host_ratio` of all experts may wait in a host-RAM tier between the pool and the disk (HostTier):
        default every expert when the pool is on a GPU (the papers' CPU memory), none on a CPU-only box,
        where the pool is host RAM already and the disk is the tier below it.

        `expert_dtype` other than native serves the experts from a quantized copy (quant/; written on first use
        under `quant_dir`, which `log` is told of), so the pool holds and the disk reads fewer bytes per expert."""
        device = torch.device(device)
        ckpt = serving_checkpoint(root, expert_dtype, device, quant_dir, log)
        pol = get_policy(policy, calibration) if isinstance(policy, str) else policy
        slots, pool_bytes = pool_plan(ckpt, pol, cache_ratio, calibration)
        if budget is None:
            budget = DeviceBudget(f"{device}", pool_bytes)
        ledger = budget.open(POOL_LEDGER, pool_bytes)  # OverBudget when the inspection pools left too little
        all_bytes = sum(s.nbytes for s in ckpt.experts.values())
        if host_ratio is None:  # on a GPU: every expert pinned, as far as this box's RAM allows
            host_ratio = 0.0 if device.type == "cpu" else pinnable_share(all_bytes, ckpt.non_expert_bytes)
        host = None
        if host_ratio > 0:
            host = HostTier(DeviceBudget("host", all_bytes).open(HOST_LEDGER, int(host_ratio * all_bytes)),
                            pin=device.type == "cuda")
        try:
            model = _build(ckpt, device)
            store = ExpertStore(ckpt, device, ledger, drop_page_cache, host)
            blocks = {layer: model.model.layers[layer].mlp for layer in ckpt.moe_layers}
            runtime = MoERuntime(ckpt, store, pol, slots, {layer: _router_weight(b, ckpt) for layer, b in
                                                           blocks.items()})
            act = _act_fn(ckpt)
            kernels = RowKernels()
            for layer, block in blocks.items():
                block.experts = OffloadedExperts(layer, ckpt.num_experts, act, runtime, kernels)
            runtime.place(pol.initial(runtime))
        except BaseException:
            budget.close(POOL_LEDGER)
            raise
        return cls(ckpt, model, runtime, device, budget, kernels)

    @property
    def non_expert_bytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.model.parameters())

    # -- generation -------------------------------------------------------------------------------------
    @property
    def context(self) -> int:
        """The model's context in tokens (0: the config names none)."""
        return int(getattr(self.ckpt.config, "max_position_embeddings", 0) or 0)

    def fit_prompt(self, input_ids: list[int] | torch.Tensor, max_new_tokens: int,
                   truncate: bool = False) -> tuple[torch.Tensor, int]:
        """The prompt as a [1, T] tensor on the device, and how many of its oldest tokens were dropped.

        A prompt that leaves no room for `max_new_tokens` in the context is refused (ContextTooLong), or with
        `truncate` loses its oldest tokens."""
        ids = torch.as_tensor(input_ids, dtype=torch.long).reshape(1, -1).to(self.device)
        if ids.shape[1] == 0:
            raise ValueError("the prompt is empty: give at least one token")
        context = self.context
        room = context - max_new_tokens
        if context and ids.shape[1] > room:
            if not truncate or room < 1:
                raise ContextTooLong(f"prompt of {ids.shape[1]} tokens plus {max_new_tokens} new ones exceeds the "
                                     f"model's context of {context}; shorten the prompt, ask for fewer tokens, or "
                                     "let it truncate the oldest tokens")
            dropped = ids.shape[1] - room
            return ids[:, dropped:], dropped
        return ids, 0

    @torch.inference_mode()
    def prefill(self, ids: torch.Tensor, joining: bool = False) -> tuple[torch.Tensor, DynamicCache]:
        """Run a prompt ([1, T]) through the model: the last position's logits and the sequence's KV cache.
        `joining`: other sequences are mid-decode beside this one (see MoERuntime.begin_sequence)."""
        embedding = self.model.get_input_embeddings()(ids)[0].float().mean(0).cpu()  # fMoE's semantic key
        logits, cache = self._prefill_pass(ids, embedding, joining)
        return logits[0, -1], cache

    @torch.inference_mode()
    def prefill_many(self, prompts: list[torch.Tensor], joining: bool = False
                     ) -> tuple[torch.Tensor, DynamicCache, list[int]]:
        """Several prompts ([1, T_i] each) in one forward pass: the last logits per prompt [B, V], their KV
        cache as rows left-padded to the longest, and each row's padding (what `KVBatch.join` takes).

        Each expert is then read and run once for every prompt's tokens instead of once per prompt. Padding
        is masked out of attention, positions count each prompt's own tokens, and the experts skip padding
        (`MoERuntime.skip_tokens`), so no read is spent on it. One prompt is exactly `prefill`."""
        if len(prompts) == 1:
            logits, cache = self.prefill(prompts[0], joining)
            return logits[None], cache, [0]
        width = max(p.shape[1] for p in prompts)
        pads = [width - p.shape[1] for p in prompts]
        ids = torch.zeros(len(prompts), width, dtype=torch.long, device=self.device)
        mask = torch.zeros(len(prompts), width, dtype=torch.long, device=self.device)
        for r, (p, pad) in enumerate(zip(prompts, pads)):
            ids[r, pad:], mask[r, pad:] = p[0], 1
        embedding = self.model.get_input_embeddings()(ids)[mask.bool()].float().mean(0).cpu()
        logits, cache = self._prefill_pass(ids, embedding, joining, mask)
        return logits[:, -1], cache, pads

    def _prefill_pass(self, ids: torch.Tensor, embedding: torch.Tensor, joining: bool,
                      mask: torch.Tensor | None = None) -> tuple[torch.Tensor, DynamicCache]:
        """Prompt tokens through the model with the runtime in prefill: the logits and a fresh KV cache. With a
        padding `mask` ([B, T], left padding), positions count each row's own tokens and padding runs no expert."""
        rt = self.runtime
        rt.begin_sequence(embedding, joining=joining)
        cache = DynamicCache(config=self.model.config)
        positions = None if mask is None else (mask.cumsum(-1) - 1).clamp(min=0)
        rt.prefill, rt.skip_tokens = True, None if mask is None else ~mask.bool().flatten()
        try:
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache,
                             use_cache=True)
        except BaseException:
            rt.drop_staged()  # a failed request leaves no read-ahead bytes behind
            raise
        finally:
            rt.prefill, rt.skip_tokens = False, None
        return out.logits, cache

    @torch.inference_mode()
    def step(self, tokens: torch.Tensor, cache: DynamicCache, attention_mask: torch.Tensor | None = None,
             position_ids: torch.Tensor | None = None) -> torch.Tensor:
        """One decode step for every row of `tokens` ([B, 1]); the next logits [B, V]. With one row and no mask
        this is exactly `generate`'s step; rows of unequal length need the padding mask and their positions."""
        rt = self.runtime
        rt.decode_rows = tokens.shape[0]
        try:
            out = self.model(input_ids=tokens, past_key_values=cache, use_cache=True, attention_mask=attention_mask,
                             position_ids=position_ids)
        except BaseException:
            rt.drop_staged()
            raise
        finally:
            rt.decode_rows = 1
        return out.logits[:, -1]

    def meter(self) -> Meter:
        """A reading of the runtime's counters, to charge what happens from now on to one or more sequences."""
        return Meter(self.runtime)

    @torch.inference_mode()
    def generate(self, input_ids: list[int] | torch.Tensor, max_new_tokens: int,
                 eos_token_id: int | None = None, truncate: bool = False) -> Iterator[tuple[int, GenStats]]:
        """Greedy decoding; yields (token id, statistics so far) per new token.

        A prompt that leaves no room for `max_new_tokens` in the context is refused (ContextTooLong), or with
        `truncate` loses its oldest tokens, and `stats.truncated` says how many.
        """
        ids, dropped = self.fit_prompt(input_ids, max_new_tokens, truncate)
        stats = GenStats(prompt_tokens=ids.shape[1], truncated=dropped)
        meter = self.meter()
        t0 = time.perf_counter()
        logits, cache = self.prefill(ids)
        for i in range(max_new_tokens):
            token = int(logits.argmax())
            now = time.perf_counter()
            if i == 0:
                stats.ttft_s = now - t0
            stats.tokens += 1
            stats.seconds = now - t0
            meter.charge([stats])
            yield token, stats
            if token == eos_token_id or i + 1 == max_new_tokens:
                return
            logits = self.step(torch.tensor([[token]], device=self.device), cache)[0]

    def close(self) -> None:
        """Stop the read thread and give the pool's bytes back to the device budget."""
        self.runtime.close()
        self.runtime.store.close()
        if self.budget is not None:
            self.budget.close(POOL_LEDGER)
            self.budget = None


class Meter:
    """Charges the runtime's counters since the last reading to the sequences that shared those steps (one
    sequence alone, or every row of a batched decode step), and records the pool's state in their stats."""

    def __init__(self, runtime: MoERuntime) -> None:
        self.runtime = runtime
        self._last = self._read()

    def _read(self) -> dict[str, int]:
        rt = self.runtime
        out = dataclasses.asdict(rt.counters)
        out["expert_loads"] = rt.store.stats.loads
        out["bytes_read"] = rt.store.stats.bytes_read
        out["host_hits"] = rt.store.host.hits if rt.store.host is not None else 0
        return out

    def charge(self, stats: list[GenStats]) -> None:
        now = self._read()
        delta = {k: v - self._last[k] for k, v in now.items()}
        self._last = now
        rt = self.runtime
        residency = {layer: len(rt.resident_in(layer)) for layer in rt.moe_layers}
        for s in stats:
            for k, v in delta.items():
                setattr(s, k, getattr(s, k) + v)
            s.residency = residency
            s.peak_pool_bytes = rt.store.ledger.peak


def _router_weight(block: torch.nn.Module, ckpt: MoECheckpoint) -> torch.Tensor:
    """The layer's gate [E, H] (named gate or router by the architecture): DAOP applies it one layer early."""
    for name in ("gate", "router"):
        weight = getattr(getattr(block, name, None), "weight", None)
        if weight is not None and weight.shape[0] == ckpt.num_experts:
            return weight.detach()
    raise CheckpointError(f"{ckpt.root}: no router of {ckpt.num_experts} experts in {type(block).__name__}")


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
    expected = set(model.state_dict())  # parameters and persistent buffers (DeepSeek-V3's router bias)
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
