"""OpenVINO (Intel CPUs): each loaded expert is a compiled model, compiled through OpenVINO's own model cache.

The model is the same checked ONNX export as ONNX Runtime's (export.py), but checked again through OpenVINO
itself against torch, in a folder of its own (`runtime/openvino/`), since a check holds for the runtime that ran
it. Compiling a model costs tens of ms; it is done once, ahead of serving, into the expert's own cache folder
(`cache/<model>.<tag>/`, tagged with OpenVINO's version and the CPU's features), with a note of the cached blob's
sha256, and a switch compiles through that cache (OpenVINO reads the model and the blob it made, both with their
pages dropped first: a switch from disk is one). Measured against importing a blob exported from a compiled model
(the way before): 24-25 against 39-40 ms a switch from disk, the first batch after it no slower.
A compiled model runs in f32 with the executor's thread count, one stream, threads not pinned (the executors are
threads of this process); every run takes a fresh infer request, so executors can share one compiled expert.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...runtime.diskio import drop_pages, write_atomically
from ..base import Architecture, Prediction
from .base import BackendUnavailable, RuntimeBackend, Weights
from .export import exported, file_sha256, verified_sha256
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


class OpenVinoBackend(RuntimeBackend):
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
        return {**super().versions(), "openvino": self.ov.__version__, "switch": "model cache"}

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
                   home: Path) -> tuple[Path, Path]:
        """(the checked ONNX file, its cache folder) a switch compiles through, made now (export, check, compile
        into the cache) when missing, damaged or stale."""
        made = exported(arch, expert, weights_sha256, lambda: weights.fetch()[0], home / "openvino",
                        lambda data: _Checked(self.compiled(data)))
        self.exports += made.made
        folder = made.path.parent / "cache" / f"{made.path.stem}.{self.tag}"
        note = folder.with_name(folder.name + ".json")
        try:
            meta = json.loads(note.read_text(encoding="utf-8"))
            if meta["from_onnx_sha256"] == made.sha256 and meta["blobs"] and all(
                    verified_sha256(folder / name) == sha for name, sha in meta["blobs"].items()):
                return made.path, folder
        except (OSError, ValueError, KeyError, TypeError):
            pass  # missing, damaged or stale: compiled into a fresh folder below
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        self.through_cache(made.path, folder)
        blobs = {f.name: file_sha256(f) for f in folder.iterdir() if f.is_file()}
        if not blobs:
            raise BackendUnavailable(f"{expert}: OpenVINO wrote no model cache into {folder}; check the folder is "
                                     "writable, or run with --backend onnxruntime")
        write_atomically(note, json.dumps({"from": made.path.name, "from_onnx_sha256": made.sha256, "tag": self.tag,
                                           "blobs": blobs}).encode())
        self.exports += 1
        return made.path, folder

    def through_cache(self, onnx: Path, folder: Path) -> Any:
        """The model compiled through its cache folder (compiled and cached there when the folder has none)."""
        return self.core.compile_model(str(onnx), "CPU", {**self.config, "CACHE_DIR": str(folder)})

    def prepare(self, arch: Architecture, expert: str, weights_sha256: str | None, weights: Weights,
                home: Path) -> None:
        self.model_file(arch, expert, weights_sha256, weights, home)

    def resident_bytes(self, arch: Architecture, expert: str, weights_sha256: str | None, weights: Weights,
                       home: Path, batch: int) -> int:
        """What one compiled model of `expert` holds once it ran `batch` crops, measured in a fresh process."""
        onnx, folder = self.model_file(arch, expert, weights_sha256, weights, home)
        held = measured_in_fresh_process(__name__, [str(onnx), str(folder), str(self.threads), str(arch.input_size),
                                                    str(batch)], f"a compiled model of {expert}")
        return max(held, sum(f.stat().st_size for f in folder.iterdir()))

    def load(self, arch: Architecture, expert: str, weights_sha256: str | None, weights: Weights,
             device: torch.device, home: Path | None = None) -> tuple[Any, str]:
        if not self.runs_on(device):
            raise BackendUnavailable(f"{expert}: the openvino backend serves CPU pools only; run with --backend torch")
        if home is None:
            raise BackendUnavailable(f"{expert}: the runtime backend needs the zoo's folder for its exported models")
        onnx, folder = self.model_file(arch, expert, weights_sha256, weights, home)
        blobs = list(folder.iterdir())
        if weights.drop_cache:  # OpenVINO reads both itself: from the disk, as a switch from disk does
            for f in (onnx, *blobs):
                drop_pages(f)
        model = self.through_cache(onnx, folder)
        if weights.drop_cache:
            for f in (onnx, *blobs):
                drop_pages(f)
        self.created += 1
        return Compiled(expert, weights_sha256, model, sum(f.stat().st_size for f in blobs)), "disk"

    def run(self, arch: Architecture, loaded: Any, batch: torch.Tensor) -> list[Prediction]:
        x = np.ascontiguousarray(batch.detach().cpu().numpy(), dtype=np.float32)
        request = loaded.model.create_infer_request()
        request.infer({0: x})
        return arch.decode(torch.from_numpy(request.get_output_tensor(0).data.copy()))

    def counters(self) -> dict[str, int]:
        return {"exports": self.exports, "models_compiled": self.created}


def compiled_bytes(onnx: Path, folder: Path, threads: int, input_size: int, batch: int) -> int:
    """Resident bytes one more model compiled through its cache adds after running `batch` crops (footprint.py)."""
    backend = OpenVinoBackend(threads=threads)
    x = np.random.default_rng(0).random((batch, 3, input_size, input_size), dtype=np.float32)

    def run(model: Any) -> None:
        model.create_infer_request().infer({0: x})

    return marginal_rss(lambda: backend.through_cache(onnx, folder), run)


if __name__ == "__main__":  # python -m ...openvino_backend ONNX CACHE_FOLDER THREADS INPUT_SIZE BATCH
    import sys

    a = sys.argv[1:]
    print(compiled_bytes(Path(a[0]), Path(a[1]), int(a[2]), int(a[3]), int(a[4])))
