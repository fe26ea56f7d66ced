"""Tiny MoE checkpoints of every supported architecture, built from configs and saved with transformers' own code."""
from __future__ import annotations

from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    DeepseekV2Config,
    DeepseekV3Config,
    MixtralConfig,
    OlmoeConfig,
    PhimoeConfig,
    PretrainedConfig,
    Qwen2MoeConfig,
    Qwen3MoeConfig,
)

from inspector.moe.demo.build import DemoRecipe

# the demo model's recipe at test size: Mixtral, 2 layers x 4 experts, trained for 3 steps with its tokenizer
TINY_DEMO = DemoRecipe(layers=2, experts=4, top_k=2, hidden=32, intermediate=48, heads=2, kv_heads=1, vocab=320,
                       seq_len=64, batch=2, steps=3, warmup=1, eval_windows=2)

COMMON = dict(vocab_size=96, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=128, eos_token_id=1, bos_token_id=0, pad_token_id=0)

# DeepSeek: multi-head latent attention (no grouped KV heads), a dense first layer, shared experts, and top-2
# limited to the best 2 of 4 expert groups
MLA = dict(COMMON, num_key_value_heads=4, intermediate_size=64, moe_intermediate_size=24, n_routed_experts=8,
           n_shared_experts=1, num_experts_per_tok=2, first_k_dense_replace=1, kv_lora_rank=16, qk_rope_head_dim=8,
           qk_nope_head_dim=8, v_head_dim=8)


def tiny_configs() -> dict:
    return {
        "mixtral": MixtralConfig(**COMMON, intermediate_size=48, num_local_experts=8, num_experts_per_tok=2),
        "qwen2_moe": Qwen2MoeConfig(**COMMON, intermediate_size=64, moe_intermediate_size=24, num_experts=8,
                                    shared_expert_intermediate_size=48, num_experts_per_tok=2),
        "qwen3_moe": Qwen3MoeConfig(**COMMON, head_dim=8, intermediate_size=64, moe_intermediate_size=24,
                                    num_experts=8, num_experts_per_tok=2),
        "olmoe": OlmoeConfig(**COMMON, intermediate_size=24, num_experts=8, num_experts_per_tok=2),
        "phimoe": PhimoeConfig(**COMMON, intermediate_size=24, num_local_experts=8, num_experts_per_tok=2),
        "deepseek_v2": DeepseekV2Config(**MLA, n_group=4, topk_group=2, topk_method="group_limited_greedy",
                                        q_lora_rank=None),
        "deepseek_v3": DeepseekV3Config(**MLA, n_group=4, topk_group=2, q_lora_rank=24),
    }


def save_tiny(name: str, root: Path, seed: int = 0, max_shard_size: str | None = None,
              config: PretrainedConfig | None = None) -> Path:
    """Save architecture `name` (or `config`, under that name) with a spread of random weights."""
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config or tiny_configs()[name])
    with torch.no_grad():  # a spread of router weights, so routing differs token to token
        for p in model.parameters():
            p.normal_(0, 0.3)
    out = root / name
    kwargs = {"max_shard_size": max_shard_size} if max_shard_size else {}
    model.save_pretrained(out, **kwargs)
    return out
