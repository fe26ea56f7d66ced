"""`inspector llm plan`: what fits where, from the checkpoint's config alone, before any weight is read.

The model is built on the meta device from its config (no memory, no weights), which gives every non-expert
parameter exactly and the routed experts' shapes. From those and the serving choices (expert dtype, policy,
context, sequences) the plan sizes each part the engine will hold on the device: non-expert weights, the KV
cache, activations and the expert pool (resident experts plus the policy's read buffers), and picks the
largest cache ratio whose pool fits what is left. On a GPU box the host tier (every expert waiting in pinned
RAM by default) is checked against this machine's physical memory. `llm serve` and `llm chat` refuse a plan
that cannot fit, naming the figure, instead of failing in the middle of a load.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from .checkpoint import ARCHS, CheckpointError
from .engine import BudgetTooSmall, layer_slots
from .policies import get_policy
from .quant.weights import int4_layout
from .store import HOST_RESERVE, physical_ram, pinnable_share

GiB = 2**30
CUDA_RESERVE = 1 * GiB  # the CUDA context, cuBLAS workspaces and the caching allocator's slack
DEFAULT_CONTEXT = 4096  # tokens a sequence is planned for unless told (a model's whole context is rarely used)


class PlanDoesNotFit(ValueError):
    """The serving choices need more memory than the device has: the message names the figure."""


@dataclass(frozen=True)
class ModelShape:
    """What the plan needs of a model, read from its config (duck-types the checkpoint for layer_slots)."""

    model_type: str
    num_experts: int
    top_k: int
    moe_layers: tuple[int, ...]
    projections: tuple[tuple[int, int], ...]  # an expert's matrices [out, in]: gate, up, down
    non_expert_params: int
    stored_bytes: int  # bytes per parameter as the checkpoint stores them
    kv_values_per_token: int  # keys and values one token leaves in the cache, all layers together
    hidden: int
    heads: int
    context: int

    @property
    def expert_params(self) -> int:
        return sum(n * k for n, k in self.projections)


def model_shape(root: str | Path) -> ModelShape:
    from transformers import AutoConfig, AutoModelForCausalLM

    root = Path(root)
    if not (root / "config.json").is_file():
        raise CheckpointError(f"{root} has no config.json: pass a Hugging Face checkpoint directory")
    config = AutoConfig.from_pretrained(root, local_files_only=True)
    if config.model_type not in ARCHS:
        raise CheckpointError(f"{root}: architecture {config.model_type!r} is not supported; supported: "
                              f"{', '.join(sorted(ARCHS))}")
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    experts = {name: mod for name, mod in model.named_modules() if name.endswith(".experts")
               and hasattr(mod, "gate_up_proj")}
    if not experts:
        raise CheckpointError(f"{root}: the config builds no routed experts")
    some = next(iter(experts.values()))
    e, two_i, h = some.gate_up_proj.shape
    inner = two_i // 2
    expert_total = sum(p.numel() for m in experts.values() for p in m.parameters())
    non_expert = sum(p.numel() for p in model.parameters()) - expert_total
    layers = tuple(sorted(int(name.split(".")[2]) for name in experts))
    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or torch.float32
    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    return ModelShape(config.model_type, int(e), int(config.num_experts_per_tok), layers,
                      ((inner, h), (inner, h), (h, inner)), non_expert, torch.empty(0, dtype=dtype).element_size(),
                      _kv_per_token(config), int(config.hidden_size), int(config.num_attention_heads),
                      int(getattr(config, "max_position_embeddings", 0) or 0))


def _kv_per_token(config) -> int:  # noqa: ANN001 - a transformers config
    layers = int(config.num_hidden_layers)
    heads = int(config.num_attention_heads)
    if getattr(config, "kv_lora_rank", None):  # DeepSeek's latent attention: transformers caches full K and V
        k = heads * (int(config.qk_nope_head_dim) + int(config.qk_rope_head_dim))
        return layers * (k + heads * int(config.v_head_dim))
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    return layers * 2 * kv_heads * head_dim


def expert_bytes(shape: ModelShape, expert_dtype: str, device: torch.device) -> int:
    """One expert's bytes as served: stored, or quantized as quant/weights.py does it (scales included)."""
    total = 0
    for n, k in shape.projections:
        if expert_dtype == "native":
            total += n * k * shape.stored_bytes
        elif expert_dtype == "bf16":
            total += n * k * 2
        elif expert_dtype == "int8":
            total += n * k + 2 * n
        else:
            group, _ = int4_layout((n, k), device)
            total += n * k // 2 + (k // group) * n * 4
    return total


@dataclass
class Plan:
    device: str
    memory: int
    expert_dtype: str
    policy: str
    context: int
    sequences: int
    non_expert: int
    kv_cache: int
    activations: int
    reserve: int
    expert_bytes: int
    all_experts: int
    cache_ratio: float | None  # None: not even the smallest pool fits
    slots: int = 0  # resident experts, all layers
    read_buffers: int = 0
    pool: int = 0
    host_tier: int = 0  # pinned host RAM the host tier would take (GPU)
    host_ratio: float | None = None
    host_ram: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def fixed(self) -> int:
        return self.non_expert + self.kv_cache + self.activations + self.reserve

    @property
    def fits(self) -> bool:
        return self.cache_ratio is not None and (self.host_ratio is None or self.host_ratio > 0)

    def refusal(self) -> str:
        """Why it cannot fit, with the figure and what to change."""
        if self.cache_ratio is None:
            return (f"the plan does not fit {self.memory / GiB:.1f} GiB on {self.device}: non-expert weights "
                    f"{self.non_expert / GiB:.2f} GiB + KV cache {self.kv_cache / GiB:.2f} GiB + activations "
                    f"{self.activations / GiB:.2f} GiB + reserve {self.reserve / GiB:.2f} GiB leave "
                    f"{max(0, self.memory - self.fixed) / GiB:.2f} GiB, and the expert pool needs "
                    f"{self.pool / GiB:.2f} GiB; quantize the experts (--expert-dtype int4), shorten the context "
                    "or serve fewer sequences at once")
        return (f"the host tier needs pinned RAM this box lacks ({self.host_ram / GiB:.1f} GiB physical, "
                f"{HOST_RESERVE / GiB:.0f} GiB kept for the system); pass --host-ratio 0 or quantize the experts")


def make_plan(shape: ModelShape, device: str, memory: int, expert_dtype: str = "native", policy: str = "daop",
              context: int | None = None, sequences: int = 1, host_ratio: float | None = None,
              cache_ratio: float | None = None, host_ram: int | None = None) -> Plan:
    """Size every part on the device and pick the largest cache ratio (or check the one given) that fits."""
    dev = torch.device(device)
    pol = get_policy(policy)
    ctx = min(context or DEFAULT_CONTEXT, shape.context) if shape.context else (context or DEFAULT_CONTEXT)
    act_bytes = 2 if expert_dtype != "native" or shape.stored_bytes == 2 else shape.stored_bytes
    kv = shape.kv_values_per_token * ctx * sequences * act_bytes
    # a prefill of the whole context: a few hidden-state buffers and one expert's inner activations in float32,
    # and on the CPU the attention scores of one layer (GPU kernels do not materialise them)
    inner = max(n for n, _ in shape.projections)
    acts = ctx * sequences * (6 * shape.hidden + 3 * inner) * 4
    if dev.type == "cpu":
        acts += shape.heads * ctx * ctx * sequences * 4
    reserve = CUDA_RESERVE if dev.type == "cuda" else 0
    per = expert_bytes(shape, expert_dtype, dev)
    all_experts = per * shape.num_experts * len(shape.moe_layers)
    buffers = pol.read_buffers(shape.top_k, shape.num_experts)
    plan = Plan(device, memory, expert_dtype, policy, ctx, sequences, shape.non_expert_params * shape.stored_bytes,
                kv, acts, reserve, per, all_experts, None, read_buffers=buffers)
    room = memory - plan.fixed
    ratios = [cache_ratio] if cache_ratio is not None else \
        [n / shape.num_experts for n in range(shape.num_experts, shape.top_k - 1, -1)]
    for ratio in ratios:
        try:
            slots = sum(layer_slots(shape, ratio).values())  # type: ignore[arg-type] - ModelShape duck-types it
        except BudgetTooSmall as exc:
            raise PlanDoesNotFit(str(exc)) from None
        plan.slots, plan.pool = slots, (slots + buffers) * per
        if plan.pool <= room:
            plan.cache_ratio = ratio
            break
    if dev.type == "cuda":
        plan.host_ram = host_ram if host_ram is not None else physical_ram()
        want = 1.0 if host_ratio is None else host_ratio
        plan.host_ratio = min(want, pinnable_share(all_experts, plan.non_expert, plan.host_ram))
        plan.host_tier = int(plan.host_ratio * all_experts)
        if plan.host_ratio < want:
            plan.notes.append(f"pinned RAM holds {plan.host_ratio:.2f} of the experts, not {want:.2f}: the rest are "
                              "read from disk")
    return plan


def format_plan(plan: Plan, shape: ModelShape, name: str) -> str:
    def gib(n: int) -> str:
        return f"{n / GiB:8.2f} GiB"

    lines = [f"plan for {name} ({shape.model_type}: {len(shape.moe_layers)} MoE layers x {shape.num_experts} "
             f"experts, top-{shape.top_k}) on {plan.device} with {plan.memory / GiB:.1f} GiB, {plan.expert_dtype} "
             f"experts, policy {plan.policy}",
             f"  non-expert weights           {gib(plan.non_expert)}",
             f"  KV cache                     {gib(plan.kv_cache)}  ({plan.context} tokens x {plan.sequences} "
             "sequence(s))",
             f"  activations                  {gib(plan.activations)}  (a prefill of the whole context)"]
    if plan.reserve:
        lines.append(f"  CUDA context and slack       {gib(plan.reserve)}")
    lines.append(f"  one expert                   {plan.expert_bytes / 2**20:8.1f} MiB  (all "
                 f"{shape.num_experts * len(shape.moe_layers)}: {plan.all_experts / GiB:.2f} GiB)")
    if plan.cache_ratio is None:
        lines.append(f"  expert pool                  {gib(plan.pool)}  at the smallest cache ratio: DOES NOT FIT")
    else:
        lines.append(f"  expert pool                  {gib(plan.pool)}  cache ratio {plan.cache_ratio:.3f}: "
                     f"{plan.slots} resident + {plan.read_buffers} read buffers")
        lines.append(f"  total                        {gib(plan.fixed + plan.pool)}  of {plan.memory / GiB:.1f} GiB")
    if plan.host_ratio is not None:
        lines.append(f"  host tier (pinned RAM)       {gib(plan.host_tier)}  host ratio {plan.host_ratio:.2f} of "
                     f"{plan.host_ram / GiB:.1f} GiB physical RAM")
    lines += [f"  note: {n}" for n in plan.notes]
    lines.append("fits" if plan.fits else "DOES NOT FIT: " + plan.refusal())
    return "\n".join(lines)


def parse_size(text: str) -> int:
    """'24G', '24GiB', '512M', '2.5T' or plain bytes."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    scale = {"K": 2**10, "M": 2**20, "G": GiB, "T": 2**40}.get(t[-1:], 1)
    try:
        value = float(t[:-1] if scale > 1 else t)
    except ValueError:
        raise ValueError(f"--memory wants a size like 24G or 512M, got {text!r}") from None
    if value <= 0:
        raise ValueError(f"--memory wants a positive size, got {text!r}")
    return int(value * scale)


def check_fits(root: str | Path, device: str, memory: int | None, expert_dtype: str, policy: str,
               cache_ratio: float, sequences: int, host_ratio: float | None, context: int | None = None) -> Plan:
    """The plan for serving with these choices; PlanDoesNotFit naming the figure when it cannot fit."""
    shape = model_shape(root)
    plan = make_plan(shape, device, memory or device_memory(device), expert_dtype, policy,
                     context, sequences, host_ratio, cache_ratio)
    if not plan.fits:
        raise PlanDoesNotFit(plan.refusal() + f" (cache ratio {cache_ratio:g}; `inspector llm plan` shows the parts)")
    return plan


def device_memory(device: str) -> int:
    """What the device has: a GPU's total memory, or this box's physical RAM less the system's share."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.cuda.get_device_properties(dev).total_memory
    return physical_ram() - HOST_RESERVE
