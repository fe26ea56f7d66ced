"""HEOP (FIRM-MoE Algorithm 1): coordinate hill-climbing of (K, P) per layer group on a measured loss.

Each group (shallow, middle, deep) holds a configuration (K candidates per predicting layer, P predicting
layers). Every token step the group's loss alpha·unused + beta·(miss − hit) is recorded; every `n_update`
steps the group's average loss for its current configuration is judged: an improvement keeps moving the same
way, a step that did not improve goes back to the best configuration and reverses the direction, and after
`patience` steps without improvement the search switches between K and P. (The paper reverses and switches
on patience alone; stepping back to the best point is our choice, so a noisy bad step is not kept.) After
`steps` token steps the configuration with the lowest average loss is fixed. The trail is kept for the log.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class GroupSearch:
    k: int
    p: int
    k_bounds: tuple[int, int]
    p_bounds: tuple[int, int]
    direction: str = "K"
    delta: int = 1
    window: list[float] = field(default_factory=list)  # losses since the last update
    seen: dict[tuple[int, int], list[float]] = field(default_factory=dict)  # config -> its window averages
    best: tuple[int, int] | None = None
    best_loss: float = float("inf")
    stale: int = 0  # updates since the best improved

    def mean(self, config: tuple[int, int]) -> float:
        values = self.seen.get(config)
        return sum(values) / len(values) if values else float("inf")


@dataclass(frozen=True)
class TrailStep:
    step: int
    group: str
    k: int
    p: int
    loss: float  # the average loss of (k, p) over the window just judged


class HEOP:
    GROUPS = ("shallow", "middle", "deep")

    def __init__(self, start: dict[str, tuple[int, int]], k_bounds: tuple[int, int], p_bounds: tuple[int, int],
                 alpha: float = 0.5, beta: float = 0.5, n_update: int = 8, patience: int = 2, steps: int = 256,
                 seed: int = 0) -> None:
        rng = random.Random(seed)
        self.alpha, self.beta, self.n_update, self.patience, self.steps = alpha, beta, n_update, patience, steps
        self.groups = {g: GroupSearch(k, p, k_bounds, p_bounds, rng.choice(("K", "P")), rng.choice((-1, 1)))
                       for g, (k, p) in start.items()}
        self.t = 0
        self.done = steps <= 0
        self.trail: list[TrailStep] = []

    def config(self, group: str) -> tuple[int, int]:
        g = self.groups[group]
        return g.k, g.p

    def loss(self, unused: int, miss: int, hit: int) -> float:
        """Eq. 11: unused prefetches penalised by alpha, misses net of cache hits by beta."""
        return self.alpha * unused + self.beta * (miss - hit)

    def record(self, group: str, unused: int, miss: int, hit: int) -> None:
        if not self.done:
            self.groups[group].window.append(self.loss(unused, miss, hit))

    def record_loss(self, group: str, loss: float) -> None:
        if not self.done:
            self.groups[group].window.append(loss)

    def tick(self) -> None:
        """One token step has passed."""
        if self.done:
            return
        self.t += 1
        if self.t % self.n_update == 0:
            for name, g in self.groups.items():
                self._update(name, g)
        if self.t >= self.steps:
            for g in self.groups.values():
                if g.seen:
                    g.k, g.p = min(g.seen, key=g.mean)
            self.done = True

    def _update(self, name: str, g: GroupSearch) -> None:
        if not g.window:
            return
        here = (g.k, g.p)
        avg = sum(g.window) / len(g.window)
        g.window.clear()
        g.seen.setdefault(here, []).append(avg)
        self.trail.append(TrailStep(self.t, name, g.k, g.p, avg))
        if avg < g.best_loss:
            g.best, g.best_loss, g.stale = here, avg, 0
        else:
            g.stale += 1
            g.k, g.p = g.best or here  # step back to the best point, and try the other way
            g.delta = -g.delta
            if g.stale >= self.patience:
                g.direction = "P" if g.direction == "K" else "K"
                g.stale = 0
        self._move(g)

    @staticmethod
    def _move(g: GroupSearch) -> None:
        for _ in range(2):  # at a bound, the other way
            if g.direction == "K":
                nk = g.k + g.delta
                if g.k_bounds[0] <= nk <= g.k_bounds[1]:
                    g.k = nk
                    return
            else:
                np_ = g.p + g.delta
                if g.p_bounds[0] <= np_ <= g.p_bounds[1]:
                    g.p = np_
                    return
            g.delta = -g.delta

    @staticmethod
    def group_of(index: int, layers: int) -> str:
        """Shallow, middle or deep: the model's MoE layers in thirds."""
        third = max(1, layers // 3)
        if index < third:
            return "shallow"
        if index >= layers - third:
            return "deep"
        return "middle"
