"""OpenVINO (Intel CPUs): each loaded expert is a compiled model, imported from a pre-compiled blob.

The model is the same checked ONNX export as ONNX Runtime's (export.py), but checked again through OpenVINO
itself against torch, in a folder of its own (`runtime/openvino/`), since a check holds for the runtime that ran
it. Compiling a model costs tens of ms; it is done once, at export, and the compiled blob (`export_model`, tagged
with OpenVINO's version and the CPU's features) is what a switch reads and imports, the runtime's own model cache
made explicit so that the engine reads it as it reads everything else (pages dropped: a switch from disk is one).
A compiled model runs in f32 with the executor's thread count, one stream, threads not pinned (the executors are
threads of this process); every run takes a fresh infer request, so executors can share one compiled expert.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...runtime.diskio import read_bytes
from ..base import Architecture, Prediction
from .base import Backend, BackendUnavailable, Weights
from .export import derived, exported
from .footprint import marginal_rss, measured_in_fresh_process
from .onnxruntime_backend import cpu_tag


@dataclass
class Compiled:
    expert: str
    weights_sha256: str | None
    model: Any
    nbytes: int


class _Checked:
    """An exported model run through OpenVINO with ONNX Runtime's `run(None, feeds)` shape, for export's check."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def run(self, _outputs: None, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        request = self.model.create_infer_request()
        request.infer({0: feeds["images"]})
        return [request.get_output_tensor(0).data.copy()]


class OpenVinoBackend(Backend):
    name = "openvino"

    def __init__(self, threads: int = 1) -> None:
        try:
            import openvino
        except ImportError:
            raise BackendUnavailable("the openvino backend needs OpenVINO: pip install 'inspector[openvino]' "
                                     "(or run with --backend onnxruntime or torch)") from None
        self.ov = openvino
        self.core = openvino.Core()
        self.threads = threads
        self.exports = 0
        self.created = 0

    @property
    def tag(self) -> str:
        return f"ov{self.ov.__version__.split('-')[0]}-{cpu_tag()}"

    def versions(self) -> dict[str, str]:
        return {"openvino": self.ov.__version__}

    def runs_on(self, device: torch.device) -> bool:
        return device.type == "cpu"

    @property
    def config(self) -> dict[str, Any]:
        # f32 throughout: on CPUs with bf16 units OpenVINO would otherwise compute in bf16 (verdicts must not move)
        return {"INFERENCE_NUM_THREADS": self.threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY",
                "ENABLE_CPU_PINNING": False, "INFERENCE_PRECISION_HINT": "f32"}

    def compiled(self, model: bytes | str) -> Any:
        """A compiled model from an ONNX file or ONNX bytes."""
        if isinstance(model, bytes):
            model = self.core.read_model(model)
        return self.core.compile_model(model, "CPU", self.config)

    def model_file(self, arch: Architecture, expert: str, weights_sha256: str | None, weights: Weights,
                   home: Path) -> Path:
        """The pre-compiled blob a switch imports, made now (export, check, compile) when missing or damaged."""
        made = exported(arch, expert, weights_sha256, lambda: weights.fetch()[0], home / "openvino",
                        lambda data: _Checked(self.compiled(data)))
        self.exports += made.made

        def compile_blob() -> bytes:
            blob = self.compiled(str(made.path)).export_model()
            return blob.getvalue() if hasattr(blob, "getvalue") else bytes(blob)

        return derived(made.path.with_name(f"{made.path.stem}.{self.tag}.blob"), made, self.tag, compile_blob).path

    def prepare(self, arch: Architecture, expert: str, weights_sha256: str | None, weights: Weights,
                home: Path) -> None:
        self.model_file(arch, expert, weights_sha256, weights, home)

    def resident_bytes(self, arch: Architecture, expert: str, weights_sha256: str | None, weights: Weights,
                       home: Path, batch: int) -> int:
        """What one imported model of `expert` holds once it ran `batch` crops, measured in a fresh process."""
        path = self.model_file(arch, expert, weights_sha256, weights, home)
        held = measured_in_fresh_process(__name__, [str(path), str(self.threads), str(arch.input_size), str(batch)],
                                         f"a compiled model of {expert}")
        return max(held, path.stat().st_size)

    def load(self, arch: Architecture, expert: str, weights_sha256: str | None, weights: Weights,
             device: torch.device, home: Path | None = None) -> tuple[Any, str]:
        if not self.runs_on(device):
            raise BackendUnavailable(f"{expert}: the openvino backend serves CPU pools only; run with --backend torch")
        if home is None:
            raise BackendUnavailable(f"{expert}: the runtime backend needs the zoo's folder for its exported models")
        path = self.model_file(arch, expert, weights_sha256, weights, home)
        blob = read_bytes(path, drop_cache=weights.drop_cache)
        model = self.core.import_model(blob, "CPU", self.config)
        self.created += 1
        return Compiled(expert, weights_sha256, model, len(blob)), "disk"

    def run(self, arch: Architecture, loaded: Any, batch: torch.Tensor) -> list[Prediction]:
        x = np.ascontiguousarray(batch.detach().cpu().numpy(), dtype=np.float32)
        request = loaded.model.create_infer_request()
        request.infer({0: x})
        return arch.decode(torch.from_numpy(request.get_output_tensor(0).data.copy()))

    def counters(self) -> dict[str, int]:
        return {"exports": self.exports, "models_imported": self.created}


def compiled_bytes(path: Path, threads: int, input_size: int, batch: int) -> int:
    """Resident bytes one more imported model of `path` adds after running `batch` crops (footprint.py)."""
    backend = OpenVinoBackend(threads=threads)
    x = np.random.default_rng(0).random((batch, 3, input_size, input_size), dtype=np.float32)

    def run(model: Any) -> None:
        model.create_infer_request().infer({0: x})

    return marginal_rss(lambda: backend.core.import_model(read_bytes(path, drop_cache=False), "CPU", backend.config),
                        run)


if __name__ == "__main__":  # python -m ...openvino_backend PATH THREADS INPUT_SIZE BATCH
    import sys

    a = sys.argv[1:]
    print(compiled_bytes(Path(a[0]), int(a[1]), int(a[2]), int(a[3])))
