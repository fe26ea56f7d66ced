"""Calibration runs: the decode-phase routing of a text set, counted and traced, cached.

The model runs through the same offloaded engine at the smallest cache ratio (top-k of each layer's experts
resident, the rest read as needed), so calibrating never needs every expert in RAM; the engine is exact, so
the routing it records is the model's own, whatever the pool holds.
The trace (router probabilities and picks per decode step, and each prompt's
embedding) is saved beside the counts as a .pt file.
"""
from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from pathlib import Path

import torch

from ...runtime.diskio import write_atomically
from ..calibration import CALIBRATION_DIR, Calibration, RoutingTrace, calibration_key
from ..checkpoint import MoECheckpoint
from ..engine import OffloadedLM


def calibrate(root: str | Path, prompts: list[list[int]], new_tokens: int = 32,
              cache_dir: Path | None = CALIBRATION_DIR, log: Callable[[str], None] | None = None) -> Calibration:
    """Decode-phase expert selections and the routing trace over the prompts (cached)."""
    ckpt = MoECheckpoint.open(root)
    context = int(getattr(ckpt.config, "max_position_embeddings", 0) or 0)
    if context:
        new_tokens = max(1, min(new_tokens, context // 2))  # leave room for the prompts
    key = calibration_key(ckpt, prompts, new_tokens)
    path = Path(cache_dir) / f"{key}.json" if cache_dir else None
    if path is not None and path.is_file() and path.with_suffix(".pt").is_file():
        return Calibration.from_json(json.loads(path.read_text()), RoutingTrace.load(path.with_suffix(".pt")), path)
    if log is not None:  # minutes on a first run, with nothing else to show meanwhile
        log(f"calibrating: {len(prompts)} texts x {new_tokens} decode tokens on the CPU, once (cached after)")
    lm = OffloadedLM.load(root, "lru", cache_ratio=ckpt.top_k / ckpt.num_experts)  # streams the experts
    rt = lm.runtime
    rt.trace = []
    embeddings, step_seq, tokens = [], [], 0
    try:
        for i, ids in enumerate(prompts):
            before = len(rt.trace)
            tokens += len(list(lm.generate(ids, new_tokens, truncate=True)))
            embeddings.append(rt.embedding.float())
            step_seq += [i] * (len(rt.trace) - before)
        counts = {layer: [int(c) for c in row] for layer, row in rt.decode_activity.items()}
    finally:
        lm.close()
    probs = torch.stack([p for p, _ in rt.trace]) if rt.trace else torch.zeros(0, len(ckpt.moe_layers),
                                                                                ckpt.num_experts)
    picks = torch.stack([k for _, k in rt.trace]) if rt.trace else torch.zeros(0, len(ckpt.moe_layers),
                                                                                ckpt.top_k, dtype=torch.int16)
    trace = RoutingTrace(torch.stack(embeddings), torch.tensor(step_seq, dtype=torch.long), probs, picks)
    result = Calibration(counts, len(prompts), tokens, trace, key, path)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)  # the trace first: the JSON says the cache is there
        buf = io.BytesIO()
        trace.save(buf)
        write_atomically(path.with_suffix(".pt"), buf.getvalue())
        write_atomically(path, json.dumps(result.to_json()).encode("utf-8"))
    return result


def calibrate_on_texts(root: str | Path, tokenizer, cache_dir: Path | None = CALIBRATION_DIR,  # noqa: ANN001
                       log: Callable[[str], None] | None = None) -> Calibration:
    """`calibrate` on the default calibration texts, encoded as prompts are; says how long it took when it ran."""
    from ..text import encode_prompt

    t0 = time.perf_counter()
    cal = calibrate(root, [encode_prompt(tokenizer, t) for t in calibration_texts()], cache_dir=cache_dir, log=log)
    if log is not None and time.perf_counter() - t0 > 1:
        log(f"calibrated expert popularity and routing trace on {cal.texts} texts, {cal.tokens} decode tokens "
            f"({time.perf_counter() - t0:.0f} s, cached)")
    return cal


def calibration_texts(count: int = 64, chars: int = 800) -> list[str]:
    """The default calibration set: the openings of `count` evenly spaced files of the standard library's
    training split (the benchmark's prompts are not among them)."""
    from ..demo.corpus import Corpus, stdlib_corpus

    files = stdlib_corpus().train
    step = max(1, len(files) // count)
    return [text[:chars] for text in Corpus.read(files[::step][:count])]
