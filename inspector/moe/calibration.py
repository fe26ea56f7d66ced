"""Calibration: how often each expert is selected in the decode phase of a calibration text set.

DAOP and Fiddler place each layer's most frequently activated experts in the
pool before the first request. Counting needs the model to run, so the result
is cached per checkpoint, text set and token count under models/llm/calibration/.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .checkpoint import MoECheckpoint

CALIBRATION_DIR = Path(__file__).resolve().parents[2] / "models" / "llm" / "calibration"


@dataclass
class Calibration:
    counts: dict[int, list[int]]  # layer -> decode-phase selections per expert
    texts: int = 0
    tokens: int = 0

    def ranking(self, layer: int) -> list[int]:
        """The layer's experts, most often selected first (ties by expert number, so it is deterministic)."""
        row = self.counts[layer]
        return sorted(range(len(row)), key=lambda e: (-row[e], e))

    def to_json(self) -> dict:
        return {"counts": {str(k): v for k, v in self.counts.items()}, "texts": self.texts, "tokens": self.tokens}

    @classmethod
    def from_json(cls, data: dict) -> Calibration:
        return cls({int(k): list(v) for k, v in data["counts"].items()}, data["texts"], data["tokens"])


def checkpoint_fingerprint(ckpt: MoECheckpoint) -> str:
    h = hashlib.sha256(json.dumps(ckpt.config.to_dict(), sort_keys=True, default=str).encode())
    for path in sorted({s.gate.path for s in ckpt.experts.values()}):
        h.update(f"{Path(path).name}:{Path(path).stat().st_size}:{Path(path).stat().st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def calibration_key(ckpt: MoECheckpoint, prompts: list[list[int]], new_tokens: int) -> str:
    h = hashlib.sha256(checkpoint_fingerprint(ckpt).encode())
    h.update(json.dumps([prompts, new_tokens]).encode())
    return h.hexdigest()[:16]


def calibrate(root: str | Path, prompts: list[list[int]], new_tokens: int = 32,
              cache_dir: Path | None = CALIBRATION_DIR) -> Calibration:
    """Decode-phase expert selections over the prompts (cached); exact mode, so any policy counts the same."""
    from .engine import OffloadedLM

    ckpt = MoECheckpoint.open(root)
    context = int(getattr(ckpt.config, "max_position_embeddings", 0) or 0)
    if context:
        new_tokens = max(1, min(new_tokens, context // 2))  # leave room for the prompts
    path = Path(cache_dir) / f"{calibration_key(ckpt, prompts, new_tokens)}.json" if cache_dir else None
    if path is not None and path.is_file():
        return Calibration.from_json(json.loads(path.read_text()))
    lm = OffloadedLM.load(root, "lru", cache_ratio=1.0)
    try:
        tokens = sum(len(list(lm.generate(ids, new_tokens, truncate=True))) for ids in prompts)
        counts = {layer: [int(c) for c in row] for layer, row in lm.runtime.decode_activity.items()}
    finally:
        lm.close()
    result = Calibration(counts, len(prompts), tokens)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".partial")
        tmp.write_text(json.dumps(result.to_json()))
        tmp.replace(path)
    return result


def calibrate_on_texts(root: str | Path, tokenizer, cache_dir: Path | None = CALIBRATION_DIR,  # noqa: ANN001
                       log: Callable[[str], None] | None = None) -> Calibration:
    """`calibrate` on the default calibration texts, encoded as prompts are; says how long it took when it ran."""
    from .text import encode_prompt

    t0 = time.perf_counter()
    cal = calibrate(root, [encode_prompt(tokenizer, t) for t in calibration_texts()], cache_dir=cache_dir)
    if log is not None and time.perf_counter() - t0 > 1:
        log(f"calibrated expert popularity on {cal.texts} texts, {cal.tokens} decode tokens "
            f"({time.perf_counter() - t0:.0f} s, cached)")
    return cal


def calibration_texts(count: int = 16, chars: int = 800) -> list[str]:
    """The default calibration set: the openings of `count` evenly spaced files of the standard library's
    training split (the benchmark's prompts are not among them)."""
    from .demo.corpus import Corpus, stdlib_corpus

    files = stdlib_corpus().train
    step = max(1, len(files) // count)
    return [text[:chars] for text in Corpus.read(files[::step][:count])]
