"""The backend interface: load an expert from its weights, run a preprocessed batch, let it go."""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import torch

from ..base import Architecture, Prediction, StateDict


class BackendUnavailable(RuntimeError):
    """The backend's runtime is missing or refuses this expert; the message says what to do."""


class Backend(ABC):
    name: str = ""

    def cached(self, expert: str, weights_sha256: str | None, device: torch.device) -> Any | None:
        """A loaded expert kept from an earlier load (a runtime session in the host tier), or None."""
        return None

    @abstractmethod
    def load(self, arch: Architecture, expert: str, weights_sha256: str | None, state: StateDict,
             device: torch.device, home: Path | None = None) -> Any:
        """A runnable expert from its weights (`home`: where runtime files of this zoo live)."""

    @abstractmethod
    def run(self, arch: Architecture, loaded: Any, batch: torch.Tensor) -> list[Prediction]:
        """Predictions for a preprocessed batch."""

    def retire(self, arch: Architecture, loaded: Any, device: torch.device) -> None:  # noqa: B027 - optional
        """An evicted expert: free it (the default: left to the collector) or keep it for a later load."""

    def forget(self, expert: str) -> None:  # noqa: B027 - optional
        """New weights for `expert`: drop whatever was kept of the old ones (the default keeps nothing)."""
