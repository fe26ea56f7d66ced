"""`inspector llm bench-realsize`: experts at their real size, measured against this disk's read bandwidth.

A Mixtral-shaped checkpoint (hidden 4096, experts 4096 x 14336, 8 per layer, top-2) with only a few layers (so
it fits the disk) and random weights, saved by transformers as sharded safetensors with the demo tokenizer;
built once. Each expert dtype then runs the policies at one cache ratio, every run a cold pool, and the table
gives tokens/s, bytes read per token, the disk's busy share, and the read-bandwidth bound: the disk's measured
sequential O_DIRECT bandwidth over the bytes a token needs read (no policy can beat it at that cache ratio).
Random weights make the routing close to uniform: the hardest case for every cache.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ..runtime.diskio import fsync_and_drop, read_ranges_into
from .bench import BenchRun, agreement, run_policy
from .calibration import Calibration

SHAPE = dict(hidden_size=4096, intermediate_size=14336, num_local_experts=8, num_experts_per_tok=2,
             num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=4096, vocab_size=32000)
RECORD = "realsize.json"


def build_realsize(out: Path, layers: int, tokenizer_from: Path | None, log: Callable[[str], None]) -> Path:
    """The checkpoint, built once (random normal weights scaled as a trained model's are, bf16, 4 GB shards)."""
    from transformers import MixtralConfig, MixtralForCausalLM

    if (out / RECORD).is_file():
        return out
    t0 = time.perf_counter()
    vocab = SHAPE["vocab_size"]
    if tokenizer_from is not None:
        from .text import load_tokenizer

        vocab = len(load_tokenizer(tokenizer_from))
    config = MixtralConfig(**{**SHAPE, "vocab_size": vocab}, num_hidden_layers=layers, dtype="bfloat16",
                           tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    with torch.device("meta"):
        model = MixtralForCausalLM(config)
    model = model.to_empty(device="cpu").to(torch.bfloat16)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.fill_(1.0)
            else:
                p.normal_(0, p.shape[-1] ** -0.5)
        for m in model.modules():  # rotary frequencies are non-persistent buffers made at construction
            if hasattr(m, "inv_freq") and m.inv_freq.is_meta:
                m.__init__(config)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, max_shard_size="4GB")
    del model
    if tokenizer_from is not None:
        from .text import load_tokenizer

        load_tokenizer(tokenizer_from).save_pretrained(tmp)
    for f in tmp.glob("*.safetensors"):
        fsync_and_drop(f)
    (tmp / RECORD).write_text(json.dumps({"layers": layers, "seconds": time.perf_counter() - t0, **SHAPE}))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    log(f"built {out} ({layers} layers) in {time.perf_counter() - t0:.0f} s")
    return out


def read_bandwidth(paths: list[Path], chunk: int = 64 << 20, limit: int = 4 << 30) -> float:
    """Bytes/s of O_DIRECT reads of the shards in large chunks (the page cache dropped): the disk's limit."""
    buf = bytearray(chunk)
    done, t0 = 0, time.perf_counter()
    for path in paths:
        size = os.path.getsize(path)
        for off in range(0, size - chunk, chunk):
            read_ranges_into(path, [(off, memoryview(buf))], drop_cache=True)
            done += chunk
            if done >= limit:
                return done / (time.perf_counter() - t0)
    return done / (time.perf_counter() - t0)


def ratio_for(ckpt, policy: str, pool_bytes: int, calibration: Calibration | None) -> float | None:  # noqa: ANN001
    """The largest cache ratio whose pool (resident experts and the policy's read buffers) fits `pool_bytes`."""
    from .engine import pool_plan
    from .policies import get_policy

    pol = get_policy(policy)
    for n in range(ckpt.num_experts, ckpt.top_k - 1, -1):
        if pool_plan(ckpt, pol, n / ckpt.num_experts, calibration)[1] <= pool_bytes:
            return n / ckpt.num_experts
    return None


@dataclass
class RealsizeRow:
    expert_dtype: str
    expert_mib: float
    run: BenchRun
    cache_ratio: float = 0.0

    @property
    def bytes_per_token(self) -> float:
        return self.run.bytes_read / max(1, self.run.new_tokens)

    def bound(self, bandwidth: float) -> float:
        return bandwidth / self.bytes_per_token if self.bytes_per_token else float("inf")


def bench_realsize(root: Path, dtypes: list[str], policies: list[str], cache_ratio: float,
                   prompts: list[list[int]], new_tokens: int, calibration: Calibration | None, quant_dir: Path,
                   log: Callable[[str], None], pool_bytes: int | None = None,
                   device: str = "cpu") -> tuple[float, list[RealsizeRow]]:
    """Every dtype x policy at `cache_ratio`; with `pool_bytes`, each at the largest ratio whose pool fits it
    (the same memory budget: fewer bytes per expert hold more experts)."""
    from .engine import serving_checkpoint

    bandwidth = read_bandwidth(sorted(root.glob("*.safetensors")))
    log(f"disk read bandwidth (O_DIRECT, 64 MiB reads): {bandwidth / 2**20:.0f} MiB/s")
    rows = []
    for dtype in dtypes:
        ckpt = serving_checkpoint(root, dtype, device, quant_dir, log)
        mib = max(s.nbytes for s in ckpt.experts.values()) / 2**20
        for policy in policies:
            ratio = cache_ratio if pool_bytes is None else ratio_for(ckpt, policy, pool_bytes, calibration)
            if ratio is None:
                log(f"{dtype} {policy}: no pool fits {pool_bytes / 2**30:.2f} GiB; skipped")
                continue
            run = run_policy(root, policy, ratio, prompts, new_tokens, calibration, device, log,
                             expert_dtype=dtype, quant_dir=quant_dir)
            first = next((r.run for r in rows if r.expert_dtype == dtype), run)
            run.same_tokens = agreement(first.tokens, run.tokens)  # exact: every policy of a dtype agrees
            rows.append(RealsizeRow(dtype, mib, run, ratio))
            log(f"{dtype} {policy}: {run.tokens_per_s:.3f} tokens/s")
    return bandwidth, rows


def format_realsize(root: Path, bandwidth: float, rows: list[RealsizeRow], budget: str, prompts: int,
                    new_tokens: int, device: str = "cpu") -> str:
    lines = [f"model {root} (Mixtral-shaped, random weights) on {device}: {budget}, {prompts} prompts "
             f"x {new_tokens} new tokens; disk {bandwidth / 2**20:.0f} MiB/s; peak RSS "
             f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.1f} GiB",
             f"{'experts':<7}{'MiB/exp':>8}{'policy':>10}{'ratio':>6}{'tok/s':>8}{'MiB/tok':>9}{'disk busy':>10}"
             f"{'bound tok/s':>12}{'of bound':>9}{'x bf16':>8}{'same tok':>9}"]
    lines.append("-" * len(lines[-1]))
    base = {r.run.policy: r.run.tokens_per_s for r in rows if r.expert_dtype in ("native", "bf16")}
    for r in rows:
        b = r.bound(bandwidth)
        busy = r.run.disk_busy_s / r.run.seconds if r.run.seconds else 0.0
        ratio = r.run.tokens_per_s / base[r.run.policy] if base.get(r.run.policy) else float("nan")
        same = f"{r.run.same_tokens:.3f}" if r.run.same_tokens is not None else "-"
        lines.append(f"{r.expert_dtype:<7}{r.expert_mib:>8.1f}{r.run.policy:>10}{r.cache_ratio:>6.3f}"
                     f"{r.run.tokens_per_s:>8.3f}"
                     f"{r.bytes_per_token / 2**20:>9.1f}{busy:>10.2f}{b:>12.3f}{r.run.tokens_per_s / b:>9.2f}"
                     f"{ratio:>7.2f}x{same:>9}")
    for r in rows:
        if r.run.copy_s > 0:
            lines.append(f"{r.expert_dtype} {r.run.policy}: the copy stream (CUDA events) copied "
                         f"{r.run.copy_s * 1e3:.0f} ms of experts compute used, "
                         f"{1 - r.run.copy_waited_s / r.run.copy_s:.0%} of it hidden behind compute")
    return "\n".join(lines)
