"""ONNX Runtime with one session per architecture: an expert's weights are the graph's inputs, so a switch reads
its weights (as a torch load does) instead of creating a session.

Creating a session optimises the graph, chooses kernels and reorders weights (about 45 ms for a demo classifier on
this box, against a few ms to read its weights): the switch the engine makes most. Experts of one architecture
differ only in their weights, so the checked export is optimised once, at the runtime's full level (the CPU's
blocked layout included, whose reordered weights are themselves initializers), and split in two:
- the graph with its float weights turned into inputs (`graph-<sha12>.<tag>.onnx`), the same bytes for every
  expert of that architecture, so the zoo holds it once and each executor thread opens one session of it;
- the expert's weights as the optimised graph holds them (`<expert>-<sha12>.<tag>.weights.safetensors`), with a
  note of their hash, the graph's, and how closely graph and weights together agreed with the checked export.
A switch is then a read of that file; what the expert holds resident is those arrays. The runtime cannot prepack
weights it is handed per run, which costs some compute (measured by the profiler like every cost); an expert the
split does not reproduce is refused here, kept in its note, and served by a session of its own.
"""
from __future__ import annotations

import hashlib
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...runtime.diskio import DIRECT_ALIGN, drop_pages, read_into, round_up, write_atomically
from ...runtime.safetensors_io import CorruptWeights, parse
from ..base import Architecture
from .base import BackendUnavailable
from .export import Exported, Refused, agreement, check_batch, derived, verified_sha256


@dataclass
class SharedWeights:
    """A loaded expert: its weights, fed to its architecture's shared graph on every run."""

    expert: str
    weights_sha256: str | None
    graph: Path
    feeds: dict[str, np.ndarray]
    nbytes: int
    in_pool: bool = False  # the feeds are views into the pool's own memory (`read_weights(into=...)`)


def split(model: bytes) -> tuple[bytes, dict[str, np.ndarray]]:
    """(the graph with its float weights as inputs, serialised; those weights by name). Small and non-float
    initializers (shapes, axes) stay in the graph: they are its structure, not an expert's weights."""
    import onnx
    from onnx import numpy_helper

    proto = onnx.load_from_string(model)
    weights: dict[str, np.ndarray] = {}
    kept = []
    for init in proto.graph.initializer:
        array = numpy_helper.to_array(init)
        if array.dtype == np.float32 and array.ndim >= 1 and array.size >= 2:
            weights[init.name] = np.ascontiguousarray(array)
            proto.graph.input.append(onnx.helper.make_tensor_value_info(init.name, init.data_type,
                                                                        list(array.shape)))
        else:
            kept.append(init)
    del proto.graph.initializer[:]
    proto.graph.initializer.extend(kept)
    for i, node in enumerate(proto.graph.node):  # the optimiser numbers the nodes it adds in an order that varies
        node.name = f"n{i}"  # between processes; a node's name changes nothing it computes, and the bytes stay one
    return proto.SerializeToString(), weights


def graph_path(home: Path, graph: bytes, tag: str) -> Path:
    return home / f"graph-{hashlib.sha256(graph).hexdigest()[:12]}.{tag}.onnx"


@dataclass(frozen=True)
class SharedFiles:
    """What a switch reads for an expert on a shared graph: its weights file, and its architecture's graph."""

    weights: Path
    graph: Path
    made: int  # files made now


def shared_files(arch: Architecture, made: Exported, tag: str,
                 optimise: Callable[[Path, Path], None], session_of: Callable[[bytes | str], Any]) -> SharedFiles:
    """The expert's weights file beside `made` (its note names the shared graph), made and checked now when missing,
    damaged or stale; `Refused` (kept in the note) where graph and weights together do not give the export's
    outputs. `optimise(src, dst)` writes the runtime's fully optimised ONNX of `src` to `dst`."""
    from safetensors.numpy import save

    home = made.path.parent

    def make() -> tuple[bytes, dict[str, Any]]:
        with tempfile.TemporaryDirectory() as tmp:
            full = Path(tmp) / "optimised.onnx"
            optimise(made.path, full)
            graph, weights = split(full.read_bytes())
        x = check_batch(arch)
        reference = torch.from_numpy(np.asarray(session_of(str(made.path)).run(None, {"images": x.numpy()})[0]))
        got = torch.from_numpy(np.asarray(session_of(graph).run(None, {**weights, "images": x.numpy()})[0]))
        diff, why = agreement(arch, reference, got)
        if why or not weights:
            raise Refused(f"{made.path.stem}: its weights as inputs of a shared graph do not give the export's "
                          f"outputs ({why or 'no weights to split out'}); it is served by a session of its own",
                          {"max_abs_diff": diff})
        path = graph_path(home, graph, tag)
        if not path.is_file() or verified_sha256(path) != hashlib.sha256(graph).hexdigest():
            write_atomically(path, graph)
        return save(weights), {"graph": path.name, "graph_sha256": hashlib.sha256(graph).hexdigest(),
                               "max_abs_diff": diff, "weights": len(weights)}

    weights_file = made.path.with_name(f"{made.path.stem}.{tag}.weights.safetensors")
    done = derived(weights_file, made, tag, make)
    graph = home / done.note["graph"]
    if not graph.is_file() or verified_sha256(graph) != done.note["graph_sha256"]:
        weights_file.with_suffix(".json").unlink(missing_ok=True)  # the shared graph is gone or damaged: again
        done = derived(weights_file, made, tag, make)
    return SharedFiles(done.path, home / done.note["graph"], int(done.made))


def read_weights(path: Path, drop_cache: bool,
                 into: Callable[[int], memoryview | None] | None = None) -> dict[str, np.ndarray]:
    """An expert's weights from its file (from the disk when `drop_cache`, as every switch from disk reads): views
    into the one buffer read (runtime/safetensors_io.py), not copies of it.

    `into` (the pool's own memory, aligned) spares the switch a fresh buffer: the page faults and zeroing of its
    first touch, and the unmapping when it is dropped, are CPU work taken from the executors (runtime/arena.py).
    Without it, or when it has no room, a buffer of its own.
    """
    if drop_cache:
        drop_pages(path)  # pages its making or another reader left behind: this read comes from the disk
    size = path.stat().st_size
    slot = into(round_up(size)) if into is not None else None
    if slot is not None:
        data = np.frombuffer(slot, dtype=np.uint8, count=round_up(size))
    else:
        raw = np.empty(round_up(size) + DIRECT_ALIGN, dtype=np.uint8)
        start = -raw.ctypes.data % DIRECT_ALIGN  # aligned, so a disk read is O_DIRECT: DMA fills it, no CPU copy
        data = raw[start:start + round_up(size)]
    data = data[:read_into(path, memoryview(data), drop_cache=drop_cache)]
    try:
        return {name: tensor.numpy() for name, tensor in parse(memoryview(data)).items()}
    except CorruptWeights as exc:
        raise BackendUnavailable(f"{path}: not a weights file this backend wrote ({exc}); delete it and its .json "
                                 "note, and the next load makes it again") from None


class Shells:
    """One session of each shared graph per executor thread: a thread's runs never queue on another's thread pool,
    and a graph's session is made once (about a millisecond) and kept for the process."""

    def __init__(self, open_graph: Callable[[str], Any]) -> None:
        self.open_graph = open_graph
        self._local = threading.local()
        self.opened = 0

    def of(self, graph: Path) -> Any:
        sessions = self._local.__dict__.setdefault("sessions", {})
        session = sessions.get(graph)
        if session is None:
            if not graph.is_file():
                raise BackendUnavailable(f"the shared graph {graph} was removed while its experts were loaded; the "
                                         "next load of one of them makes it again")
            session = sessions[graph] = self.open_graph(str(graph))
            self.opened += 1
        return session
