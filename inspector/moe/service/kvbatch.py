"""The KV cache of sequences that decode together: one cache, rows left-padded to a common length.

Sequences join after their prefill (alone or several at once; their cache
becomes new rows, the shorter side padded on the left) and leaves when it finishes (its row is
dropped, then padding every row shares is trimmed). Each step passes the
padding mask and every row's own next position, so a row attends only to its
own tokens and sees the positions it would see alone.

Only caches of plain full-attention layers can be padded this way; a model with
sliding-window or other special layers decodes one sequence at a time.
"""
from __future__ import annotations

import torch
from torch.nn import functional as F
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


def batchable(cache: DynamicCache) -> bool:
    """Whether rows of this model's cache can be padded and stacked (plain full-attention layers only)."""
    return all(type(layer) is DynamicLayer for layer in cache.layers)


class KVBatch:
    def __init__(self) -> None:
        self.cache: DynamicCache | None = None
        self.pads: list[int] = []  # leading padding positions of each row

    def __len__(self) -> int:
        return len(self.pads)

    @property
    def width(self) -> int:
        """Positions each row holds, padding included."""
        return self.cache.get_seq_length() if self.cache is not None else 0

    def join(self, cache: DynamicCache, pads: list[int] | None = None) -> None:
        """Add prefilled sequences' cache as the last rows: one sequence, or a batched prefill's rows with
        their own left padding (`pads`)."""
        pads = pads if pads is not None else [0]
        if self.cache is None:
            self.cache, self.pads = cache, list(pads)
            return
        have, new = self.width, cache.get_seq_length()
        grow = max(0, new - have)
        for mine, theirs in zip(self.cache.layers, cache.layers):
            mine.keys = torch.cat([_left_pad(mine.keys, grow), _left_pad(theirs.keys, have + grow - new)])
            mine.values = torch.cat([_left_pad(mine.values, grow), _left_pad(theirs.values, have + grow - new)])
        self.pads = [p + grow for p in self.pads] + [p + have + grow - new for p in pads]

    def keep(self, rows: list[int]) -> None:
        """Keep only these rows (in this order); the rest have finished."""
        if not rows:
            self.cache, self.pads = None, []
            return
        if rows == list(range(len(self.pads))):
            return
        assert self.cache is not None
        index = torch.tensor(rows, device=self.cache.layers[0].keys.device)
        pads = [self.pads[r] for r in rows]
        trim = min(pads)
        for layer in self.cache.layers:
            layer.keys = layer.keys.index_select(0, index)[:, :, trim:]
            layer.values = layer.values.index_select(0, index)[:, :, trim:]
        self.pads = [p - trim for p in pads]

    def step_inputs(self) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """(attention mask [B, width + 1], positions [B, 1]) for the next step; (None, None) for one row without
        padding, which is exactly a lone sequence's step."""
        if len(self.pads) == 1 and self.pads[0] == 0:
            return None, None
        assert self.cache is not None
        device = self.cache.layers[0].keys.device
        width = self.width
        mask = torch.ones(len(self.pads), width + 1, dtype=torch.long, device=device)
        for r, pad in enumerate(self.pads):
            mask[r, :pad] = 0
        positions = torch.tensor([[width - pad] for pad in self.pads], dtype=torch.long, device=device)
        return mask, positions


def _left_pad(t: torch.Tensor, n: int) -> torch.Tensor:
    """[B, heads, T, D] with n zero positions in front of T."""
    return F.pad(t, (0, 0, n, 0)) if n else t
