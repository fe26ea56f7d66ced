"""The experts module that replaces transformers' fused one: the same arithmetic, weights fetched per expert.

It follows transformers' eager experts loop (one-hot mask, experts in ascending
order, gate/up/act/down, weighted index_add), so with no approximation enabled
the output equals the plain model's eager path; only where the weights come
from differs. Routing stays transformers' own (softmax top-k, sparsemixer,
shared experts, normalisation), because only `mlp.experts` is replaced.

A decode step computes its experts in the order their weights are ready (the
source says which: in memory first, then reads in the order they started), so
the reads of missed experts overlap the compute of the others instead of
waiting their turn in ascending order. Each expert's product is independent;
only the sum into the output depends on order, and those adds still happen in
ascending order once the layer's products are all done, so the output is
bit-for-bit the loop's.
"""
from __future__ import annotations

from typing import Protocol

import torch
from torch import nn
from torch.nn import functional as F

from .checkpoint import ExpertKey
from .kernels import RowKernels
from .quant.weights import expert_linear
from .store import ExpertWeights


class ExpertSource(Protocol):
    decode_rows: int  # sequences in the running decode step (1: prefill, or one sequence alone)
    skip_tokens: torch.Tensor | None  # flattened positions that are padding (a batched prefill): run no expert

    def route(self, layer: int, hidden: torch.Tensor, top_k_index: torch.Tensor,
              top_k_weights: torch.Tensor) -> None: ...
    def acquire(self, key: ExpertKey) -> ExpertWeights: ...
    def next_expert(self, layer: int, remaining: list[int]) -> int: ...
    def release(self, key: ExpertKey) -> None: ...
    def layer_done(self, layer: int, hidden: torch.Tensor) -> None: ...


class OffloadedExperts(nn.Module):
    def __init__(self, layer: int, num_experts: int, act_fn: nn.Module, source: ExpertSource,
                 kernels: RowKernels | None = None) -> None:
        super().__init__()
        self.layer, self.num_experts, self.act_fn = layer, num_experts, act_fn
        self.source = source
        self.kernels = kernels  # a batched decode step's products, the way measured faster (kernels.py)

    def forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                top_k_weights: torch.Tensor) -> torch.Tensor:
        final = torch.zeros_like(hidden_states)
        skip = self.source.skip_tokens
        if skip is not None and skip.shape[0] == top_k_index.shape[0]:  # padding routes nowhere: num_experts
            top_k_index = top_k_index.masked_fill(skip[:, None].to(top_k_index.device), self.num_experts)
        self.source.route(self.layer, hidden_states, top_k_index, top_k_weights)  # may change it (degradation)
        if hidden_states.shape[0] == 1:
            return self._one_token(hidden_states, top_k_index, top_k_weights, final)
        if self.source.decode_rows > 1:
            return self._few_tokens(hidden_states, top_k_index, top_k_weights, final)
        with torch.no_grad():
            mask = F.one_hot(top_k_index, num_classes=self.num_experts + 1).permute(2, 1, 0)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
        for row in hit:
            e = int(row[0])
            if e == self.num_experts:
                continue
            top_k_pos, token_idx = torch.where(mask[e])
            self._expert(e, hidden_states[token_idx], token_idx, top_k_weights[token_idx, top_k_pos, None], final)
        self.source.layer_done(self.layer, hidden_states)
        return final

    def _one_token(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor,
                   final: torch.Tensor) -> torch.Tensor:
        """A decode step: the loop's products and adds without building the one-hot mask that dominates a
        one-token step's overhead."""
        row = torch.zeros(1, dtype=torch.long, device=hidden_states.device)
        jobs = {e: (hidden_states, row, top_k_weights[row, pos, None])
                for pos, e in enumerate(top_k_index[0].tolist()) if e != self.num_experts}
        return self._ready_first(jobs, final, hidden_states)

    def _few_tokens(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor,
                    final: torch.Tensor) -> torch.Tensor:
        """A batched decode step (one token per row): each expert on its tokens in the loop's order (by pick
        position, then token), grouped from a list instead of the one-hot mask, whose building and per-expert
        searches cost more than a few rows' products."""
        groups: dict[int, list[tuple[int, int]]] = {}
        for token, picks in enumerate(top_k_index.tolist()):
            for pos, e in enumerate(picks):
                if e != self.num_experts:
                    groups.setdefault(e, []).append((pos, token))
        device = hidden_states.device
        jobs = {}
        for e, members in groups.items():
            pos, token = zip(*sorted(members))
            token_idx = torch.tensor(token, device=device)
            weight = top_k_weights[token_idx, torch.tensor(pos, device=device), None]
            jobs[e] = (hidden_states[token_idx], token_idx, weight)
        return self._ready_first(jobs, final, hidden_states)

    def _ready_first(self, jobs: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]], final: torch.Tensor,
                     hidden_states: torch.Tensor) -> torch.Tensor:
        """Each expert's product as soon as its weights are ready (the source picks), then the adds in ascending
        expert order, as the loop makes them: the same sums, so the same output, bit for bit."""
        outs: dict[int, torch.Tensor] = {}
        remaining = sorted(jobs)
        while remaining:
            e = self.source.next_expert(self.layer, remaining)
            remaining.remove(e)
            current, _, weight = jobs[e]
            outs[e] = self._product(e, current, weight, final)
        for e in sorted(outs):
            final.index_add_(0, jobs[e][1], outs[e])
        self.source.layer_done(self.layer, hidden_states)
        return final

    def _expert(self, e: int, current: torch.Tensor, token_idx: torch.Tensor, weight: torch.Tensor,
                final: torch.Tensor) -> None:
        """One expert on its tokens, added into `final` (transformers' eager arithmetic)."""
        final.index_add_(0, token_idx, self._product(e, current, weight, final))

    def _product(self, e: int, current: torch.Tensor, weight: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """One expert's weighted output for its tokens, in `like`'s dtype and on its device."""
        key = ExpertKey(self.layer, e)
        w = self.source.acquire(key)
        try:
            w.for_compute()  # a GPU copy on the copy stream: this stream waits for it on the device
            if w.gate_up.device != current.device:  # computed where it lies (host RAM): the hidden state goes there
                current, weight = current.to(w.gate_up.device), weight.to(w.gate_up.device)
            batched = self.kernels is not None and self.source.decode_rows > 1  # never a prefill or a lone row
            linear = self.kernels.linear if batched else expert_linear
            gate, up = linear(current, w.gate_up).chunk(2, dim=-1)
            inner = self.act_fn(gate) * up
            w.wait()  # a sub-expert read: the down projection may still be landing
            out = linear(inner, w.down) * weight
            if out.dtype != like.dtype or out.device != like.device:
                out = out.to(like.device, like.dtype)
            return out
        finally:
            self.source.release(key)
