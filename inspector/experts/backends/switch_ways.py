"""A switch on each backend, each way the runtime allows, measured from disk (pages dropped before every load) and
from the page cache: what each way of moving work out of the switch buys, on one expert of a zoo
(`inspector profile --switch-ways`).

Ways: torch reads the weights (O_DIRECT) into a reused module shell; ONNX Runtime creates a session from the plain
ONNX file (optimised at creation), from the pre-optimised ORT file, or from that file's bytes (a session then keeps
a copy), reads the expert's weights for its architecture's shared graph (what the engine does on the CPU), or takes
back a session kept in the host tier; OpenVINO compiles the ONNX file,
compiles it through its own model cache (what the engine does), or imports a blob exported from a compiled model.
"""
from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...runtime.devices import Device
from ...runtime.diskio import drop_pages, read_bytes
from ...runtime.store import TieredStore
from ..zoo import Zoo
from .base import BackendUnavailable, Weights
from .shared_graph import read_weights


@dataclass(frozen=True)
class Way:
    backend: str
    way: str
    cold_ms: float  # median of the loads, the file's pages dropped before each (a switch from disk)
    warm_ms: float  # the same with the file in the page cache (nan: the way has no file to read)
    engine: bool  # the way the engine switches


def _cold_warm(load: Callable[[], object], drop: Callable[[], None], repeats: int) -> tuple[float, float]:
    return _median_ms(load, drop, repeats), _median_ms(load, lambda: None, repeats)


def _median_ms(load: Callable[[], object], before: Callable[[], None], repeats: int) -> float:
    load()  # the first in a process pays one-off set-up
    samples = []
    for _ in range(repeats):
        before()
        t0 = time.perf_counter()
        load()
        samples.append(time.perf_counter() - t0)
    return 1000 * statistics.median(samples)


def switch_ways(zoo: Zoo, expert: str, backends: list[str], repeats: int = 7) -> list[Way]:
    """Every way of every backend in `backends` that is installed here, for `expert`."""
    from . import get_backend

    arch, entry = zoo.architecture(expert), zoo.entries[expert]
    cpu = torch.device("cpu")
    out: list[Way] = []
    if "torch" in backends:
        store = TieredStore(drop_page_cache=True)
        store.register(expert, zoo.path_of(expert), entry.weights_sha256)
        arch.keep_shells(cpu, 2)

        def torch_load() -> None:
            arch.retire(arch.materialize(store.fetch(expert, Device("cpu"))[0], cpu), cpu)

        cold = _median_ms(torch_load, lambda: None, repeats)  # the store drops the pages after every read
        store.drop_page_cache = False
        out.append(Way("torch", "weights read into a reused shell", cold, _median_ms(torch_load, lambda: None,
                                                                                    repeats), True))
    weights = Weights.of_file(zoo.path_of(expert))
    for name, ways in (("onnxruntime", _ort_ways), ("openvino", _ov_ways)):
        if name in backends:
            try:
                backend = get_backend(name)
            except BackendUnavailable:
                continue  # not installed here
            out += ways(backend, zoo, expert, weights, repeats)
    return out


def _ort_ways(backend: Any, zoo: Zoo, expert: str, weights: Weights, repeats: int) -> list[Way]:
    arch, sha, home, cpu = zoo.architecture(expert), zoo.entries[expert].weights_sha256, zoo.root / "runtime", \
        torch.device("cpu")
    ort_file, _ = backend.model_file(arch, expert, sha, weights, home)
    shared = backend.shared(arch, expert, sha, weights, home)
    plain = home / f"{expert}-{(sha or 'unversioned')[:12]}.onnx"
    out = [
        Way(backend.name, "plain ONNX, optimised at creation",
            *_cold_warm(lambda: backend.session(str(plain)), lambda: drop_pages(plain), repeats), False),
        Way(backend.name, "pre-optimised ORT file", *_cold_warm(lambda: backend.session(str(ort_file), False),
                                                               lambda: drop_pages(ort_file), repeats),
            shared is None),
        Way(backend.name, "pre-optimised, from its bytes (kept: 2x memory)",
            _median_ms(lambda: backend.session(read_bytes(ort_file), False), lambda: None, repeats),
            _median_ms(lambda: backend.session(read_bytes(ort_file, drop_cache=False), False), lambda: None,
                       repeats), False),
    ]
    if shared is not None:
        backend.shells.of(shared.graph)  # opened once a process and thread, as the engine does
        out.append(Way(backend.name, "weights read for the shared graph", *_cold_warm(
            lambda: read_weights(shared.weights, drop_cache=False), lambda: drop_pages(shared.weights), repeats),
            True))
    backend.keep(1 << 40)
    backend.retire(arch, backend.load(arch, expert, sha, weights, cpu, home)[0], cpu)

    def back() -> None:
        backend.retire(arch, backend.cached(expert, sha, cpu), cpu)

    kept = _median_ms(back, lambda: None, repeats)
    return out + [Way(backend.name, "a session kept in the host tier", kept, float("nan"), False)]


def _ov_ways(backend: Any, zoo: Zoo, expert: str, weights: Weights, repeats: int) -> list[Way]:
    arch, sha, home, cpu = zoo.architecture(expert), zoo.entries[expert].weights_sha256, zoo.root / "runtime", \
        torch.device("cpu")
    onnx, _folder = backend.model_file(arch, expert, sha, weights, home)
    warm = Weights(weights.fetch, drop_cache=False)
    with tempfile.TemporaryDirectory() as tmp:
        blob = Path(tmp) / "model.blob"
        exported = backend.compiled(str(onnx)).export_model()
        blob.write_bytes(exported.getvalue() if hasattr(exported, "getvalue") else bytes(exported))

        def imported(drop: bool) -> Any:
            return backend.core.import_model(read_bytes(blob, drop_cache=drop), "CPU", backend.config)

        return [
            Way(backend.name, "ONNX read and compiled",
                *_cold_warm(lambda: backend.compiled(str(onnx)), lambda: drop_pages(onnx), repeats), False),
            Way(backend.name, "a blob exported from a compiled model, imported",
                _median_ms(lambda: imported(True), lambda: drop_pages(blob), repeats),
                _median_ms(lambda: imported(False), lambda: None, repeats), False),
            Way(backend.name, "compiled through its model cache",
                _median_ms(lambda: backend.load(arch, expert, sha, weights, cpu, home), lambda: None, repeats),
                _median_ms(lambda: backend.load(arch, expert, sha, warm, cpu, home), lambda: None, repeats), True),
        ]


def format_ways(ways: list[Way], expert: str) -> str:
    head = f"{'backend':<14}{'way':<52}{'disk ms':>9}{'cached ms':>11}"
    lines = [f"a switch of {expert}, each way (median; disk: its file's pages dropped before each load; cached: "
             "the file in the page cache; *: the way the engine switches)", head, "-" * len(head)]
    lines += [f"{w.backend:<14}{w.way + (' *' if w.engine else ''):<52}{w.cold_ms:>9.2f}{w.warm_ms:>11.2f}"
              for w in ways]
    return "\n".join(lines)
