"""The kinds of part a board carries and the detectors they share: what a workload and a rule set both describe.

Torch-free, so a rule set is read (and a bad one refused) without loading the engine's expert code.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .request import Route


@dataclass(frozen=True)
class ComponentType:
    name: str
    count: int  # parts of this type per board
    detector: str | None
    pass_rate: float

    @property
    def classifier(self) -> str:
        return f"cls-{self.name}"

    @property
    def route(self) -> Route:
        return Route((self.classifier, self.detector) if self.detector else (self.classifier,))


@dataclass(frozen=True)
class DetectorSpec:
    name: str
    spec: dict[str, Any]
