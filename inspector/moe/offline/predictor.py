"""DuoServe-MoE's decode predictor (§4): an MLP over the state of earlier selections, popularity and affinity.

From the calibration trace: the popularity of each expert per layer (eq. 2, normalised per layer) and the
inter-layer affinity A_{l-1,l}(i, j) = P(j selected at l | i selected at l-1) (eq. 3). The state for layer l
is [h_l, p_l, a_{l-1,l}] (eq. 5): the experts selected at every earlier layer of this token (multi-hot, zero
beyond l-1), which layer l is (one-hot), layer l's popularity, and the affinity row of each expert selected at
l-1 (averaged). The ExpertMLP maps it to a multi-label distribution over l's experts, trained with binary
cross-entropy (eq. 6). The paper's seven layers of 2048 → 64 units are sized for Mixtral's traces; ours
scale with the trace (default 256, 128, 64), with the paper's batch normalisation, ReLU and dropout 0.1.

Trained by `inspector llm train-predictor` (or on first use), cached beside its calibration.
"""
from __future__ import annotations

import hashlib
import io
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from ...runtime.diskio import write_atomically
from ..calibration import Calibration, RoutingTrace


@dataclass(frozen=True)
class PredictorRecipe:
    hidden: tuple[int, ...] = (256, 128, 64)
    epochs: int = 60
    batch: int = 128
    lr: float = 2e-3
    dropout: float = 0.1
    holdout_every: int = 5  # every 5th calibration sequence is held out to judge the predictor
    seed: int = 0

    def key(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:8]


class ExpertMLP(nn.Module):
    def __init__(self, inputs: int, experts: int, hidden: tuple[int, ...], dropout: float) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = inputs
        for h in hidden:
            layers += [nn.Linear(width, h), nn.BatchNorm1d(h), nn.ReLU(), nn.Dropout(dropout)]
            width = h
        layers.append(nn.Linear(width, experts))
        self.net = nn.Sequential(*layers)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(state)


@dataclass
class PredictorReport:
    train_samples: int
    heldout_samples: int
    accuracy: float  # held out, |S∩A|/|A| with |S| = top-k
    popularity_accuracy: float  # the popularity-only guess on the same held-out samples
    seconds: float


class ExpertPredictor:
    def __init__(self, popularity: torch.Tensor, affinity: torch.Tensor, top_k: int, mlp: ExpertMLP) -> None:
        self.popularity = popularity  # [L, E]
        self.affinity = affinity  # [L-1, E, E]
        self.layers, self.experts = popularity.shape
        self.top_k = top_k
        self.mlp = mlp.eval()

    @property
    def inputs(self) -> int:
        return self.layers * self.experts + self.layers + 2 * self.experts

    def state(self, path: list[list[int]], t: int) -> torch.Tensor:
        """The state for MoE layer index t, given the picks of layers 0..t-1 of this token."""
        return _states(path, t, self.popularity, self.affinity)

    @torch.inference_mode()
    def predict(self, path: list[list[int]], t: int) -> list[int]:
        logits = self.mlp(self.state(path, t).reshape(1, -1))[0]
        return torch.topk(logits, self.top_k).indices.tolist()

    def popularity_guess(self, t: int) -> list[int]:
        return torch.topk(self.popularity[t], self.top_k).indices.tolist()

    def save(self, path: Path, recipe: PredictorRecipe, report: PredictorReport) -> None:
        """Whole or not at all, under a temporary name of this call's own (two processes may train one at once)."""
        buf = io.BytesIO()
        torch.save({"popularity": self.popularity, "affinity": self.affinity, "top_k": self.top_k,
                    "recipe": asdict(recipe), "report": asdict(report), "mlp": self.mlp.state_dict()}, buf)
        write_atomically(path, buf.getvalue())

    @staticmethod
    def load_report(path: Path) -> PredictorReport:
        return PredictorReport(**torch.load(path, weights_only=True)["report"])

    @classmethod
    def load(cls, path: Path) -> ExpertPredictor:
        data = torch.load(path, weights_only=True)
        recipe = PredictorRecipe(**{**data["recipe"], "hidden": tuple(data["recipe"]["hidden"])})
        pop = data["popularity"]
        mlp = ExpertMLP(pop.shape[0] * pop.shape[1] + pop.shape[0] + 2 * pop.shape[1], pop.shape[1], recipe.hidden,
                        recipe.dropout)
        mlp.load_state_dict(data["mlp"])
        return cls(pop, data["affinity"], int(data["top_k"]), mlp)


def routing_statistics(trace: RoutingTrace, experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Popularity [L, E] (selections per layer, normalised) and affinity [L-1, E, E] (rows normalised)."""
    picks = trace.picks.long()  # [N, L, k]
    n, layers, _ = picks.shape
    hot = torch.zeros(n, layers, experts).scatter_(2, picks, 1.0)
    pop = hot.sum(0) + 1e-6
    pop = pop / pop.sum(1, keepdim=True)
    if layers > 1:  # co-selection counts of consecutive layers
        aff = torch.stack([hot[:, t].T @ hot[:, t + 1] for t in range(layers - 1)])
    else:
        aff = torch.zeros(0, experts, experts)
    aff = aff / aff.sum(-1, keepdim=True).clamp_min(1e-6)
    return pop, aff


def _states(path: list[list[int]], t: int, pop: torch.Tensor, aff: torch.Tensor) -> torch.Tensor:
    layers, experts = pop.shape
    h = torch.zeros(layers, experts)
    for m in range(min(t, len(path))):
        h[m, path[m]] = 1.0
    which = torch.zeros(layers)
    which[t] = 1.0
    a = aff[t - 1, path[t - 1]].mean(0) if t >= 1 and t - 1 < len(path) and path[t - 1] else torch.zeros(experts)
    return torch.cat([h.flatten(), which, pop[t], a])


def _samples(trace: RoutingTrace, steps: torch.Tensor, pop: torch.Tensor,
             aff: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    layers, experts = pop.shape
    xs, ys = [], []
    for n in steps.tolist():
        path = trace.picks[n].long().tolist()
        for t in range(1, layers):
            xs.append(_states(path, t, pop, aff))
            y = torch.zeros(experts)
            y[path[t]] = 1.0
            ys.append(y)
    if not xs:
        return torch.zeros(0, layers * experts + layers + 2 * experts), torch.zeros(0, experts)
    return torch.stack(xs), torch.stack(ys)


def _accuracy(logits: torch.Tensor, y: torch.Tensor, k: int) -> float:
    if not len(y):
        return 0.0
    guess = torch.zeros_like(y).scatter_(1, torch.topk(logits, k, dim=1).indices, 1.0)
    return float((guess * y).sum() / y.sum())


def train_predictor(trace: RoutingTrace, experts: int, top_k: int, recipe: PredictorRecipe = PredictorRecipe(),
                    log: Callable[[str], None] | None = None) -> tuple[ExpertPredictor, PredictorReport]:
    """Train the ExpertMLP on the trace's sequences (every `holdout_every`-th held out) and judge it against
    the popularity-only guess on the held-out ones."""
    t0 = time.perf_counter()
    if trace.picks.shape[1] < 2:
        raise ValueError("the checkpoint has one MoE layer: decode has no next layer to guess, so there is no "
                         "predictor to train (duoserve serves it without one)")
    if trace.steps == 0:
        raise ValueError("the calibration trace has no decode steps to learn from; calibrate with more new tokens")
    torch.manual_seed(recipe.seed)
    pop, aff = routing_statistics(trace, experts)
    held = (trace.step_seq % recipe.holdout_every) == recipe.holdout_every - 1
    if held.all() or not held.any():
        held = torch.arange(trace.steps) % recipe.holdout_every == recipe.holdout_every - 1
    x, y = _samples(trace, torch.nonzero(~held).flatten(), pop, aff)
    hx, hy = _samples(trace, torch.nonzero(held).flatten(), pop, aff)
    mlp = ExpertMLP(x.shape[1], experts, recipe.hidden, recipe.dropout)
    opt = torch.optim.AdamW(mlp.parameters(), lr=recipe.lr, weight_decay=1e-4)
    loss_fn = nn.BCEWithLogitsLoss()
    gen = torch.Generator().manual_seed(recipe.seed)
    for epoch in range(recipe.epochs):
        mlp.train()
        order = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), recipe.batch):
            idx = order[i:i + recipe.batch]
            if len(idx) < 2:  # batch normalisation needs two samples
                continue
            opt.zero_grad()
            loss = loss_fn(mlp(x[idx]), y[idx])
            loss.backward()
            opt.step()
        if log is not None and (epoch + 1) % 20 == 0:
            log(f"predictor epoch {epoch + 1}/{recipe.epochs}: loss {loss.item():.4f}")
    mlp.eval()
    with torch.inference_mode():
        acc = _accuracy(mlp(hx), hy, top_k) if len(hx) else 0.0
    layer_of = hx[:, pop.shape[0] * pop.shape[1]:pop.shape[0] * pop.shape[1] + pop.shape[0]].argmax(1) \
        if len(hx) else torch.zeros(0, dtype=torch.long)
    pop_acc = _accuracy(pop[layer_of], hy, top_k)
    report = PredictorReport(len(x), len(hx), acc, pop_acc, time.perf_counter() - t0)
    return ExpertPredictor(pop, aff, top_k, mlp), report


def predictor_path(calibration_file: Path, recipe: PredictorRecipe) -> Path:
    return calibration_file.with_name(f"{calibration_file.stem}.predictor-{recipe.key()}.pt")


def load_or_train(calibration: Calibration, experts: int, top_k: int, recipe: PredictorRecipe = PredictorRecipe(),
                  log: Callable[[str], None] | None = None) -> tuple[ExpertPredictor, PredictorReport]:
    """The predictor cached beside its calibration, or trained now (and cached when the calibration is)."""
    if calibration.trace is None:
        raise ValueError("DuoServe's predictor needs a calibration with a routing trace; calibrate first "
                         "(inspector llm train-predictor does both)")
    path = predictor_path(calibration.path, recipe) if calibration.path is not None else None
    if path is not None and path.is_file():
        return ExpertPredictor.load(path), ExpertPredictor.load_report(path)
    predictor, report = train_predictor(calibration.trace, experts, top_k, recipe, log)
    if path is not None:
        predictor.save(path, recipe, report)
    if log is not None:
        log(f"trained the DuoServe predictor on {report.train_samples} samples in {report.seconds:.1f} s: held-out "
            f"accuracy {report.accuracy:.3f} (popularity alone {report.popularity_accuracy:.3f})")
    return predictor, report
