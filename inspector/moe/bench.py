"""`inspector llm bench`: one prompt set, several policies at one expert cache ratio, side by side.

Each policy gets a freshly loaded model (its own initial placement, a cold
pool) and decodes every prompt greedily; tokens/s is all new tokens over all
wall time, prefill included. The all-resident ceiling is the same model with
every expert in the pool. Exact policies must produce the same tokens; the
report says whether they did, and for an approximate policy how many tokens
it changed (its accuracy cost).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .calibration import Calibration
from .engine import OffloadedLM
from .policies import get_policy


@dataclass
class BenchRun:
    policy: str
    tokens_per_s: float
    ttft_s: float
    expert_loads: int
    hit_rate: float
    peak_device_bytes: int
    prediction_accuracy: float | None
    new_tokens: int = 0
    seconds: float = 0.0
    prefetches: int = 0
    prefetch_waits: int = 0
    swaps: int = 0
    degraded: int = 0
    approximate: bool = False
    same_tokens: float | None = None  # share of generated tokens equal to the first exact policy's
    tokens: list[list[int]] = field(default_factory=list, repr=False)

    def to_json(self) -> dict:
        out = asdict(self)
        out.pop("tokens")
        return out


@dataclass
class BenchReport:
    model: str
    cache_ratio: float
    ceiling_tokens_per_s: float
    runs: list[BenchRun]
    prompts: int
    max_new_tokens: int
    device: str

    def to_json(self) -> dict:
        return {"model": self.model, "cache_ratio": self.cache_ratio,
                "ceiling_tokens_per_s": self.ceiling_tokens_per_s, "runs": [r.to_json() for r in self.runs],
                "prompts": self.prompts, "max_new_tokens": self.max_new_tokens, "device": self.device}


def run_policy(root: str | Path, policy: str, cache_ratio: float, prompts: list[list[int]], max_new_tokens: int,
               calibration: Calibration | None, device: str = "cpu") -> BenchRun:
    pol = get_policy(policy, calibration)
    lm = OffloadedLM.load(root, pol, cache_ratio=cache_ratio, device=device)
    try:
        tokens, ttfts, seconds = [], [], 0.0
        loads = hits = misses = prefetches = waits = swaps = degraded = predicted = right = 0
        for ids in prompts:
            t0 = time.perf_counter()
            out = list(lm.generate(ids, max_new_tokens, truncate=True))
            seconds += time.perf_counter() - t0
            s = out[-1][1]
            tokens.append([t for t, _ in out])
            ttfts.append(s.ttft_s)
            loads += s.expert_loads
            hits, misses = hits + s.hits, misses + s.misses
            prefetches, waits, swaps, degraded = (prefetches + s.prefetches, waits + s.prefetch_waits,
                                                  swaps + s.swaps, degraded + s.degraded)
            predicted, right = predicted + s.predicted, right + s.predicted_right
        n = sum(len(t) for t in tokens)
        return BenchRun(policy, n / seconds, sum(ttfts) / len(ttfts), loads, hits / max(1, hits + misses),
                        lm.non_expert_bytes + lm.runtime.store.ledger.peak, right / predicted if predicted else None,
                        n, seconds, prefetches, waits, swaps, degraded, pol.approximate, tokens=tokens)
    finally:
        lm.close()


def bench(root: str | Path, policies: list[str], cache_ratio: float, prompts: list[list[int]],
          max_new_tokens: int, calibration: Calibration | None, device: str = "cpu",
          log=lambda line: None) -> BenchReport:
    ceiling = run_policy(root, "fiddler", 1.0, prompts, max_new_tokens, calibration, device)  # warms torch, too
    log(f"ceiling (every expert resident): {ceiling.tokens_per_s:.2f} tokens/s")
    runs = []
    reference: list[list[int]] | None = None
    for name in policies:
        run = run_policy(root, name, cache_ratio, prompts, max_new_tokens, calibration, device)
        if reference is None and not run.approximate:
            reference = run.tokens
        if reference is not None:
            run.same_tokens = _agreement(reference, run.tokens)
        runs.append(run)
        log(f"{name}: {run.tokens_per_s:.2f} tokens/s")
    for run in runs:  # an approximate policy run before the first exact one is compared now
        if run.same_tokens is None and reference is not None:
            run.same_tokens = _agreement(reference, run.tokens)
    return BenchReport(str(root), cache_ratio, ceiling.tokens_per_s, runs, len(prompts), max_new_tokens, device)


def _agreement(want: list[list[int]], got: list[list[int]]) -> float:
    """Share of positions where the tokens agree, each sequence compared up to its first difference onward."""
    same = total = 0
    for a, b in zip(want, got):
        total += max(len(a), len(b))
        same += sum(x == y for x, y in zip(a, b))
    return same / total if total else 1.0


def format_report(report: BenchReport, base: str = "ondemand") -> str:
    base_rate = next((r.tokens_per_s for r in report.runs if r.policy == base), report.runs[0].tokens_per_s)
    lines = [f"model {report.model} on {report.device}: cache ratio {report.cache_ratio:.2f}, {report.prompts} "
             f"prompts x {report.max_new_tokens} new tokens; all-resident ceiling "
             f"{report.ceiling_tokens_per_s:.2f} tokens/s",
             f"{'policy':<14}{'tok/s':>8}{'x ' + base:>12}{'ttft s':>8}{'loads':>7}{'hit':>7}{'pred acc':>9}"
             f"{'prefetch':>9}{'waits':>7}{'swaps':>7}{'peak MiB':>9}{'same tok':>9}"]
    lines.append("-" * len(lines[-1]))
    for r in report.runs:
        acc = f"{r.prediction_accuracy:.3f}" if r.prediction_accuracy is not None else "-"
        same = f"{r.same_tokens:.3f}" if r.same_tokens is not None else "-"
        lines.append(f"{r.policy:<14}{r.tokens_per_s:>8.2f}{r.tokens_per_s / base_rate:>11.2f}x{r.ttft_s:>8.3f}"
                     f"{r.expert_loads:>7}{r.hit_rate:>7.3f}{acc:>9}{r.prefetches:>9}{r.prefetch_waits:>7}"
                     f"{r.swaps:>7}{r.peak_device_bytes / 2**20:>9.1f}{same:>9}")
    return "\n".join(lines)
