"""Backends: what runs a loaded expert. The engine asks a backend to load, run and retire an expert and never
knows which one it is: `torch` (the reference, every device), `onnxruntime` (exported models in ONNX Runtime
sessions; `onnxruntime-int8` their static INT8 quantisation, calibrated and checked per expert) or `openvino` (the
same exports compiled by OpenVINO, for Intel CPUs; an extra). This package's top
imports nothing heavy, so the command line can offer the names in a blink."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Backend

BACKENDS = ("torch", "onnxruntime", "onnxruntime-int8", "openvino")


def get_backend(name: str, threads: int = 1) -> Backend:
    """A backend by name; BackendUnavailable (with the pip line) when its runtime is not installed."""
    if name == "torch":
        from .torch_backend import TorchBackend

        return TorchBackend()
    if name in ("onnxruntime", "onnxruntime-int8"):
        from .onnxruntime_backend import OnnxRuntimeBackend

        return OnnxRuntimeBackend(threads=threads, precision="int8" if name.endswith("int8") else "fp32")
    if name == "openvino":
        from .openvino_backend import OpenVinoBackend

        return OpenVinoBackend(threads=threads)
    raise ValueError(f"unknown backend {name!r}; use one of {', '.join(BACKENDS)}")
