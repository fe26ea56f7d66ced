"""The torch backend: the module itself, its tensors assigned into a reused shell (base.Architecture)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..base import Architecture, Prediction
from .base import Backend, Weights


class TorchBackend(Backend):
    name = "torch"

    def versions(self) -> dict[str, str]:
        return {}  # the device fingerprint already names torch's version

    def load(self, arch: Architecture, expert: str, weights_sha256: str | None, weights: Weights,
             device: torch.device, home: Path | None = None) -> tuple[Any, str]:
        state, tier = weights.fetch()
        return arch.materialize(state, device), tier

    def run(self, arch: Architecture, loaded: Any, batch: torch.Tensor) -> list[Prediction]:
        return arch.run(loaded, batch)

    def in_pool_memory(self, loaded: Any) -> bool:
        return True  # the module's tensors are the fetched state's, read into the pool's slot

    def retire(self, arch: Architecture, loaded: Any, device: torch.device) -> None:
        arch.retire(loaded, device)
