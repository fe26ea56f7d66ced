"""A local Hugging Face MoE checkpoint: its config, shards, and where every expert's tensors lie.

transformers 5 fuses a layer's experts into 3D parameters (experts.gate_up_proj
[E, 2I, H], experts.down_proj [E, H, I]) while checkpoint files keep one tensor
per expert and projection. The engine reads the per-expert tensors straight
from the shards (or slices fused ones), so no layer's experts are ever loaded
all at once. Non-expert weights are renamed to the model's parameter names.
"""
from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoConfig, PretrainedConfig

from ..runtime.diskio import read_range
from ..runtime.safetensors_io import TensorSpan, header_index


class CheckpointError(ValueError):
    """The checkpoint directory cannot be served: say what is missing and what to do."""


@dataclass(frozen=True)
class ArchSpec:
    """How one architecture names its experts on disk and in the model."""

    model_type: str
    renames: tuple[tuple[str, str], ...] = ()  # checkpoint key fragment -> model parameter fragment
    router: str = "gate"  # the MoE block's router attribute (its .weight gives the logits)
    # per-expert projections on disk: (gate, up, down) names
    projections: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj")
    block: str = "mlp"  # the MoE block's name on disk


ARCHS: dict[str, ArchSpec] = {
    "mixtral": ArchSpec("mixtral", renames=(("block_sparse_moe.", "mlp."),), projections=("w1", "w3", "w2"),
                        block="block_sparse_moe"),
    "phimoe": ArchSpec("phimoe", renames=(("block_sparse_moe.gate.", "mlp.router."), ("block_sparse_moe.", "mlp.")),
                       router="router", projections=("w1", "w3", "w2"), block="block_sparse_moe"),
    "qwen2_moe": ArchSpec("qwen2_moe"),
    "qwen3_moe": ArchSpec("qwen3_moe"),
    "olmoe": ArchSpec("olmoe"),
    # DeepSeek: routed experts under mlp.experts, shared experts beside them (kept with the non-expert weights),
    # group-limited top-k in transformers' own router; the first layers are dense MLPs with no experts at all
    "deepseek_v2": ArchSpec("deepseek_v2"),
    "deepseek_v3": ArchSpec("deepseek_v3"),
}


@dataclass(frozen=True)
class ExpertKey:
    layer: int
    expert: int

    def __str__(self) -> str:
        return f"L{self.layer}.E{self.expert}"


@dataclass(frozen=True)
class ExpertSpans:
    """Where one expert's three projections lie; with `fused_index`, gate is the fused gate_up tensor of all
    experts and down the fused down tensor, and the expert is that index of each."""

    gate: TensorSpan
    up: TensorSpan
    down: TensorSpan
    fused_index: int | None = None  # set when the spans are whole fused tensors to slice

    @property
    def nbytes(self) -> int:
        if self.fused_index is None:
            return self.gate.nbytes + self.up.nbytes + self.down.nbytes
        e = self.gate.shape[0]
        return (self.gate.nbytes + self.down.nbytes) // e


@dataclass
class MoECheckpoint:
    root: Path
    config: PretrainedConfig
    arch: ArchSpec
    spans: dict[str, TensorSpan]  # every tensor on disk
    experts: dict[ExpertKey, ExpertSpans] = field(default_factory=dict)
    moe_layers: tuple[int, ...] = ()
    num_experts: int = 0
    top_k: int = 0
    expert_dtype: str = "native"  # how the experts are served: as stored, or from a quantized copy (quant/)

    @property
    def stored_dtype(self) -> torch.dtype:
        """The dtype the checkpoint stores its experts in."""
        return next(iter(self.experts.values())).gate.dtype

    def served_as(self, expert_dtype: str, experts: dict) -> MoECheckpoint:
        """The same checkpoint with its experts read from elsewhere (a quantized copy's spans)."""
        return dataclasses.replace(self, experts=experts, expert_dtype=expert_dtype)

    @classmethod
    def open(cls, root: str | Path) -> MoECheckpoint:
        root = Path(root)
        if not (root / "config.json").is_file():
            raise CheckpointError(f"{root} has no config.json: pass a Hugging Face checkpoint directory")
        try:
            config = AutoConfig.from_pretrained(root, local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - transformers raises many kinds; all mean the same here
            raise CheckpointError(f"{root}/config.json cannot be read by transformers: {exc}") from None
        arch = ARCHS.get(config.model_type)
        if arch is None:
            raise CheckpointError(f"{root}: architecture {config.model_type!r} is not supported; supported: "
                                  f"{', '.join(sorted(ARCHS))}")
        spans: dict[str, TensorSpan] = {}
        for shard in _shards(root):
            spans.update(header_index(shard))
        ckpt = cls(root, config, arch, spans)
        ckpt._find_experts()
        return ckpt

    def _find_experts(self) -> None:
        gate_n, up_n, down_n = self.arch.projections
        names = f"{gate_n}|{up_n}|{down_n}"
        per = re.compile(rf"model\.layers\.(\d+)\.{self.arch.block}\.experts\.(\d+)\.({names})\.weight$")
        fused = re.compile(r"model\.layers\.(\d+)\.(?:mlp|block_sparse_moe)\.experts\.(gate_up_proj|down_proj)$")
        found: dict[ExpertKey, dict[str, TensorSpan]] = {}
        fused_found: dict[int, dict[str, TensorSpan]] = {}
        for name, span in self.spans.items():
            if m := per.match(name):
                found.setdefault(ExpertKey(int(m[1]), int(m[2])), {})[m[3]] = span
            elif m := fused.match(name):
                fused_found.setdefault(int(m[1]), {})[m[2]] = span
        for key, parts in found.items():
            missing = [p for p in (gate_n, up_n, down_n) if p not in parts]
            if missing:
                raise CheckpointError(f"{self.root}: expert {key} lacks {', '.join(missing)}; the shards are "
                                      "incomplete: copy the whole checkpoint again")
            self.experts[key] = ExpertSpans(parts[gate_n], parts[up_n], parts[down_n])
        for layer, parts in fused_found.items():
            if set(parts) != {"gate_up_proj", "down_proj"}:
                raise CheckpointError(f"{self.root}: layer {layer} has only {sorted(parts)} of its fused experts")
            for e in range(parts["gate_up_proj"].shape[0]):
                self.experts[ExpertKey(layer, e)] = ExpertSpans(parts["gate_up_proj"], parts["gate_up_proj"],
                                                                parts["down_proj"], fused_index=e)
        cfg = self.config
        self.num_experts = int(getattr(cfg, "num_local_experts", None) or getattr(cfg, "num_experts", None)
                               or getattr(cfg, "n_routed_experts", 0))
        self.top_k = int(cfg.num_experts_per_tok)
        self.moe_layers = tuple(sorted({k.layer for k in self.experts}))
        if not self.moe_layers and any(n.endswith(".qweight") for n in self.spans):
            raise CheckpointError(f"{self.root} holds AWQ/GPTQ-packed weights (qweight tensors), which this engine "
                                  "does not read; serve the original bf16 checkpoint with --expert-dtype int4 (it is "
                                  "quantized here, once)")
        fp8 = {s.dtype for s in self.spans.values() if s.dtype in (torch.float8_e4m3fn, torch.float8_e5m2)}
        if fp8:
            raise CheckpointError(f"{self.root} stores FP8 weights ({', '.join(sorted(map(str, fp8)))}); this engine "
                                  "has no FP8 kernel and does not dequantize block-scaled FP8 yet: serve the bf16 "
                                  "release of the model (with --expert-dtype int8 or int4 to shrink it)")
        if not self.moe_layers:
            raise CheckpointError(f"{self.root}: no expert tensors found (expected names like "
                                  f"model.layers.0.{self.arch.block}.experts.0.{gate_n}.weight)")
        for layer in self.moe_layers:
            missing = [e for e in range(self.num_experts) if ExpertKey(layer, e) not in self.experts]
            if missing:
                raise CheckpointError(f"{self.root}: layer {layer} lacks experts {missing}; a shard is missing "
                                      "or truncated: copy the whole checkpoint again")

    # -- weights --------------------------------------------------------------------------------------
    def expert_tensors(self, key: ExpertKey) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One expert's gate [I, H], up [I, H] and down [H, I] as stored, read alone (a copy, not the page cache's)."""
        spans = self.experts[key]

        def read(span: TensorSpan) -> torch.Tensor:
            return span.from_bytes(read_range(span.path, span.offset, span.nbytes, False))

        if spans.fused_index is None:
            return read(spans.gate), read(spans.up), read(spans.down)
        e = spans.fused_index
        fused, down = spans.gate, spans.down
        row, drow = fused.nbytes // fused.shape[0], down.nbytes // down.shape[0]
        gate_up = TensorSpan(fused.path, fused.dtype, fused.shape[1:], fused.offset + e * row, row)
        gu = read(gate_up)
        half = gu.shape[0] // 2
        return gu[:half], gu[half:], read(TensorSpan(down.path, down.dtype, down.shape[1:], down.offset + e * drow,
                                                     drow))

    def model_key(self, disk_key: str) -> str:
        for old, new in self.arch.renames:
            disk_key = disk_key.replace(old, new)
        return disk_key

    def is_expert_tensor(self, name: str) -> bool:
        return ".experts." in name and ".shared_expert" not in name

    @property
    def non_expert_bytes(self) -> int:
        """Bytes of every tensor that is not a routed expert's (read from the shards' headers)."""
        return sum(span.nbytes for name, span in self.spans.items() if not self.is_expert_tensor(name))

    def non_expert_state(self) -> dict[str, torch.Tensor]:
        """Every weight but the routed experts, under the model's parameter names (read once, at load)."""
        out = {}
        for name, span in self.spans.items():
            if self.is_expert_tensor(name):
                continue
            out[self.model_key(name)] = span.from_bytes(read_range(span.path, span.offset, span.nbytes, False))
        return out


def _shards(root: Path) -> list[Path]:
    index = root / "model.safetensors.index.json"
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (json.JSONDecodeError, KeyError) as exc:
            raise CheckpointError(f"{index} is not a valid shard index: {exc}") from None
        missing = [n for n in names if not (root / n).is_file()]
        if missing:
            raise CheckpointError(f"{root}: shards {', '.join(missing)} named in {index.name} are missing; "
                                  "copy them from the original checkpoint")
        return [root / n for n in names]
    single = root / "model.safetensors"
    if single.is_file():
        return [single]
    if list(root.glob("*.bin")):
        raise CheckpointError(f"{root} holds PyTorch .bin weights; save it as safetensors "
                              "(model.save_pretrained(dir, safe_serialization=True))")
    raise CheckpointError(f"{root} has no model.safetensors or model.safetensors.index.json")
