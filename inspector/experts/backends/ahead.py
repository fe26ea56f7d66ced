"""Every expert of a zoo made ready for a backend ahead of serving (a runtime's exported, checked model files), so
no switch on the line or in a benchmark pays an export."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..zoo import Zoo
from .base import Backend, Weights


@dataclass
class Ahead:
    made: int = 0  # files made now (the rest were there and intact)
    seconds: float = 0.0
    refused: dict[str, str] = field(default_factory=dict)  # expert -> why the runtime will not serve it
    in_fp32: dict[str, str] = field(default_factory=dict)  # an INT8 runtime's experts kept in fp32, and why
    own_graph: dict[str, str] = field(default_factory=dict)  # experts a shared graph refused (own sessions), why


def prepare_zoo(zoo: Zoo, backend: Backend, say: Callable[[str], None] | None = None,
                calibration: Callable[[str], torch.Tensor | None] | None = None) -> Ahead:
    """`backend.prepare` for every expert that can be built; a refused one is named (its requests fail with it).
    `calibration(expert)`: preprocessed crops like the ones it serves (an INT8 runtime calibrates on them)."""
    before = getattr(backend, "exports", 0)
    out, t0 = Ahead(), time.perf_counter()
    for name, entry in zoo.entries.items():
        if name in zoo.unavailable or not zoo.path_of(name).is_file():
            continue
        try:
            crops = None if calibration is None else (lambda n=name: calibration(n))
            backend.prepare(zoo.architecture(name), name, entry.weights_sha256,
                            Weights.of_file(zoo.path_of(name), calibration=crops),
                            zoo.root / "runtime")
        except (RuntimeError, OSError, ValueError) as exc:
            out.refused[name] = str(exc)
            if say:
                say(f"warning: {name} not ready for --backend {backend.name}: {exc}")
    out.made, out.seconds = getattr(backend, "exports", 0) - before, time.perf_counter() - t0
    out.in_fp32 = dict(getattr(backend, "in_fp32", {}))
    out.own_graph = dict(getattr(backend, "own_graph", {}))
    for kept, what in ((out.in_fp32, "stay in fp32"), (out.own_graph, "run sessions of their own")):
        if say and kept:
            say(f"{len(kept)} of {len(zoo.entries)} experts {what} on {backend.name}: "
                + "; ".join(sorted(kept.values())[:4]) + (" ..." if len(kept) > 4 else ""))
    return out
