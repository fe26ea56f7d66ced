"""Backends: what runs a loaded expert. The engine asks a backend to load, run and retire an expert and never
knows which one it is: `torch` (the reference, every device), `onnxruntime` (exported models in ONNX Runtime
sessions) or `openvino` (the same exports compiled by OpenVINO, for Intel CPUs; an extra). This package's top
imports nothing heavy, so the command line can offer the names in a blink."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Backend

BACKENDS = ("torch", "onnxruntime", "openvino")


def get_backend(name: str, threads: int = 1) -> Backend:
    """A backend by name; BackendUnavailable (with the pip line) when its runtime is not installed."""
    if name == "torch":
        from .torch_backend import TorchBackend

        return TorchBackend()
    if name == "onnxruntime":
        from .onnxruntime_backend import OnnxRuntimeBackend

        return OnnxRuntimeBackend(threads=threads)
    if name == "openvino":
        from .openvino_backend import OpenVinoBackend

        return OpenVinoBackend(threads=threads)
    raise ValueError(f"unknown backend {name!r}; use one of {', '.join(BACKENDS)}")
