"""The backend interface: load an expert from its weights, run a preprocessed batch, let it go."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..base import Architecture, Prediction, StateDict


class BackendUnavailable(RuntimeError):
    """The backend's runtime is missing or refuses this expert; the message says what to do."""


@dataclass(frozen=True)
class Weights:
    """An expert's weights as the engine's tiered store serves them, fetched only when a backend reads them.

    torch always reads them (the module is built from them); a runtime reads its own model file and fetches the
    weights only to make that file. `fetch` returns the state and the tier it came from (disk, host).
    `drop_cache`: reads of the backend's own files leave no pages behind, so a "disk" switch is one (the store's
    rule for weights).
    """

    fetch: Callable[[], tuple[StateDict, str]]
    drop_cache: bool = True
    # preprocessed crops like the ones this expert will see (N x 3 x S x S): what an INT8 runtime calibrates its
    # activation ranges on and checks its verdicts against; None where the caller has none
    calibration: Callable[[], torch.Tensor] | None = None
    # the pool's own memory for a read this backend makes itself (ONNX Runtime's shared-graph weights): an aligned
    # slot of at least the bytes asked, or None (then memory of its own); None where the pool has no such memory
    slot: Callable[[int], memoryview | None] | None = None

    @classmethod
    def of_file(cls, path: Path, drop_cache: bool = True,
                calibration: Callable[[], torch.Tensor] | None = None) -> Weights:
        """An expert's weights straight from its safetensors file (outside the engine: zoo builds, profiles)."""
        def fetch() -> tuple[StateDict, str]:
            from safetensors.torch import load_file

            return load_file(str(path)), "disk"

        return cls(fetch, drop_cache, calibration=calibration)


class Backend(ABC):
    name: str = ""

    def versions(self) -> dict[str, str]:
        """What a profile of this backend depends on beyond the device (its runtime's version)."""
        return {}

    def runs_on(self, device: torch.device) -> bool:
        """Whether this backend can serve a pool on `device` (a runtime without its GPU provider cannot)."""
        return True

    def cached(self, expert: str, weights_sha256: str | None, device: torch.device) -> Any | None:
        """A loaded expert kept from an earlier load (a runtime session in the host tier), or None."""
        return None

    def torch_threads(self, threads: int) -> int:
        """The torch threads an executor of `threads` threads gives torch: all of them where torch runs the experts.
        A runtime that runs them itself overrides this with 1 (RuntimeBackend)."""
        return threads

    def prepare(self, arch: Architecture, expert: str, weights_sha256: str | None, weights: Weights,  # noqa: B027
                home: Path) -> None:
        """Ahead of serving: make whatever files a load will read (a runtime's exported model), so no switch pays it."""

    def resident_bytes(self, arch: Architecture, expert: str, weights_sha256: str | None, weights: Weights,
                       home: Path, batch: int) -> int:
        """What one loaded expert holds in memory, measured, where that is not its weights (0: its weights)."""
        return 0

    @abstractmethod
    def load(self, arch: Architecture, expert: str, weights_sha256: str | None, weights: Weights,
             device: torch.device, home: Path | None = None) -> tuple[Any, str]:
        """A runnable expert and the tier its load read from (`home`: where runtime files of this zoo live)."""

    @abstractmethod
    def run(self, arch: Architecture, loaded: Any, batch: torch.Tensor) -> list[Prediction]:
        """Predictions for a preprocessed batch."""

    def in_pool_memory(self, loaded: Any) -> bool:
        """Whether `loaded` still reads the memory its load was given (the store's slot, or `Weights.slot`): then the
        slot stays taken until the expert is evicted; else it is free again as soon as the load returns."""
        return False

    def retire(self, arch: Architecture, loaded: Any, device: torch.device) -> None:  # noqa: B027 - optional
        """An evicted expert: free it (the default: left to the collector) or keep it for a later load."""

    def forget(self, expert: str) -> None:  # noqa: B027 - optional
        """New weights for `expert`: drop whatever was kept of the old ones (the default keeps nothing)."""

    def keep(self, nbytes: int) -> None:  # noqa: B027 - optional
        """The host memory this backend may keep evicted experts in (the engine's host tier; 0: keep none)."""


class RuntimeBackend(Backend):
    """A backend whose experts run in a runtime of their own (ONNX Runtime, OpenVINO), on the executor's threads.

    Torch only prepares the crops and reads out the predictions there, on one thread: given the executor's two, its
    OpenMP workers spin after each torch call while the runtime's own pool wants the same cores. Measured on the
    2-core box (samba, one executor of 2 threads, ONNX Runtime, default workload): detector batches of 2 took 40 ms
    with two torch threads and 15 ms with one (results/bench-cpu.md)."""

    def torch_threads(self, threads: int) -> int:
        return 1

    def versions(self) -> dict[str, str]:
        """Torch's threads beside the runtime are part of what a profile timed: a profile without this key was timed
        with the executor's threads given to torch as well, and is measured again."""
        return {"torch_threads": "1 beside the runtime"}
