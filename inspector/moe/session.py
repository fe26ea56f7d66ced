"""One chat with an offloaded MoE model: tokenizer, calibration, engine, streamed text and live statistics.

`inspector llm chat` prints what this yields; the dashboard's LLM tab shows
it. Loading (calibrating the popularity-based policies on first use) and
generating are slow, so a front end calls them off its UI thread.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .calibration import CALIBRATION_DIR
from .engine import GenStats, OffloadedLM, pool_slots, serving_checkpoint
from .loans import Borrow, borrow_for
from .offline.collect import calibrate_on_texts
from .policies import get_policy
from .quant.copy import QUANT_DIR
from .text import encode_prompt, load_tokenizer, stream_text


@dataclass(frozen=True)
class LayerResidency:
    layer: int
    resident: int  # experts in the pool now
    slots: int  # the pool's experts per layer
    experts: int  # the layer's experts (the rest are on disk)


class ChatSession:
    def __init__(self, model: str | Path, policy: str = "daop", cache_ratio: float = 0.25,
                 calibration_dir: str | Path | None = None, device: str = "cpu",
                 log: Callable[[str], None] | None = None, host_ratio: float | None = None,
                 borrow: Borrow | None = None, expert_dtype: str = "native", quant_dir: str | Path | None = None
                 ) -> None:
        """Raises FileNotFoundError/ValueError (CheckpointError, BudgetTooSmall) naming what to fix.

        `borrow`: where the memory comes from when a line shares the box (loans.py): the pool's ledger opens in
        the loan, which a refusal (GrantRefused, GrantError) stops before anything loads."""
        self.model = Path(model)
        quant_dir = Path(quant_dir) if quant_dir else QUANT_DIR
        ckpt = serving_checkpoint(self.model, expert_dtype, device, quant_dir, log)  # quantized first when asked
        pool_slots(ckpt, cache_ratio)  # a ratio below one layer's top-k is refused before anything loads
        self.tokenizer = load_tokenizer(self.model)
        calibration = None
        if get_policy(policy).calibrated:
            cache = Path(calibration_dir) if calibration_dir else CALIBRATION_DIR
            calibration = calibrate_on_texts(self.model, self.tokenizer, cache, log)
        self.policy = get_policy(policy, calibration, log)
        self.loan = borrow_for(ckpt, self.policy, cache_ratio, calibration, borrow) if borrow else None
        try:
            self.lm = OffloadedLM.load(self.model, self.policy, cache_ratio=cache_ratio, device=device,
                                       host_ratio=host_ratio, budget=self.loan.budget if self.loan else None,
                                       expert_dtype=expert_dtype, quant_dir=quant_dir)
        except BaseException:
            if self.loan is not None:
                self.loan.close()
            raise
        self.stats: GenStats | None = None  # of the newest answer, up to its last token

    def complete(self, text: str, max_new_tokens: int) -> Iterator[tuple[str, GenStats]]:
        """(new text, statistics so far) as tokens arrive; a too-long prompt loses its oldest tokens."""
        def tokens() -> Iterator[int]:
            for token, stats in self.lm.generate(encode_prompt(self.tokenizer, text), max_new_tokens,
                                                 eos_token_id=self.tokenizer.eos_token_id, truncate=True):
                self.stats = stats
                yield token

        for piece in stream_text(self.tokenizer, tokens()):
            yield piece, self.stats

    def describe(self) -> str:
        """One line (rich text) on what is loaded: the model, its shape, the policy, the pool."""
        ck = self.lm.ckpt
        return (f"<b>{self.model.name}</b>: {ck.config.model_type}, {len(ck.moe_layers)} MoE layers × "
                f"{ck.num_experts} experts, top-{ck.top_k}; policy <b>{self.policy.name}</b>, "
                f"{self.lm.runtime.slots_per_layer} experts per layer in the pool"
                + (f"; memory: {self.loan.source}" if self.loan else ""))

    def residency(self) -> list[LayerResidency]:
        rt = self.lm.runtime
        return [LayerResidency(layer, rt.store.count_in(layer), rt.slots[layer], self.lm.ckpt.num_experts)
                for layer in self.lm.ckpt.moe_layers]

    def close(self) -> None:
        self.lm.close()
        if self.loan is not None:
            self.loan.close()
