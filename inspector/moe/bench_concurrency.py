"""`inspector llm bench --concurrency 1,4`: the serving engine under N clients at once, per policy.

Each (policy, N) run loads the model afresh (a cold pool, as `llm bench`) and
starts the same engine thread `inspector llm serve` runs (service/batcher.py).
N client threads each submit a prompt, wait for its last token, and take the
next prompt, until the prompt set is done. Aggregate tokens/s is every new
token over the wall time from the first request to the last token; a
request's tokens/s is its tokens over its own time from submit to last token,
queueing included (what its client saw); time to first token includes
queueing too. Greedy tokens are compared with each policy's N = 1 run.
"""
from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from .bench import agreement
from .calibration import Calibration
from .engine import OffloadedLM
from .policies import get_policy
from .quant.copy import QUANT_DIR
from .service.batcher import Batcher, Event, Job
from .service.sampling import Sampling


@dataclass
class ConcurrencyRun:
    policy: str
    concurrency: int
    tokens_per_s: float  # aggregate
    request_tokens_per_s: float  # mean over requests
    ttft_s: float  # mean, queueing included
    ttft_p90_s: float
    mean_batch: float  # rows per decode step
    step_experts: float  # distinct experts a decode step runs, over all its MoE layers: what a CPU step costs
    new_tokens: int
    seconds: float
    threads: int | None = None  # the engine's torch threads for its most frequent batch size
    same_tokens: float | None = None  # vs this policy's concurrency-1 run
    reads_per_token: float = 0.0  # experts read from disk per new token (prefills included, placement not)
    waiting: float = 0.0  # share of the run's wall time the engine thread waited for expert reads
    disk_busy: float = 0.0  # share of the run's wall time at least one expert read was under way
    bound_tokens_per_s: float = 0.0  # if reads and the rest overlapped perfectly: tokens / max(disk busy, not waiting)
    tokens: list[list[int]] = field(default_factory=list, repr=False)

    def to_json(self) -> dict:
        out = dict(self.__dict__)
        out.pop("tokens")
        return out


def run_concurrent(root: str | Path, policy: str, cache_ratio: float, prompts: list[list[int]],
                   max_new_tokens: int, concurrency: int, calibration: Calibration | None, device: str = "cpu",
                   host_ratio: float | None = None, max_batch: int = 8, threads: int | None = None,
                   expert_dtype: str = "native", quant_dir: Path = QUANT_DIR) -> ConcurrencyRun:
    lm = OffloadedLM.load(root, get_policy(policy, calibration), cache_ratio=cache_ratio, device=device,
                          host_ratio=host_ratio, expert_dtype=expert_dtype, quant_dir=quant_dir)
    batcher = Batcher(lm, max_batch=max_batch, max_waiting=max(64, concurrency), threads=threads)
    results: list[tuple[list[int], float, float] | None] = [None] * len(prompts)
    errors: list[BaseException] = []
    nxt = iter(range(len(prompts)))
    lock = threading.Lock()

    def client() -> None:
        while True:
            with lock:
                i = next(nxt, None)
            if i is None:
                return
            tokens: list[int] = []
            done = threading.Event()
            end: list[Event] = []

            def emit(ev: Event, tokens: list[int] = tokens, done: threading.Event = done,
                     end: list[Event] = end) -> None:
                if ev.token is not None:
                    tokens.append(ev.token)
                if ev.finish is not None:
                    end.append(ev)
                    done.set()

            ids, _ = lm.fit_prompt(prompts[i], max_new_tokens, truncate=True)
            t0 = time.perf_counter()
            batcher.submit(Job(ids, max_new_tokens, Sampling(), emit))
            done.wait()
            if end[0].finish == "error":
                errors.append(end[0].error or RuntimeError("request failed"))
                return
            results[i] = (tokens, end[0].stats.ttft_s, time.perf_counter() - t0)

    store = lm.runtime.store
    loads0, stall0, busy0 = store.stats.loads, lm.runtime.stall_s, store.stats.busy_s  # after the placement
    try:
        t0 = time.perf_counter()
        threads = [threading.Thread(target=client, name=f"client-{c}") for c in range(concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        stats = batcher.stats
        step_experts = lm.runtime.counters.step_experts / max(1, stats.steps)
        chosen = batcher.threads.usual
        reads, stalled = store.stats.loads - loads0, lm.runtime.stall_s - stall0
        busy = store.stats.busy_s - busy0
    finally:
        batcher.close()
        lm.close()
    if errors:
        raise RuntimeError(f"{policy} at concurrency {concurrency}: {errors[0]}") from errors[0]
    done = [r for r in results if r is not None]
    n = sum(len(t) for t, _, _ in done)
    ttfts = sorted(ttft for _, ttft, _ in done)
    return ConcurrencyRun(policy, concurrency, n / wall, statistics.mean(len(t) / s for t, _, s in done),
                          statistics.mean(ttfts), ttfts[min(len(ttfts) - 1, int(0.9 * len(ttfts)))],
                          stats.rows_stepped / max(1, stats.steps), step_experts, n, wall, chosen,
                          reads_per_token=reads / max(1, n), waiting=stalled / wall, disk_busy=busy / wall,
                          bound_tokens_per_s=n / max(busy, wall - stalled, 1e-9), tokens=[t for t, _, _ in done])


def bench_concurrency(root: str | Path, policies: list[str], cache_ratio: float, prompts: list[list[int]],
                      max_new_tokens: int, levels: list[int], calibration: Calibration | None, device: str = "cpu",
                      host_ratio: float | None = None, log: Callable[[str], None] = lambda line: None,
                      max_batch: int = 8, repeat: int = 1, threads: int | None = None,
                      expert_dtype: str = "native", quant_dir: Path = QUANT_DIR) -> list[ConcurrencyRun]:
    """Each policy at each level; with `repeat`, every (policy, level) run that many times, the rounds
    interleaved (a slow minute of a noisy box falls on all of them), and each figure the median of its runs."""
    torch.manual_seed(0)
    # a throwaway run first: the process's first model pays one-time costs (kernels, allocator, page tables)
    run_concurrent(root, policies[0], 1.0, prompts[:2], min(8, max_new_tokens), 1, calibration, device, host_ratio,
                   threads=threads, expert_dtype=expert_dtype, quant_dir=quant_dir)
    samples: dict[tuple[str, int], list[ConcurrencyRun]] = {}
    for round_ in range(max(1, repeat)):
        for policy in policies:
            for level in levels:
                run = run_concurrent(root, policy, cache_ratio, prompts, max_new_tokens, level, calibration, device,
                                     host_ratio, max_batch, threads, expert_dtype, quant_dir)
                samples.setdefault((policy, level), []).append(run)
                log(f"{policy} x{level}" + (f" (round {round_ + 1} of {repeat})" if repeat > 1 else "")
                    + f": {run.tokens_per_s:.2f} tokens/s aggregate, mean batch {run.mean_batch:.2f}, "
                    f"{run.threads} thread(s)")
    runs: list[ConcurrencyRun] = []
    for policy in policies:
        first: ConcurrencyRun | None = None
        for level in levels:
            run = _median(samples[(policy, level)])
            first = first or run
            run.same_tokens = min(agreement(first.tokens, r.tokens) for r in samples[(policy, level)])
            runs.append(run)
    return runs


def _median(runs: list[ConcurrencyRun]) -> ConcurrencyRun:
    """Every figure the median of the runs; the tokens of the first (each run's are compared to it)."""
    if len(runs) == 1:
        return runs[0]
    med = {f: statistics.median(getattr(r, f) for r in runs)
           for f in ("tokens_per_s", "request_tokens_per_s", "ttft_s", "ttft_p90_s", "mean_batch", "step_experts",
                     "seconds", "reads_per_token", "waiting", "disk_busy", "bound_tokens_per_s")}
    chosen = [r.threads for r in runs if r.threads is not None]
    return replace(runs[0], **med, threads=statistics.mode(chosen) if chosen else None, tokens=runs[0].tokens)


def format_concurrency(runs: list[ConcurrencyRun], model: str, cache_ratio: float, prompts: int,
                       max_new_tokens: int, device: str, repeat: int = 1) -> str:
    medians = f", medians of {repeat} interleaved runs" if repeat > 1 else ""
    lines = [f"model {model} on {device}: cache ratio {cache_ratio:g}, {prompts} prompts x {max_new_tokens} new "
             f"tokens, N clients at once (the serving engine: decode steps batched where the policy allows){medians}",
             f"{'policy':<16}{'N':>3}{'agg tok/s':>10}{'x N=1':>7}{'req tok/s':>10}{'ttft s':>8}{'p90 s':>7}"
             f"{'batch':>7}{'exp/step':>9}{'reads/tok':>10}{'wait':>6}{'disk':>6}{'bound':>8}{'thr':>4}{'same tok':>9}"]
    lines.append("-" * len(lines[-1]))
    base: dict[str, float] = {}
    for r in runs:
        base.setdefault(r.policy, r.tokens_per_s)
        same = f"{r.same_tokens:.3f}" if r.same_tokens is not None else "-"
        lines.append(f"{r.policy[:16]:<16}{r.concurrency:>3}{r.tokens_per_s:>10.2f}"
                     f"{r.tokens_per_s / base[r.policy]:>6.2f}x{r.request_tokens_per_s:>10.2f}{r.ttft_s:>8.3f}"
                     f"{r.ttft_p90_s:>7.3f}{r.mean_batch:>7.2f}{r.step_experts:>9.1f}{r.reads_per_token:>10.2f}"
                     f"{r.waiting:>6.0%}{r.disk_busy:>6.0%}{r.bound_tokens_per_s:>8.1f}{r.threads or '-':>4}"
                     f"{same:>9}")
    lines.append("exp/step: distinct experts a decode step runs over its MoE layers; rows of a batch share few, and "
                 "on a CPU each one is a pass over its weights; reads/tok: experts read from disk per new token; "
                 "wait: share of the run the engine waited for those reads; disk: share of the run a read was under "
                 "way; bound: tokens/s had every read overlapped the engine's other work (tokens over the larger of "
                 "the disk's busy time and the run less its waits: what better read scheduling alone could "
                 "reach, the same reads at the same pace); thr: the engine's torch threads for its "
                 "usual batch size (measured per batch size on its first steps unless --threads; the most common over "
                 "the runs)")
    return "\n".join(lines)
