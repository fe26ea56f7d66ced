"""Requests, routes and results that cross the engine's boundary."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: a rule set's routes are read without loading torch (components.py)
    import torch

    from ...experts.base import Prediction


@dataclass(frozen=True)
class Route:
    """The ordered experts a component's image passes through.

    The first is the component's classifier; a next step runs only when the
    previous one passed the part (the classifier found no defect).
    """

    experts: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.experts:
            raise ValueError("a route needs at least one expert")


@dataclass
class Request:
    """One step of one component's route, as the scheduler sees it.

    A follow-up keeps the request id and advances `step`; it is scheduled
    like any new request.
    """

    id: int
    component: str
    route: Route
    image: torch.Tensor
    arrival: float
    step: int = 0
    predicted_s: float = 0.0  # added latency the scheduler predicted for it (bookkeeping)

    @property
    def expert(self) -> str:
        return self.route.experts[self.step]

    def follow_up(self) -> Request | None:
        if self.step + 1 >= len(self.route.experts):
            return None
        return Request(self.id, self.component, self.route, self.image, self.arrival, self.step + 1)


@dataclass
class RequestResult:
    """The verdict on one component image: every step's prediction, or why it failed."""

    id: int
    component: str
    steps: list[tuple[str, Prediction]] = field(default_factory=list)
    error: str | None = None
    finished: float = 0.0
    arrival: float = 0.0

    @property
    def verdict(self) -> str:
        if self.error is not None:
            return "error"
        return "pass" if self.steps and all(p.passed for _, p in self.steps) else "fail"

    @property
    def latency(self) -> float:
        return self.finished - self.arrival
