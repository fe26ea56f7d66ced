"""The torch backend: the module itself, its tensors assigned into a reused shell (base.Architecture)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..base import Architecture, Prediction, StateDict
from .base import Backend


class TorchBackend(Backend):
    name = "torch"

    def load(self, arch: Architecture, expert: str, weights_sha256: str | None, state: StateDict,
             device: torch.device, home: Path | None = None) -> Any:
        return arch.materialize(state, device)

    def run(self, arch: Architecture, loaded: Any, batch: torch.Tensor) -> list[Prediction]:
        return arch.run(loaded, batch)

    def retire(self, arch: Architecture, loaded: Any, device: torch.device) -> None:
        arch.retire(loaded, device)
