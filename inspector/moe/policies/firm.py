"""FIRM-MoE (shared/papers/firm-moe.txt): sub-expert prefetch, Meeting-of-Layers prediction, HEOP search.

- fine-grained: a guess reads only the first n projections of each guessed expert (n = `parts`, the paper's
  prefetch granularity); the rest is read when the expert is used, the down projection in the background while
  gate and up compute. A wrong guess costs n/3 of an expert's read. Compute stays exact: the projections land
  in the same fused buffers the plain model multiplies;
- Meeting-of-Layers: for layer l, each of the P layers before it proposes the top K of layer l's gate on its
  own hidden state (eq. 5); the guess is their intersection (eq. 6). P = 1, K = top-k is DAOP's guess. A layer
  with fewer than P layers before it is not guessed for (the paper's P < l); HEOP still sees what that cost;
- HEOP (heop.py): (K, P) per layer group searched online by hill-climbing the loss of eq. 11 over the first
  `heop_steps` decode steps, then fixed; its trail is kept for the log;
- the cache "retains the most frequently activated experts" with LRU order (the paper's wording, §Overview): it
  starts from the calibrated most popular experts when a calibration is given, and evicts the expert this
  sequence has used least, the least recently used among equals.
"""
from __future__ import annotations

from collections.abc import Iterable

import torch

from ..calibration import Calibration
from ..checkpoint import ExpertKey
from .base import Guesses, MoEPolicy, PoolView, calibrated_placement, least_active
from .heop import HEOP, TrailStep


class FIRM(MoEPolicy):
    def __init__(self, calibration: Calibration | None = None, parts: int = 1, k: int = 0, p: int = 2,
                 fine: bool = True, mol: bool = True, heop: bool = True, alpha: float = 0.5, beta: float = 0.5,
                 n_update: int = 4, patience: int = 2, heop_steps: int = 48) -> None:
        if not 1 <= parts <= 3:
            raise ValueError(f"firm prefetch granularity parts must be 1, 2 or 3 projections, got {parts}")
        super().__init__("firm", "sub-expert prefetch, Meeting-of-Layers guess, HEOP (K, P) search (FIRM-MoE)",
                         prefetches=True, predicts=True, fine_grained=fine, prefetch_parts=parts if fine else 3,
                         calibration=calibration, batches=False)
        self.k0, self.p0, self.mol, self.use_heop = k, p, mol, heop
        self.heop_args = dict(alpha=alpha, beta=beta, n_update=n_update, patience=patience, steps=heop_steps)
        self.heop: HEOP | None = None
        self.hiddens: dict[int, torch.Tensor] = {}  # MoE layer index -> this step's routing input there
        self.skipped: set[int] = set()  # layer indices left unguessed this step for want of P voters

    def staging(self, top_k: int, num_experts: int) -> int:
        return min(num_experts, 2 * top_k)

    def initial(self, pool: PoolView) -> list[ExpertKey]:
        return calibrated_placement(pool, self.calibration) if self.calibration is not None else []

    def victim(self, pool: PoolView, layer: int, protect: Iterable[ExpertKey]) -> ExpertKey:
        return least_active(pool, layer, protect)

    def _search(self, pool: PoolView) -> HEOP:
        if self.heop is None:
            k = self.k0 or pool.top_k  # HEOP starts from top-k candidates voted on by two layers
            k_max = self.staging(pool.top_k, pool.num_experts)
            p_max = max(1, min(4, len(pool.moe_layers) - 1))
            start = {g: (min(k, k_max), min(self.p0, p_max)) for g in HEOP.GROUPS}
            steps = self.heop_args["steps"] if self.use_heop and self.mol else 0
            self.heop = HEOP(start, (1, k_max), (1, p_max), **{**self.heop_args, "steps": steps})
        return self.heop

    @property
    def trail(self) -> list[TrailStep]:
        return self.heop.trail if self.heop is not None else []

    def config(self, pool: PoolView, index: int) -> tuple[int, int]:
        """(K, P) for the MoE layer at `index`: its group's, or DAOP's (top-k, 1) without MoL."""
        if not self.mol:
            return pool.top_k, 1
        return self._search(pool).config(HEOP.group_of(index, len(pool.moe_layers)))

    def on_decode(self, pool: PoolView, layer: int, hidden: torch.Tensor, picks: list[int],
                  guess: set[int] | None) -> None:
        i = pool.moe_layers.index(layer)
        if i == 0:
            self.hiddens.clear()
            self.skipped.clear()
        self.hiddens[i] = hidden[-1:]
        if guess is None and i not in self.skipped:
            return
        guess = guess or set()  # left unguessed: HEOP still sees what prefetching nothing cost there
        self.skipped.discard(i)
        actual = set(picks)
        hit = {e for e in actual if pool.is_resident(ExpertKey(layer, e))}
        self._search(pool).record(HEOP.group_of(i, len(pool.moe_layers)), unused=len(guess - actual),
                                  miss=len(actual - guess - hit), hit=len(hit))

    def on_step(self, pool: PoolView) -> None:
        self._search(pool).tick()

    def lookahead(self, pool: PoolView, layer: int, hidden: torch.Tensor, prefill: bool) -> Guesses:
        target = pool.next_layer(layer)
        if prefill or target is None:
            return {}
        t = pool.moe_layers.index(target)
        k, p = self.config(pool, t)
        voters = [m for m in range(t - p, t) if m in self.hiddens]
        if not voters or (self.mol and len(voters) < p):  # eq. 5-6 ask P < l: P layers before it to meet
            self.skipped.add(t)
            return {}
        guess: list[ExpertKey] | None = None
        for m in reversed(voters):  # the nearest layer first: its order ranks the intersection
            logits = pool.router_logits(target, self.hiddens[m])[0]
            cand = [ExpertKey(target, int(e)) for e in torch.topk(logits, min(k, logits.numel())).indices]
            guess = cand if guess is None else [key for key in guess if key in set(cand)]
        return {target: guess or []}
