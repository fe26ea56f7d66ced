"""Calibration data: what a calibration run saw of the routing (counts, and the per-step trace).

DAOP and Fiddler place each layer's most frequently activated experts before the
first request (`counts`); fMoE builds its expert-map store and DuoServe trains its
predictor from the per-step `trace`. Collecting it needs the model to run; that
is offline/collect.py, which caches the result per checkpoint, text set and token
count under models/llm/calibration/. This module is data only, so the engine and
the policies can name it without importing the thing that runs the engine.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import torch

from .checkpoint import MoECheckpoint

CALIBRATION_DIR = Path(__file__).resolve().parents[2] / "models" / "llm" / "calibration"


@dataclass
class RoutingTrace:
    """Every decode step of the calibration run: router probabilities and picks of every MoE layer, and which
    sequence (prompt embedding) the step belongs to."""

    embeddings: torch.Tensor  # [S, H] float32: each sequence's prompt embedding (mean of its input embeddings)
    step_seq: torch.Tensor  # [N] long: the sequence of each step
    probs: torch.Tensor  # [N, L, E] float16: router softmax of the step's token, per MoE layer
    picks: torch.Tensor  # [N, L, k] int16: the experts selected, per MoE layer

    @property
    def steps(self) -> int:
        return int(self.probs.shape[0])

    def save(self, path: Path | BinaryIO) -> None:
        torch.save({"embeddings": self.embeddings, "step_seq": self.step_seq, "probs": self.probs,
                    "picks": self.picks}, path)

    @classmethod
    def load(cls, path: Path) -> RoutingTrace:
        data = torch.load(path, weights_only=True)
        return cls(data["embeddings"], data["step_seq"], data["probs"], data["picks"])


@dataclass
class Calibration:
    counts: dict[int, list[int]]  # layer -> decode-phase selections per expert
    texts: int = 0
    tokens: int = 0
    trace: RoutingTrace | None = None
    key: str = ""  # the cache key: artifacts derived from this calibration (a trained predictor) are keyed by it
    path: Path | None = None  # where it is cached (derived artifacts are cached beside it)

    def ranking(self, layer: int) -> list[int]:
        """The layer's experts, most often selected first (ties by expert number, so it is deterministic)."""
        row = self.counts[layer]
        return sorted(range(len(row)), key=lambda e: (-row[e], e))

    def to_json(self) -> dict:
        return {"counts": {str(k): v for k, v in self.counts.items()}, "texts": self.texts, "tokens": self.tokens,
                "key": self.key}

    @classmethod
    def from_json(cls, data: dict, trace: RoutingTrace | None = None, path: Path | None = None) -> Calibration:
        return cls({int(k): list(v) for k, v in data["counts"].items()}, data["texts"], data["tokens"], trace,
                   data.get("key", ""), path)


def checkpoint_fingerprint(ckpt: MoECheckpoint) -> str:
    h = hashlib.sha256(json.dumps(ckpt.config.to_dict(), sort_keys=True, default=str).encode())
    for path in sorted({s.path for s in ckpt.spans.values()}):
        h.update(f"{Path(path).name}:{Path(path).stat().st_size}:{Path(path).stat().st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def calibration_key(ckpt: MoECheckpoint, prompts: list[list[int]], new_tokens: int) -> str:
    h = hashlib.sha256(checkpoint_fingerprint(ckpt).encode())
    h.update(json.dumps([prompts, new_tokens]).encode())
    return h.hexdigest()[:16]
