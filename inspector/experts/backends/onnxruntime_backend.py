"""ONNX Runtime: each loaded expert is an InferenceSession over its exported, checked model (export.py).

A session costs far more to create than a torch load (tens of ms: the graph is optimised and its kernels
chosen), so an evicted expert's session is kept in the host tier (`keep_bytes`, least recently used first out)
and a later switch to it costs nothing but the bookkeeping; new weights for an expert drop its kept sessions.
Sessions run with the executor's thread count and the CPU execution provider (CUDA's where a GPU is and the
onnxruntime-gpu wheel is installed).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..base import Architecture, Prediction, StateDict
from .base import Backend, BackendUnavailable
from .export import exported

KEEP_BYTES = 2 << 30  # sessions kept in the host tier


@dataclass
class Session:
    expert: str
    weights_sha256: str | None
    session: Any
    nbytes: int


class OnnxRuntimeBackend(Backend):
    name = "onnxruntime"

    def __init__(self, threads: int = 1, keep_bytes: int = KEEP_BYTES) -> None:
        try:
            import onnxruntime
        except ImportError:
            raise BackendUnavailable("the onnxruntime backend needs ONNX Runtime: pip install onnxruntime onnx "
                                     "(or run with --backend torch)") from None
        self.ort = onnxruntime
        self.threads, self.keep_bytes = threads, keep_bytes
        self._kept: OrderedDict[tuple[str, str | None], Session] = OrderedDict()
        self._lock = threading.Lock()
        self.exports = 0  # models exported (and checked) by this process
        self.created = 0  # sessions created
        self.reused = 0  # switches served by a kept session

    def session(self, model: bytes | str) -> Any:
        so = self.ort.SessionOptions()
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = self.ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = 3
        providers = [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider")
                     if p in self.ort.get_available_providers()]
        return self.ort.InferenceSession(model, so, providers=providers)

    def cached(self, expert: str, weights_sha256: str | None, device: torch.device) -> Any | None:
        with self._lock:
            kept = self._kept.pop((expert, weights_sha256), None)
        if kept is not None:
            self.reused += 1
        return kept

    def load(self, arch: Architecture, expert: str, weights_sha256: str | None, state: StateDict,
             device: torch.device, home: Path | None = None) -> Any:
        if home is None:
            raise BackendUnavailable(f"{expert}: the runtime backend needs the zoo's folder for its exported models")
        made = exported(arch, expert, weights_sha256, state, home, self.session)
        self.exports += made.made
        session = self.session(str(made.path))
        self.created += 1
        return Session(expert, weights_sha256, session, made.path.stat().st_size)

    def run(self, arch: Architecture, loaded: Any, batch: torch.Tensor) -> list[Prediction]:
        x = np.ascontiguousarray(batch.detach().cpu().numpy(), dtype=np.float32)
        raw = loaded.session.run(None, {"images": x})[0]
        return arch.decode(torch.from_numpy(np.asarray(raw)))

    def retire(self, arch: Architecture, loaded: Any, device: torch.device) -> None:
        with self._lock:
            self._kept[(loaded.expert, loaded.weights_sha256)] = loaded
            self._kept.move_to_end((loaded.expert, loaded.weights_sha256))
            while sum(s.nbytes for s in self._kept.values()) > self.keep_bytes and self._kept:
                self._kept.popitem(last=False)

    def forget(self, expert: str) -> None:
        with self._lock:
            for key in [k for k in self._kept if k[0] == expert]:
                del self._kept[key]

    def counters(self) -> dict[str, int]:
        with self._lock:
            kept = len(self._kept)
        return {"exports": self.exports, "sessions_created": self.created, "sessions_reused": self.reused,
                "sessions_kept": kept}
