"""DuoServe-MoE (shared/papers/duoserve-moe.txt): separate expert scheduling for prefill and decode.

- prefill (§5.2): the layer's tokens are grouped by expert (the experts loop does that) and every used expert
  is read once, in compute order, with the next read in flight while one computes: two buffers, one computing
  and one reading (the runtime's prefill pipeline; background threads on a CPU box);
- decode (§5.3): after a layer routes, the trained ExpertMLP (offline/predictor.py) guesses the next layer's
  top-k from this token's path, popularity and affinity, and those are read ahead; a wrong guess is read
  again when the layer routes (the runtime's miss path);
- memory (§5.1): the expert cache is k experts in total, the paper's provisioning: nothing stays resident;
  the next layer's guesses are read into buffers as this layer's experts finish with them, and a wrong guess
  gives its buffer back as soon as the routing shows it wrong, so the correct expert's read finds room.
`predictor=popularity` guesses each layer's most popular experts instead (the comparison the paper implies).
A checkpoint with a single MoE layer has no next layer to guess in decode: duoserve runs it without its predictor
(prefill's pipeline and the k-expert cache stay) and says so, rather than refusing for want of a trace to learn from.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from ..calibration import Calibration
from ..checkpoint import ExpertKey
from ..offline.predictor import ExpertPredictor, PredictorReport, load_or_train
from .base import Guesses, MoEPolicy, PoolView


class DuoServe(MoEPolicy):
    def __init__(self, calibration: Calibration | None = None, predictor: str = "mlp",
                 log: Callable[[str], None] | None = None) -> None:
        if predictor not in ("mlp", "popularity"):
            raise ValueError(f"duoserve predictor must be mlp or popularity, got {predictor!r}")
        super().__init__("duoserve", "prefill read pipeline; trained next-layer predictor in decode (DuoServe-MoE)",
                         caches=False, prefetches=True, predicts=True, pipelines_prefill=True, calibrated=True,
                         calibration=calibration, batches=False)
        self.kind = predictor
        self.log = log
        self.model: ExpertPredictor | None = None
        self.report: PredictorReport | None = None
        self.without_predictor = False  # set when the checkpoint has one MoE layer: nothing follows it to guess

    def expert_cache(self, top_k: int) -> int | None:
        return top_k  # §5.1: the GPU expert cache holds k experts; the next layer's guesses take freed buffers

    def _model(self, pool: PoolView) -> ExpertPredictor | None:
        if self.without_predictor or (self.model is None and len(pool.moe_layers) < 2):
            if not self.without_predictor and self.log is not None:
                self.log("duoserve: the checkpoint has one MoE layer, so decode has no next layer to guess; "
                         "running without the predictor (prefill's read pipeline and the k-expert cache stay)")
            self.without_predictor = True
            return None
        if self.model is None:
            if self.calibration is None:
                raise ValueError("duoserve needs a calibration (its predictor learns from the routing trace)")
            self.model, self.report = load_or_train(self.calibration, pool.num_experts, pool.top_k, log=self.log)
        return self.model

    def initial(self, pool: PoolView) -> list[ExpertKey]:
        self._model(pool)  # trained (or loaded) before the first request, not inside it
        return []

    def lookahead(self, pool: PoolView, layer: int, hidden: torch.Tensor, prefill: bool) -> Guesses:
        """Decode: the predictor's guess for the next layer. Prefill (§5.2): the next layer's first expert in
        compute order is read while this layer finishes and the next one's attention runs (its gate applied to
        this layer's hidden states says which experts the prompt will use; the read waits for a free buffer)."""
        if not prefill:
            return super().lookahead(pool, layer, hidden, prefill)
        nxt = pool.next_layer(layer)
        if nxt is None:
            return {}
        picks = torch.topk(pool.router_logits(nxt, hidden), pool.top_k, dim=-1).indices
        first = sorted(set(picks.flatten().tolist()))[:1]
        return {nxt: [ExpertKey(nxt, e) for e in first]}

    def predict(self, pool: PoolView, layer: int, hidden: torch.Tensor) -> list[ExpertKey] | None:
        t = pool.moe_layers.index(layer)
        model = self._model(pool)
        if model is None:
            return None
        if self.kind == "popularity":
            return [ExpertKey(layer, e) for e in model.popularity_guess(t)]
        path = [pool.path[x] for x in pool.moe_layers[:t]]
        return [ExpertKey(layer, e) for e in model.predict(path, t)]
