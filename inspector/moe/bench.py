"""`inspector llm bench`: one prompt set, several policies at one or more expert cache ratios, side by side.

Each policy run gets a freshly loaded model (its own initial placement, a cold
pool; a trained predictor or calibration is built before the clock starts) and
decodes every prompt greedily; tokens/s is all new tokens over all wall time,
prefill included. With `repeat` > 1 each policy runs that many times and every
figure is the median. The all-resident ceiling is the same model with every
expert in the pool. Exact policies must produce the same tokens; the report says
whether they did, and for an approximate policy how many tokens it changed.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from .accelerate_baseline import NAME as ACCELERATE
from .accelerate_baseline import AccelerateOffload
from .calibration import Calibration
from .engine import OffloadedLM
from .policies import get_policy
from .policies.firm import FIRM
from .quant.copy import QUANT_DIR

# FIRM-MoE's ablation (its Table 1): the baseline is next-gate prefetch of whole experts into an LRU cache
FIRM_ABLATION = ("firm:fine=false:mol=false:heop=false", "firm:mol=false:heop=false", "firm:heop=false", "firm")
ABLATIONS = {"firm": FIRM_ABLATION}
ABLATION_LABELS = {FIRM_ABLATION[0]: "firm base", FIRM_ABLATION[1]: "+fine-grained", FIRM_ABLATION[2]: "+MoL",
                   FIRM_ABLATION[3]: "+HEOP"}


@dataclass
class BenchRun:
    policy: str
    tokens_per_s: float
    ttft_s: float
    expert_loads: int
    hit_rate: float
    peak_device_bytes: int  # non-expert weights + the pool's peak
    prediction_accuracy: float | None  # |S∩A| / |A|
    new_tokens: int = 0
    seconds: float = 0.0
    utilisation: float | None = None  # |S∩A| / |S|
    bytes_read: int = 0
    peak_expert_bytes: int = 0  # the pool's peak: resident experts, reads in flight and staged
    prefetches: int = 0
    prefetch_unused: int = 0
    prefetch_waits: int = 0
    pipelined: int = 0
    swaps: int = 0
    degraded: int = 0
    host_hits: int = 0  # whole experts served by the host-RAM tier instead of the disk
    host_computed: int = 0  # away experts computed on the CPU where they lie (GPU boxes)
    disk_busy_s: float = 0.0  # wall seconds with at least one expert read under way
    approximate: bool = False
    same_tokens: float | None = None  # share of generated tokens equal to the first exact policy's
    repeats: int = 1
    copy_s: float = 0.0  # GPU pools: host-to-GPU expert copies that compute used, summed (CUDA events)
    copy_waited_s: float = 0.0  # ... the part of them compute waited for (the rest was hidden behind compute)
    details: dict = field(default_factory=dict)  # policy-specific: HEOP's choice and trail, the predictor's report
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
    repeat: int = 1
    expert_dtype: str = "native"

    def to_json(self) -> dict:
        return {"model": self.model, "cache_ratio": self.cache_ratio, "repeat": self.repeat,
                "expert_dtype": self.expert_dtype,
                "ceiling_tokens_per_s": self.ceiling_tokens_per_s, "runs": [r.to_json() for r in self.runs],
                "prompts": self.prompts, "max_new_tokens": self.max_new_tokens, "device": self.device}


def run_accelerate(root: str | Path, prompts: list[list[int]], max_new_tokens: int, device: str = "cpu") -> BenchRun:
    """The real accelerate disk offload (accelerate_baseline.py): every expert of a layer read per forward."""
    acc = AccelerateOffload(root, device)
    try:
        tokens, ttfts, seconds = [], [], 0.0
        for ids in prompts:
            t0 = time.perf_counter()
            out, ttft = acc.generate(ids, max_new_tokens)
            seconds += time.perf_counter() - t0
            tokens.append(out)
            ttfts.append(ttft)
        n = sum(len(t) for t in tokens)
        return BenchRun(ACCELERATE, n / seconds, sum(ttfts) / len(ttfts), acc.loads, 0.0, acc.resident_bytes, None,
                        n, seconds, bytes_read=acc.bytes_read, tokens=tokens)
    finally:
        acc.close()


def run_policy(root: str | Path, policy: str, cache_ratio: float, prompts: list[list[int]], max_new_tokens: int,
               calibration: Calibration | None, device: str = "cpu",
               log: Callable[[str], None] | None = None, host_ratio: float | None = None,
               expert_dtype: str = "native", quant_dir: Path = QUANT_DIR) -> BenchRun:
    if policy == ACCELERATE:
        return run_accelerate(root, prompts, max_new_tokens, device)
    pol = get_policy(policy, calibration, log)
    lm = OffloadedLM.load(root, pol, cache_ratio=cache_ratio, device=device, host_ratio=host_ratio,
                          expert_dtype=expert_dtype, quant_dir=quant_dir, log=log)
    busy0 = lm.runtime.store.stats.busy_s  # the initial placement's reads are not the run's
    lm.runtime.store.copy_overlap(keep_unused=False)  # nor its copies
    try:
        tokens, ttfts, seconds = [], [], 0.0
        sums: dict[str, int] = {}
        keys = ("expert_loads", "hits", "misses", "prefetches", "prefetch_unused", "prefetch_waits", "pipelined",
                "swaps", "degraded", "predicted", "predicted_right", "guessed", "bytes_read", "host_hits",
                "host_computed")
        for ids in prompts:
            t0 = time.perf_counter()
            out = list(lm.generate(ids, max_new_tokens, truncate=True))
            seconds += time.perf_counter() - t0
            s = out[-1][1]
            tokens.append([t for t, _ in out])
            ttfts.append(s.ttft_s)
            for k in keys:
                sums[k] = sums.get(k, 0) + getattr(s, k)
        n = sum(len(t) for t in tokens)
        lookups = sums["hits"] + sums["misses"]
        copies = lm.runtime.store.copy_overlap()
        run = BenchRun(policy, n / seconds, sum(ttfts) / len(ttfts), sums["expert_loads"],
                        sums["hits"] / max(1, lookups), lm.non_expert_bytes + lm.runtime.store.ledger.peak,
                        sums["predicted_right"] / sums["predicted"] if sums["predicted"] else None, n, seconds,
                        sums["predicted_right"] / sums["guessed"] if sums["guessed"] else None, sums["bytes_read"],
                        lm.runtime.store.ledger.peak, sums["prefetches"], sums["prefetch_unused"],
                        sums["prefetch_waits"], sums["pipelined"], sums["swaps"], sums["degraded"],
                        sums["host_hits"], sums["host_computed"], lm.runtime.store.stats.busy_s - busy0,
                        pol.approximate, details=_details(pol), tokens=tokens)
        run.copy_s, run.copy_waited_s = copies.copy_s, copies.waited_s
        return run
    finally:
        lm.close()


def _details(pol: object) -> dict:
    if isinstance(pol, FIRM) and pol.mol:
        heop = pol.heop
        if heop is None:
            return {}
        return {"k_p": {g: list(heop.config(g)) for g in heop.groups}, "heop_done": heop.done,
                "trail": [asdict(t) for t in heop.trail]}
    if getattr(pol, "without_predictor", False):
        return {"without_predictor": "one MoE layer: no next layer to guess"}
    report = getattr(pol, "report", None)
    return {"predictor": asdict(report)} if report is not None else {}


def _median_run(runs: list[BenchRun]) -> BenchRun:
    """Every numeric figure the median of the repeats; tokens and details from the first run."""
    first = runs[0]
    if len(runs) == 1:
        return first
    out = BenchRun(**{f.name: getattr(first, f.name) for f in fields(BenchRun)})
    for f in fields(BenchRun):
        values = [getattr(r, f.name) for r in runs]
        if f.name in ("tokens", "details", "policy", "approximate", "same_tokens", "repeats"):
            continue
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            med = statistics.median(values)
            setattr(out, f.name, type(getattr(first, f.name))(med) if isinstance(getattr(first, f.name), int)
                    else med)
    out.repeats = len(runs)
    return out


def bench(root: str | Path, policies: list[str], cache_ratio: float, prompts: list[list[int]],
          max_new_tokens: int, calibration: Calibration | None, device: str = "cpu",
          log: Callable[[str], None] = lambda line: None, repeat: int = 1,
          host_ratio: float | None = None, expert_dtype: str = "native", quant_dir: Path = QUANT_DIR,
          ceiling: bool = True) -> BenchReport:
    """Each policy at one cache ratio; `ceiling`: first the same model with every expert resident (warms torch)."""
    top = run_policy(root, "fiddler", 1.0, prompts, max_new_tokens, calibration, device, expert_dtype=expert_dtype,
                     quant_dir=quant_dir) if ceiling else None
    if top is not None:
        log(f"ceiling (every expert resident): {top.tokens_per_s:.2f} tokens/s")
    runs = []
    reference: list[list[int]] | None = None
    for name in policies:
        repeats = []
        for i in range(max(1, repeat)):
            repeats.append(run_policy(root, name, cache_ratio, prompts, max_new_tokens, calibration, device, log,
                                      host_ratio, expert_dtype, quant_dir))
            if repeats[-1].tokens != repeats[0].tokens:
                log(f"WARNING: {name} gave different tokens on repeat {i + 1}")
        run = _median_run(repeats)
        if reference is None and not run.approximate:
            reference = run.tokens
        if reference is not None:
            run.same_tokens = min(agreement(reference, r.tokens) for r in repeats)
        runs.append(run)
        log(f"{name} @ {cache_ratio:g}: {run.tokens_per_s:.2f} tokens/s")
    for run in runs:  # an approximate policy run before the first exact one is compared now
        if run.same_tokens is None and reference is not None:
            run.same_tokens = agreement(reference, run.tokens)
    return BenchReport(str(root), cache_ratio, top.tokens_per_s if top else 0.0, runs, len(prompts), max_new_tokens,
                       device, max(1, repeat), expert_dtype)


def agreement(want: list[list[int]], got: list[list[int]]) -> float:
    """Share of positions where the tokens agree, each sequence compared up to its first difference onward."""
    same = total = 0
    for a, b in zip(want, got):
        total += max(len(a), len(b))
        same += sum(x == y for x, y in zip(a, b))
    return same / total if total else 1.0


def format_report(report: BenchReport, base: str = "ondemand", labels: dict[str, str] | None = None) -> str:
    """The table as printed; `labels` renames rows (the ablation's steps)."""
    labels = labels or {}
    base_rate = next((r.tokens_per_s for r in report.runs if r.policy == base), report.runs[0].tokens_per_s)
    base_name = base if any(r.policy == base for r in report.runs) else report.runs[0].policy
    med = f", median of {report.repeat}" if report.repeat > 1 else ""
    form = f", {report.expert_dtype} experts" if report.expert_dtype != "native" else ""
    lines = [f"model {report.model} on {report.device}{form}: cache ratio {report.cache_ratio:g}, {report.prompts} "
             f"prompts x {report.max_new_tokens} new tokens{med}; all-resident ceiling "
             f"{report.ceiling_tokens_per_s:.2f} tokens/s",
             f"{'policy':<16}{'tok/s':>7}{'x ' + base_name[:8]:>11}{'ttft s':>8}{'hit':>6}{'pred acc':>9}"
             f"{'util':>6}{'loads':>7}{'MiB read':>9}{'unused':>7}{'exp MiB':>8}{'tot MiB':>8}{'same tok':>9}"]
    lines.append("-" * len(lines[-1]))
    for r in report.runs:
        acc = f"{r.prediction_accuracy:.3f}" if r.prediction_accuracy is not None else "-"
        util = f"{r.utilisation:.3f}" if r.utilisation is not None else "-"
        same = f"{r.same_tokens:.3f}" if r.same_tokens is not None else "-"
        name = labels.get(r.policy, r.policy)
        lines.append(f"{name[:16]:<16}{r.tokens_per_s:>7.2f}{r.tokens_per_s / base_rate:>10.2f}x{r.ttft_s:>8.3f}"
                     f"{r.hit_rate:>6.3f}{acc:>9}{util:>6}{r.expert_loads:>7}{r.bytes_read / 2**20:>9.1f}"
                     f"{r.prefetch_unused:>7}{r.peak_expert_bytes / 2**20:>8.2f}{r.peak_device_bytes / 2**20:>8.1f}"
                     f"{same:>9}")
    for r in report.runs:
        if r.details.get("k_p"):
            kp = ", ".join(f"{g} K={k} P={p}" for g, (k, p) in r.details["k_p"].items())
            lines.append(f"{labels.get(r.policy, r.policy)}: HEOP chose {kp} after "
                         f"{len(r.details['trail'])} judged windows")
        if r.details.get("without_predictor"):
            lines.append(f"{r.policy}: ran without its predictor ({r.details['without_predictor']})")
        if r.details.get("predictor"):
            p = r.details["predictor"]
            lines.append(f"{r.policy}: predictor held-out accuracy {p['accuracy']:.3f} vs popularity alone "
                         f"{p['popularity_accuracy']:.3f} ({p['train_samples']} training samples)")
    copied = [r for r in report.runs if r.copy_s > 0]
    if copied:
        lines.append("the copy stream (CUDA events; host-to-GPU expert copies compute used): " + "; ".join(
            f"{labels.get(r.policy, r.policy)} {r.copy_s * 1e3:.0f} ms copied, "
            f"{1 - r.copy_waited_s / r.copy_s:.0%} hidden behind compute" for r in copied))
    return "\n".join(lines)
