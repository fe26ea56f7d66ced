"""What a quantized expert costs in quality: held-out perplexity of the served model beside its native experts.

The same windows of held-out text (the demo corpus's held-out files: text no demo model saw) go through the
offloaded model once per expert dtype, with every expert in the pool, so only the weights differ.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn import functional as F

from .engine import OffloadedLM
from .quant.copy import QUANT_DIR


@dataclass
class Quality:
    expert_dtype: str
    perplexity: float
    expert_bytes: int  # every routed expert, as served
    tokens: int


@torch.inference_mode()
def perplexity(lm: OffloadedLM, stream: torch.Tensor, seq_len: int, windows: int) -> tuple[float, int]:
    """exp(mean next-token loss) over the first `windows` non-overlapping windows; and the tokens scored."""
    n = min(windows, (len(stream) - 1) // seq_len)
    if n < 1:
        raise ValueError(f"the held-out text has {len(stream)} tokens, fewer than one window of {seq_len}")
    total, count = 0.0, 0
    rt = lm.runtime
    for i in range(n):
        ids = stream[i * seq_len:(i + 1) * seq_len][None].to(lm.device)
        rt.begin_sequence(None)
        rt.prefill = True
        try:
            logits = lm.model(input_ids=ids).logits[0, :-1].float()
        finally:
            rt.prefill = False
        total += float(F.cross_entropy(logits, ids[0, 1:], reduction="sum"))
        count += ids.shape[1] - 1
    return math.exp(total / count), count


def compare(root: str | Path, dtypes: list[str], stream: torch.Tensor, seq_len: int, windows: int,
            device: str = "cpu", quant_dir: Path = QUANT_DIR, log: Callable[[str], None] | None = None
            ) -> list[Quality]:
    """Perplexity per expert dtype on the same windows, every expert resident."""
    out = []
    for dtype in dtypes:
        lm = OffloadedLM.load(root, "lru", cache_ratio=1.0, device=device, expert_dtype=dtype, quant_dir=quant_dir,
                              log=log)
        try:
            ppl, tokens = perplexity(lm, stream, seq_len, windows)
            out.append(Quality(dtype, ppl, sum(s.nbytes for s in lm.ckpt.experts.values()), tokens))
        finally:
            lm.close()
    return out


def quality_table(rows: list[Quality]) -> str:
    base = rows[0]
    lines = [f"{'experts':<8} {'size MiB':>9} {'x native':>8} {'perplexity':>10} {'vs ' + base.expert_dtype:>10}"]
    for r in rows:
        lines.append(f"{r.expert_dtype:<8} {r.expert_bytes / 2**20:>9.1f} {r.expert_bytes / base.expert_bytes:>8.3f} "
                     f"{r.perplexity:>10.3f} {r.perplexity / base.perplexity - 1:>+10.2%}")
    lines.append(f"({base.tokens} held-out tokens, the same windows for every row)")
    return "\n".join(lines)
