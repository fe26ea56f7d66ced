"""Every expert of a zoo made ready for a backend ahead of serving (a runtime's exported, checked model files), so
no switch on the line or in a benchmark pays an export."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..zoo import Zoo
from .base import Backend, Weights


@dataclass
class Ahead:
    made: int = 0  # files made now (the rest were there and intact)
    seconds: float = 0.0
    refused: dict[str, str] = field(default_factory=dict)  # expert -> why the runtime will not serve it


def prepare_zoo(zoo: Zoo, backend: Backend, say: Callable[[str], None] | None = None) -> Ahead:
    """`backend.prepare` for every expert that can be built; a refused one is named (its requests fail with it)."""
    from safetensors.torch import load_file

    before = getattr(backend, "exports", 0)
    out, t0 = Ahead(), time.perf_counter()
    for name, entry in zoo.entries.items():
        if name in zoo.unavailable or not zoo.path_of(name).is_file():
            continue
        try:
            backend.prepare(zoo.architecture(name), name, entry.weights_sha256,
                            Weights(lambda n=name: (load_file(str(zoo.path_of(n))), "disk")), zoo.root / "runtime")
        except (RuntimeError, OSError, ValueError) as exc:
            out.refused[name] = str(exc)
            if say:
                say(f"warning: {name} not ready for --backend {backend.name}: {exc}")
    out.made, out.seconds = getattr(backend, "exports", 0) - before, time.perf_counter() - t0
    return out
