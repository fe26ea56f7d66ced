"""ONNX Runtime: each loaded expert runs its exported, checked model (export.py).

On the CPU (fp32) an expert's weights are the inputs of a graph its architecture shares (shared_graph.py): a switch
reads its weights, as a torch load does. Otherwise (INT8, whose kernels need weights fixed at creation; the CUDA
provider; `shared_graph=False`; an expert the split does not reproduce) each loaded expert is an InferenceSession of
its own. Its creation costs far more than a torch load (the graph is optimised and its kernels chosen), so the
work is moved out of that switch where the runtime allows, each way measured by the profiler:
- the model is optimised once, at export, into a pre-optimised ORT-format file (`<model>.<tag>.ort`, tagged with
  the runtime's version and the CPU's features, since a layout-optimised graph is only valid where it was made);
  a switch reads it and creates the session with no optimisation pass (about half the creation time);
- sessions are created from the file's path, not from bytes (given bytes, a session keeps a copy of them: twice
  the weights resident) and run without a memory arena of their own (an arena keeps the largest batch's
  activations for as long as the session lives, i.e. for every resident expert); the executors' batch memory is
  where activations belong. A session then holds about its weights (the profiler measures it);
- an evicted expert's session may be kept in the host tier (`keep`, the engine's host budget; least recently used
  out), and a switch back to it costs nothing but the bookkeeping.
Sessions run with the executor's thread count and the CPU execution provider (CUDA's where a GPU is and the
onnxruntime-gpu wheel is installed; there the plain model is loaded and optimised for CUDA at creation).
"""
from __future__ import annotations

import hashlib
import platform
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...runtime.diskio import drop_pages, scratch_beside
from ..base import Architecture, Prediction
from .base import BackendUnavailable, RuntimeBackend, Weights
from .export import Exported, derived, exported
from .footprint import marginal_rss, measured_in_fresh_process
from .int8 import quantised
from .shared_graph import SharedFiles, SharedWeights, Shells, read_weights, shared_files


@dataclass
class Session:
    expert: str
    weights_sha256: str | None
    session: Any
    nbytes: int


@lru_cache(maxsize=1)
def cpu_tag() -> str:
    """The CPU's architecture and instruction-set features, short: what a layout-optimised graph depends on."""
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(("flags", "Features")):
                flags = " ".join(sorted(line.split(":", 1)[1].split()))
                break
    except OSError:
        flags = platform.processor()
    return f"{platform.machine()}-{hashlib.sha256(flags.encode()).hexdigest()[:8]}"


class OnnxRuntimeBackend(RuntimeBackend):
    name = "onnxruntime"

    def __init__(self, threads: int = 1, keep_bytes: int = 0, preoptimised: bool = True, arena: bool = False,
                 precision: str = "fp32", shared_graph: bool = True) -> None:
        if precision not in ("fp32", "int8"):
            raise ValueError(f"precision {precision!r}: fp32 or int8")
        self.precision = precision
        self.name = "onnxruntime" if precision == "fp32" else "onnxruntime-int8"
        try:
            import onnxruntime
        except ImportError:
            raise BackendUnavailable("the onnxruntime backend needs ONNX Runtime: pip install onnxruntime onnx "
                                     "(or run with --backend torch)") from None
        self.ort = onnxruntime
        self.threads, self.keep_bytes = threads, keep_bytes
        self.preoptimised, self.arena = preoptimised, arena
        self.shared_graph = shared_graph and precision == "fp32"  # INT8's kernels prepack weights fixed at creation
        self.shells = Shells(lambda graph: self.session(graph, optimise=False))
        self.own_graph: dict[str, str] = {}  # experts a shared graph refused, served by sessions of their own; why
        self.has_cuda = "CUDAExecutionProvider" in onnxruntime.get_available_providers()
        self._kept: OrderedDict[tuple[str, str | None], Session] = OrderedDict()
        self._lock = threading.Lock()
        self.in_fp32: dict[str, str] = {}  # INT8 backend: experts served in fp32, and why (int8.py's check)
        self.exports = 0  # models exported (and checked) by this process
        self.created = 0  # sessions created
        self.read = 0  # switches served by reading an expert's weights for a shared graph
        self.reused = 0  # switches served by a kept session

    @property
    def tag(self) -> str:
        return f"ort{self.ort.__version__}-{cpu_tag()}"

    def versions(self) -> dict[str, str]:
        return {**super().versions(), "onnxruntime": self.ort.__version__, "cuda_provider": str(self.has_cuda),
                "preoptimised": str(self.preoptimised), "arena": str(self.arena), "precision": self.precision,
                "graph": "shared" if self.shared_graph else "own"}

    def runs_on(self, device: torch.device) -> bool:
        return device.type == "cpu" or (device.type == "cuda" and self.has_cuda)

    @staticmethod
    def providers(cuda: bool) -> list[str]:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"] if cuda else ["CPUExecutionProvider"]

    def options(self, optimise: bool = True, save_to: Path | None = None) -> Any:
        so = self.ort.SessionOptions()
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = (self.ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimise
                                       else self.ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
        so.enable_cpu_mem_arena = self.arena
        so.log_severity_level = 3
        if save_to is not None:
            so.optimized_model_filepath = str(save_to)
        return so

    def session(self, model: bytes | str, optimise: bool = True, cuda: bool = False) -> Any:
        """A session over a model (bytes or a path); `optimise=False` for a pre-optimised ORT-format file."""
        return self.ort.InferenceSession(model, self.options(optimise), providers=self.providers(cuda))

    # -- the files a switch reads ------------------------------------------------------------------
    def model_file(self, arch: Architecture, expert: str, weights_sha256: str | None, weights: Weights,
                   home: Path, cuda: bool = False) -> tuple[Path, bool]:
        """(the file a switch reads, whether it is pre-optimised), made now when missing or damaged; a CUDA session
        reads the plain model and is optimised for the GPU at creation."""
        made = self.exported(arch, expert, weights_sha256, weights, home)
        if self.precision == "int8":
            try:
                made = quantised(arch, made, weights.calibration, self.session)
                self.exports += made.made
            except BackendUnavailable as exc:  # INT8 where it holds; this expert is served in fp32 and says why
                with self._lock:
                    self.in_fp32[expert] = str(exc)
        if cuda or not self.preoptimised:
            return made.path, False

        target = made.path.with_name(f"{made.path.stem}.{self.tag}.ort")

        def optimise() -> bytes:
            # a name of its own (another process may be optimising the same model; derived() writes atomically),
            # ending .ort (the format ONNX Runtime saves in); what a killed process left there is swept
            tmp = scratch_beside(target, ".tmp.ort")
            try:
                self.ort.InferenceSession(str(made.path), self.options(True, save_to=tmp),
                                          providers=self.providers(False))
                return tmp.read_bytes()
            finally:
                tmp.unlink(missing_ok=True)

        return derived(target, made, self.tag, optimise).path, True

    def exported(self, arch: Architecture, expert: str, weights_sha256: str | None, weights: Weights,
                 home: Path) -> Exported:
        """The expert's checked ONNX export, made now when missing or damaged (only then are its weights read)."""
        made = exported(arch, expert, weights_sha256, lambda: weights.fetch()[0], home, self.session)
        self.exports += made.made
        return made

    def shared(self, arch: Architecture, expert: str, weights_sha256: str | None, weights: Weights,
               home: Path) -> SharedFiles | None:
        """The expert's weights file and its architecture's shared graph, made now when missing; None where this
        backend shares no graph or the split was refused (the reason kept in `own_graph`)."""
        if not self.shared_graph:
            return None
        made = self.exported(arch, expert, weights_sha256, weights, home)

        def optimise(src: Path, dst: Path) -> None:
            self.ort.InferenceSession(str(src), self.options(True, save_to=dst), providers=self.providers(False))

        try:
            files = shared_files(arch, made, self.tag, optimise, self.session)
        except BackendUnavailable as exc:
            with self._lock:
                self.own_graph[expert] = str(exc)
            return None
        self.exports += files.made
        return files

    def prepare(self, arch: Architecture, expert: str, weights_sha256: str | None, weights: Weights,
                home: Path) -> None:
        if self.shared(arch, expert, weights_sha256, weights, home) is None:
            self.model_file(arch, expert, weights_sha256, weights, home)

    def resident_bytes(self, arch: Architecture, expert: str, weights_sha256: str | None, weights: Weights,
                       home: Path, batch: int) -> int:
        """What one resident session of `expert` holds, measured in a fresh process (this one's heap reuses what
        earlier work freed, which would hide it); never less than its model file (on a shared graph: its weights)."""
        shared = self.shared(arch, expert, weights_sha256, weights, home)
        if shared is not None:
            held = measured_in_fresh_process(f"{__package__}.shared_weights_rss",
                                             [str(shared.graph), str(shared.weights), str(self.threads),
                                              str(arch.input_size), str(batch)], f"the weights of {expert}")
            return max(held, shared.weights.stat().st_size)
        path, optimised = self.model_file(arch, expert, weights_sha256, weights, home)
        held = measured_in_fresh_process(__name__, [str(path), "1" if optimised else "0", str(self.threads),
                                                    str(arch.input_size), str(batch)], f"a session of {expert}")
        return max(held, path.stat().st_size)

    # -- the engine's side -----------------------------------------------------------------------
    def cached(self, expert: str, weights_sha256: str | None, device: torch.device) -> Any | None:
        with self._lock:
            kept = self._kept.pop((expert, weights_sha256), None)
        if kept is not None:
            self.reused += 1
        return kept

    def load(self, arch: Architecture, expert: str, weights_sha256: str | None, weights: Weights,
             device: torch.device, home: Path | None = None) -> tuple[Any, str]:
        if home is None:
            raise BackendUnavailable(f"{expert}: the runtime backend needs the zoo's folder for its exported models")
        cuda = device.type == "cuda"
        if not self.runs_on(device):
            raise BackendUnavailable(f"{expert}: ONNX Runtime here has no CUDA execution provider (pip install "
                                     "onnxruntime-gpu), so it cannot serve a GPU pool; run with --backend torch")
        shared = None if cuda else self.shared(arch, expert, weights_sha256, weights, home)
        if shared is not None:
            pooled: list[bool] = []
            slot = weights.slot

            def into(nbytes: int) -> memoryview | None:  # the pool's memory, where it has some: remembered
                view = slot(nbytes) if slot is not None else None
                pooled.append(view is not None)
                return view

            feeds = read_weights(shared.weights, weights.drop_cache, into=into)
            self.read += 1
            return SharedWeights(expert, weights_sha256, shared.graph, feeds,
                                 sum(a.nbytes for a in feeds.values()), any(pooled)), "disk"
        path, optimised = self.model_file(arch, expert, weights_sha256, weights, home, cuda)
        if weights.drop_cache:
            drop_pages(path)  # the runtime reads the file itself: from the disk, as a switch from disk does
        session = self.session(str(path), not optimised, cuda)  # from a path: given bytes, a session keeps a copy
        if weights.drop_cache:
            drop_pages(path)
        self.created += 1
        return Session(expert, weights_sha256, session, path.stat().st_size), "disk"

    def run(self, arch: Architecture, loaded: Any, batch: torch.Tensor) -> list[Prediction]:
        x = np.ascontiguousarray(batch.detach().cpu().numpy(), dtype=np.float32)
        if isinstance(loaded, SharedWeights):
            raw = self.shells.of(loaded.graph).run(None, {**loaded.feeds, "images": x})[0]
        else:
            raw = loaded.session.run(None, {"images": x})[0]
        return arch.decode(torch.from_numpy(np.asarray(raw)))

    def keep(self, nbytes: int) -> None:
        with self._lock:
            self.keep_bytes = nbytes
            self._trim()

    def in_pool_memory(self, loaded: Any) -> bool:
        return isinstance(loaded, SharedWeights) and loaded.in_pool

    def retire(self, arch: Architecture, loaded: Any, device: torch.device) -> None:
        if self.keep_bytes <= 0 or self.in_pool_memory(loaded):
            return  # weights in the pool's memory are overwritten once their slot is freed: never kept
        with self._lock:
            self._kept[(loaded.expert, loaded.weights_sha256)] = loaded
            self._kept.move_to_end((loaded.expert, loaded.weights_sha256))
            self._trim()

    def _trim(self) -> None:
        while self._kept and sum(s.nbytes for s in self._kept.values()) > self.keep_bytes:
            self._kept.popitem(last=False)

    def forget(self, expert: str) -> None:
        with self._lock:
            for key in [k for k in self._kept if k[0] == expert]:
                del self._kept[key]

    def counters(self) -> dict[str, int]:
        with self._lock:
            kept = len(self._kept)
        return {"exports": self.exports, "sessions_created": self.created, "sessions_reused": self.reused,
                "sessions_kept": kept, "weights_read": self.read, "shared_graphs_opened": self.shells.opened,
                **({"experts_on_own_graph": len(self.own_graph)} if self.shared_graph else {}),
                **({"experts_in_fp32": len(self.in_fp32)} if self.precision == "int8" else {})}



def session_bytes(path: Path, optimised: bool, threads: int, input_size: int, batch: int) -> int:
    """Resident bytes one more live session of `path` adds after running `batch` crops (footprint.py)."""
    backend = OnnxRuntimeBackend(threads=threads)
    x = np.random.default_rng(0).random((batch, 3, input_size, input_size), dtype=np.float32)
    return marginal_rss(lambda: backend.session(str(path), optimise=not optimised),
                        lambda s: s.run(None, {"images": x}))


if __name__ == "__main__":  # python -m ...onnxruntime_backend PATH OPTIMISED THREADS INPUT_SIZE BATCH
    import sys

    a = sys.argv[1:]
    print(session_bytes(Path(a[0]), a[1] == "1", int(a[2]), int(a[3]), int(a[4])))
