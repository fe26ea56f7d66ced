"""Backends: what runs a loaded expert. The engine asks a backend to load, run and retire an expert and never
knows which one it is: `torch` (the reference, every device), `onnxruntime` (exported models in ONNX Runtime; on
the CPU one shared graph an architecture, its experts' weights its inputs; `onnxruntime-int8` their static INT8
quantisation, calibrated and checked per expert, in sessions of their own) or `openvino` (the same exports compiled
by OpenVINO, for Intel CPUs; an extra). `auto` (the line's default) is ONNX Runtime on a CPU-only box. This
package's top imports nothing heavy, so the command line can offer the names in a blink."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Backend

BACKENDS = ("torch", "onnxruntime", "onnxruntime-int8", "openvino")
AUTO = "auto"


def resolve(name: str) -> str:
    """A backend's name, `auto` resolved for this box: ONNX Runtime on a CPU-only box where it is installed (its
    experts give torch's verdicts, measured part by part, and run faster on the CPU), torch where a GPU is (this
    runtime's CPU build has no GPU provider) or ONNX Runtime is missing."""
    if name != AUTO:
        return name
    import importlib.util

    import torch

    if torch.cuda.is_available() or importlib.util.find_spec("onnxruntime") is None:
        return "torch"
    return "onnxruntime"


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
