"""The MoE engine against plain transformers on tiny checkpoints of every supported architecture."""
from __future__ import annotations

import json
import math
import shutil
import threading
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

from inspector.moe.checkpoint import CheckpointError, MoECheckpoint
from inspector.moe.engine import BudgetTooSmall, ContextTooLong, OffloadedLM
from inspector.moe.offline.collect import calibrate
from inspector.moe.policies import get_policy
from inspector.runtime.memory import DeviceBudget, OverBudget

from .moe_models import save_tiny, tiny_configs

ARCHS = sorted(tiny_configs())
PROMPT = [0, 5, 17, 60, 3, 42, 8, 77, 11, 30]


CAL_PROMPTS = [[0, 5, 17, 60, 3, 42, 8, 77], [0, 33, 34, 35, 90, 4, 4, 4, 61], [0, 7, 8, 9, 10, 11, 12, 13],
               [0, 50, 51, 52, 53, 20, 21, 22], [0, 88, 14, 2, 70, 6]]
EXACT_POLICIES = ["ondemand", "lru", "fiddler", "moesys", "daop", "fmoe", "firm", "firm:parts=2", "duoserve"]
PREDICTING = {"daop", "fmoe", "firm", "firm:parts=2", "duoserve"}


class Listener:
    """A request's listener for the serving engine: the tokens it heard, its end events, and when it ended."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.ends: list = []
        self.done = threading.Event()

    def __call__(self, ev) -> None:  # noqa: ANN001 - a batcher Event (the service is imported by its tests)
        if ev.token is not None:
            self.tokens.append(ev.token)
        if ev.finish is not None:
            self.ends.append(ev)
            self.done.set()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("moe")
    return {name: save_tiny(name, root) for name in ARCHS}


@pytest.fixture(scope="module")
def calibrations(checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Each checkpoint's calibration (counts, routing trace) on prompts other than the test's."""
    cache = tmp_path_factory.mktemp("moe-cal")
    return {name: calibrate(path, CAL_PROMPTS, new_tokens=10, cache_dir=cache) for name, path in checkpoints.items()}


def plain_greedy(root: Path, n: int) -> tuple[list[int], torch.Tensor]:
    model = AutoModelForCausalLM.from_pretrained(root).eval()
    ids = torch.tensor([PROMPT])
    with torch.inference_mode():
        tokens = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=n,
                                min_new_tokens=n)[0, len(PROMPT):]  # the prompt's BOS is also the pad id
        logits = model(ids).logits
    return tokens.tolist(), logits


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("policy", EXACT_POLICIES)
def test_exact_mode_matches_plain_transformers(checkpoints: dict[str, Path], calibrations: dict, arch: str,
                                               policy: str) -> None:
    want_tokens, want_logits = plain_greedy(checkpoints[arch], 16)
    lm = OffloadedLM.load(checkpoints[arch], get_policy(policy, calibrations[arch]), cache_ratio=0.25)
    got = list(lm.generate(PROMPT, 16))
    assert [t for t, _ in got] == want_tokens
    with torch.inference_mode():
        logits = lm.model(torch.tensor([PROMPT])).logits
    torch.testing.assert_close(logits, want_logits, rtol=1e-5, atol=1e-5)  # fp32 rounding at most
    stats = got[-1][1]
    assert stats.tokens == 16 and stats.expert_loads > 0
    if policy in ("ondemand", "duoserve", "moesys"):  # nothing stays resident
        assert all(n == 0 for n in stats.residency.values())
    else:
        assert all(n <= 2 for n in stats.residency.values())
    if policy == "ondemand":
        assert stats.hit_rate == 0.0
    elif policy != "duoserve":
        assert 0.0 < stats.hit_rate < 1.0
    if policy == "daop":  # predicted every next layer, prefetched what was away, judged against the real routing
        predicted_layers = len(lm.ckpt.moe_layers) - 1  # every MoE layer after the first (DeepSeek: one is dense)
        assert stats.predicted == 15 * predicted_layers * 2
        assert stats.prefetches > 0 and stats.prediction_accuracy is not None
    elif policy in PREDICTING:
        assert stats.predicted > 0 and stats.prediction_accuracy is not None and stats.utilisation is not None
    else:
        assert stats.predicted == 0
    if policy == "duoserve":
        assert stats.pipelined > 0
    assert stats.peak_pool_bytes <= lm.runtime.store.ledger.capacity
    lm.close()
    assert lm.runtime.store.ledger.used == 0


def test_the_pool_is_a_ledger_of_the_shared_device_budget(checkpoints: dict[str, Path]) -> None:
    ckpt = MoECheckpoint.open(checkpoints["mixtral"])
    per_expert = max(s.nbytes for s in ckpt.experts.values())
    budget = DeviceBudget("cpu", 64 * 2**20)
    budget.open("inspection-pool", 32 * 2**20)  # the inspection experts' pool beside it
    lm = OffloadedLM.load(checkpoints["mixtral"], "lru", cache_ratio=0.5, budget=budget)
    pool = lm.runtime.store.ledger
    assert pool.capacity == (4 * 3 + 1) * per_expert  # the slots, and a buffer for a miss
    assert set(budget.ledgers()) == {"inspection-pool", "moe-pool"}
    list(lm.generate(PROMPT, 4))
    assert 0 < pool.used <= pool.capacity
    lm.close()
    assert pool.used == 0 and set(budget.ledgers()) == {"inspection-pool"}
    small = DeviceBudget("cpu", 33 * 2**20)
    small.open("inspection-pool", 33 * 2**20 - 100_000)  # the inspection line took nearly all of it
    with pytest.raises(OverBudget, match="moe-pool wants"):
        OffloadedLM.load(checkpoints["mixtral"], "lru", cache_ratio=0.5, budget=small)


def test_sharded_and_fused_checkpoints_load_the_same_experts(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    sharded = save_tiny("qwen2_moe", tmp_path / "sharded", max_shard_size="20KB")
    assert (sharded / "model.safetensors.index.json").is_file()
    want, _ = plain_greedy(checkpoints["qwen2_moe"], 8)
    assert [t for t, _ in OffloadedLM.load(sharded, "lru", 0.25).generate(PROMPT, 8)] == want
    # fused 3D expert tensors on disk (transformers' in-memory layout) are sliced per expert
    model = AutoModelForCausalLM.from_pretrained(checkpoints["olmoe"])
    fused = tmp_path / "fused"
    fused.mkdir()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, fused / "model.safetensors")
    shutil.copy(checkpoints["olmoe"] / "config.json", fused / "config.json")
    assert MoECheckpoint.open(fused).experts[next(iter(MoECheckpoint.open(fused).experts))].fused_index is not None
    want, _ = plain_greedy(checkpoints["olmoe"], 8)
    assert [t for t, _ in OffloadedLM.load(fused, "lru", 0.25).generate(PROMPT, 8)] == want


def test_bad_checkpoints_and_budgets_say_what_is_wrong(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    sharded = save_tiny("mixtral", tmp_path, max_shard_size="20KB")
    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    victim = sorted(set(index["weight_map"].values()))[1]
    (sharded / victim).unlink()
    with pytest.raises(CheckpointError, match=f"shards {victim} .* missing"):
        MoECheckpoint.open(sharded)
    other = tmp_path / "llama"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4}))
    with pytest.raises(CheckpointError, match="'llama' is not supported; supported: deepseek_v2, deepseek_v3, mixtral"):
        MoECheckpoint.open(other)
    with pytest.raises(CheckpointError, match="no config.json"):
        MoECheckpoint.open(tmp_path / "nowhere")
    with pytest.raises(BudgetTooSmall, match="smallest ratio that works is 0.250"):
        OffloadedLM.load(checkpoints["mixtral"], "lru", cache_ratio=0.1)


def test_a_config_transformers_rejects_is_reported_as_such(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "mixtral", "hidden_size": ')  # cut off mid-copy
    with pytest.raises(CheckpointError, match="config.json cannot be read by transformers"):
        MoECheckpoint.open(tmp_path)


def test_a_prompt_over_the_context_is_refused_or_truncated_and_said_so(checkpoints: dict[str, Path]) -> None:
    lm = OffloadedLM.load(checkpoints["qwen3_moe"], "lru", 0.25)
    long_prompt = [(i * 7) % 90 + 2 for i in range(125)]  # context 128: no room for 8 new tokens
    with pytest.raises(ContextTooLong, match="exceeds the model's context of 128"):
        next(lm.generate(long_prompt, 8))
    out = list(lm.generate(long_prompt, 8, truncate=True))
    assert len(out) == 8 and out[-1][1].truncated == 5 and out[-1][1].prompt_tokens == 120
    assert [t for t, _ in out] == [t for t, _ in lm.generate(long_prompt[5:], 8)]


def test_row_kernels_choose_a_form_by_measuring_and_compute_the_same_product(checkpoints: dict[str, Path]) -> None:
    """A batched decode step's expert products go the way measured faster on this box, one row included (paired
    with itself); every form computes the same product, and a lone sequence never uses them: it stays exact
    with every form switched on."""
    from torch.nn import functional as F

    from inspector.moe.kernels import RowKernels

    g = torch.Generator().manual_seed(0)
    weights = [torch.randn(96, 32, generator=g) for _ in range(6)] + [torch.randn(32, 48, generator=g)]
    kernels = RowKernels()
    ratios = kernels.tune(weights, range(1, 5))
    assert set(ratios) == {(r, o, i) for r in (1, 2, 3, 4) for o, i in ((96, 32), (32, 48))}
    assert all(r > 0 for r in ratios.values())
    assert set(kernels.flip) == set(ratios)
    for rows in (1, 3):
        x = torch.randn(rows, 32, generator=g)
        for flip in (False, True):
            kernels.flip[(rows, 96, 32)] = flip
            got = kernels.linear(x, weights[0])
            assert got.shape == (rows, 96)
            assert torch.allclose(got, F.linear(x, weights[0]), atol=1e-5)
    lm = OffloadedLM.load(checkpoints["mixtral"], "lru", 0.5)
    lm.tune_batched(4)
    lm.kernels.flip = dict.fromkeys(lm.kernels.flip, True)
    want_tokens, want_logits = plain_greedy(checkpoints["mixtral"], 8)
    assert [t for t, _ in lm.generate(PROMPT, 8)] == want_tokens
    with torch.inference_mode():
        torch.testing.assert_close(lm.model(torch.tensor([PROMPT])).logits, want_logits, rtol=1e-5, atol=1e-5)
    lm.close()


PROMPTS = [[0, 5, 17, 60, 3], [0, 33, 34, 35, 90, 4, 4, 4, 61, 9, 12], [0, 7, 8], [0, 88, 14, 2, 70, 6, 50]]


@pytest.mark.parametrize("arch", ARCHS)
def test_prompts_prefilled_together_answer_as_each_alone(checkpoints: dict[str, Path], calibrations: dict,
                                                        arch: str) -> None:
    """Prompts of unequal length prefilled in one pass (left-padded, padding masked and routed to no expert),
    then decoded as a batch: every prompt's greedy tokens are its tokens alone."""
    from inspector.moe.service.kvbatch import KVBatch, batchable

    lm = OffloadedLM.load(checkpoints[arch], get_policy("daop", calibrations[arch]), cache_ratio=0.5)
    alone = [[t for t, _ in lm.generate(p, 8)] for p in PROMPTS]
    ids = [lm.fit_prompt(p, 8)[0] for p in PROMPTS]
    logits, cache, pads = lm.prefill_many(ids)
    if not batchable(cache):  # sliding-window layers: the serving engine prefills this model one at a time
        pytest.skip(f"{arch}'s cache cannot be padded")
    assert pads == [6, 0, 8, 4]
    kv = KVBatch()
    kv.join(cache, pads)
    loads = lm.runtime.store.stats.loads
    together = [[int(t)] for t in logits.argmax(-1)]
    for _ in range(7):
        mask, positions = kv.step_inputs()
        tokens = torch.tensor([[row[-1]] for row in together])
        for row, t in zip(together, lm.step(tokens, kv.cache, mask, positions).argmax(-1).tolist()):
            row.append(t)
    assert together == alone
    assert lm.runtime.store.stats.loads > loads
    lm.close()


def test_the_serving_engine_prefills_waiting_requests_in_one_pass(checkpoints: dict[str, Path],
                                                                  calibrations: dict) -> None:
    """Requests waiting together share a prefill; one that makes a shared prefill fail fails alone."""

    from inspector.moe.service.batcher import Batcher, Job
    from inspector.moe.service.sampling import Sampling

    lm = OffloadedLM.load(checkpoints["mixtral"], get_policy("daop", calibrations["mixtral"]), cache_ratio=0.5)
    alone = [[t for t, _ in lm.generate(p, 6)] for p in PROMPTS]
    batcher = Batcher(lm, max_batch=4)

    def ask(prompt: torch.Tensor) -> tuple[Job, Listener]:
        heard = Listener()
        return Job(prompt, 6, Sampling(), heard), heard

    first, heard = ask(lm.fit_prompt(PROMPTS[0], 6)[0])  # the first prefill runs alone: it learns the cache pads
    batcher.submit(first)
    assert heard.done.wait(60) and heard.tokens == alone[0]
    asks = [ask(lm.fit_prompt(p, 6)[0]) for p in PROMPTS]
    broken = ask(torch.tensor([[0, 5, 10 ** 6]]))  # a token the vocabulary lacks: its prefill raises
    with batcher._cond:  # all waiting before the engine looks: they share one prefill
        for job, _ in [*asks[:2], broken, *asks[2:]]:
            batcher.submit(job)
    for _, heard in asks:
        assert heard.done.wait(60) and heard.ends[0].finish == "length"
    assert [heard.tokens for _, heard in asks] == alone
    assert broken[1].done.wait(60) and broken[1].ends[0].finish == "error"
    stats = batcher.stats
    assert stats.requests == 6 and stats.failed == 1
    assert stats.prefills == 1 + 4  # the lone first; the five together failed, then each alone (one failing)
    batcher.close()
    lm.close()


def test_a_fault_in_the_engine_code_ends_its_requests_not_the_engine(checkpoints: dict[str, Path],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault between the model's calls (here: choosing a token raises once) ends the requests the engine held,
    each with one error; the engine thread lives on and serves the next request exactly."""

    from inspector.moe.service import batcher as batcher_mod
    from inspector.moe.service.batcher import Batcher, Job
    from inspector.moe.service.sampling import Sampling

    lm = OffloadedLM.load(checkpoints["mixtral"], "lru", cache_ratio=0.5)
    alone = [t for t, _ in lm.generate(PROMPTS[0], 5)]
    real, calls = batcher_mod.next_token, []

    def faulty(*args: object) -> int:
        calls.append(1)
        if len(calls) == 3:  # mid-decode, after two tokens were sent
            raise RuntimeError("a fault in the engine's own code")
        return real(*args)

    monkeypatch.setattr(batcher_mod, "next_token", faulty)
    batcher = Batcher(lm, max_batch=2)

    def ask() -> Listener:
        heard = Listener()
        batcher.submit(Job(lm.fit_prompt(PROMPTS[0], 5)[0], 5, Sampling(), heard))
        return heard

    heard = ask()
    assert heard.done.wait(60) and [e.finish for e in heard.ends] == ["error"]
    assert "own code" in str(heard.ends[0].error)
    assert heard.tokens == alone[:2] and batcher.alive and batcher.stats.failed == 1
    heard = ask()
    assert heard.done.wait(60) and [e.finish for e in heard.ends] == ["length"] and heard.tokens == alone
    batcher.close()
    time.sleep(0.05)
    assert [e.finish for e in heard.ends] == ["length"]  # ended once, not again as cancelled at close
    lm.close()


def test_a_decode_step_computes_what_is_in_memory_first_and_adds_as_the_loop_does(tmp_path: Path) -> None:
    """Experts are computed in the order their weights are ready (in memory before those still to read), and
    whatever that order, a step's output is bit for bit the ascending loop's: with four picks per token, where
    the order of the adds would show, alone and in a batch."""
    from transformers import OlmoeConfig

    from inspector.moe.offloaded import OffloadedExperts
    from inspector.moe.service.kvbatch import KVBatch

    from .moe_models import COMMON

    root = save_tiny("olmoe", tmp_path, config=OlmoeConfig(**COMMON, intermediate_size=24, num_experts=8,
                                                            num_experts_per_tok=4))
    lm = OffloadedLM.load(root, "lru", cache_ratio=0.5)
    list(lm.generate(PROMPT, 2))  # misses fill the pool
    layer = lm.runtime.moe_layers[0]
    resident = sorted(k.expert for k in lm.runtime.resident_in(layer))
    away = sorted(set(range(8)) - set(resident))
    assert lm.runtime.next_expert(layer, sorted([away[0], resident[-1]])) == resident[-1]
    assert lm.runtime.next_expert(layer, away[:2]) == away[0]  # nothing in memory, nothing reading: the lowest
    lm.close()

    def outputs(order: str) -> tuple[list[int], list[list[int]], list[torch.Tensor]]:
        lm = OffloadedLM.load(root, "lru", cache_ratio=1.0)
        if order == "reversed":
            lm.runtime.next_expert = lambda layer, remaining: remaining[-1]
        seen: list[torch.Tensor] = []
        for module in lm.model.modules():
            if isinstance(module, OffloadedExperts):
                module.register_forward_hook(lambda m, args, out: seen.append(out.clone()))
        alone = [t for t, _ in lm.generate(PROMPT, 6)]
        logits, cache, pads = lm.prefill_many([lm.fit_prompt(p, 4)[0] for p in PROMPTS[:3]])
        kv = KVBatch()
        kv.join(cache, pads)
        rows = [[int(t)] for t in logits.argmax(-1)]
        for _ in range(3):
            mask, positions = kv.step_inputs()
            step = lm.step(torch.tensor([[r[-1]] for r in rows]), kv.cache, mask, positions).argmax(-1)
            for r, t in zip(rows, step.tolist()):
                r.append(t)
        lm.close()
        return alone, rows, seen

    ascending, backwards = outputs("ascending"), outputs("reversed")
    assert ascending[:2] == backwards[:2]
    assert len(ascending[2]) == len(backwards[2]) > 0
    assert all(torch.equal(a, b) for a, b in zip(ascending[2], backwards[2]))


def test_a_measured_thread_count_is_measured_again_once_it_is_old() -> None:
    """What else runs on the box changes over a server's life: a choice older than `remeasure_s`, or whose steps
    have slowed well past its trials, is tried again on its row count's next steps (the old choice still shown
    meanwhile), and may change; never when switched off."""
    from inspector.moe.service.threads import ComputeThreads

    before = torch.get_num_threads()
    now = [0.0]

    def steps(timing: ComputeThreads, plan: list[tuple[int, float]]) -> None:
        for count, seconds in plan:
            timing.begin_step(4)
            assert torch.get_num_threads() == count
            time.sleep(seconds)
            timing.end_step(4)

    with pytest.raises(ValueError, match="0: never"):
        ComputeThreads([1, 2], remeasure_s=-1)
    timing = ComputeThreads([1, 2], trials=1, remeasure_s=60, clock=lambda: now[0])
    never = ComputeThreads([1, 2], trials=1, remeasure_s=0, clock=lambda: now[0])
    for t in (timing, never):  # first at each count untimed, then one timed step: two is slower now
        steps(t, [(1, 0.0), (1, 0.0), (2, 0.0), (2, 0.15)])
        assert t.chosen == {4: 1} and t.trying == [] and t.remeasured == 0
    now[0] = 59.0
    steps(timing, [(1, 0.0)])
    assert timing.trying == [] and timing.chosen == {4: 1}
    now[0] = 60.0  # old enough: the counts in turn again, the old choice shown until the new one is made
    steps(timing, [(1, 0.15)])  # still at one thread: this step is timed (no change of count before it)
    assert timing.trying == [4] and timing.chosen == {4: 1} and timing.remeasured == 1
    steps(timing, [(2, 0.0), (2, 0.0)])  # the change to two is not timed; the next step is
    assert timing.chosen == {4: 2} and timing.trying == [] and timing.step_ms[4][2] < timing.step_ms[4][1]
    now[0] = 100.0
    steps(timing, [(2, 0.0)])  # the new choice is 40 s old: kept
    assert timing.trying == []
    # its steps become far slower than when it was chosen (a process beside took a core): tried again at once,
    # once the median of the last 2 x trials + 1 steps says so (one slow step is not enough)
    steps(timing, [(2, 0.02)])
    assert timing.trying == []
    steps(timing, [(2, 0.02), (1, 0.0)])
    assert timing.trying == [4] and timing.remeasured == 2
    now[0] = 1e6
    steps(never, [(1, 0.02)] * 4)
    assert never.trying == [] and never.remeasured == 0 and never.remeasure_s is None
    torch.set_num_threads(before)


def test_the_serving_engine_measures_its_thread_count_on_its_own_steps(checkpoints: dict[str, Path]) -> None:
    """Without a count from the operator the engine tries 1, 2, ... cores on its first decode steps of each batch
    size, keeps the count whose steps took least, and runs every later step of that size with it; the tokens are
    the prompt's alone.
    A count given is used from the first step, and the process's count is back as it was when the engine ends."""
    from inspector.moe.service.batcher import Batcher, Job
    from inspector.moe.service.sampling import Sampling
    from inspector.moe.service.threads import BLOCK, ComputeThreads, candidates

    assert candidates(2) == [1, 2] and candidates(6) == [1, 2, 4, 6] and candidates(1) == [1]
    with pytest.raises(ValueError, match="at least 1"):
        ComputeThreads([0])
    before = torch.get_num_threads()
    timing = ComputeThreads([1, 2], trials=1)  # a step's waits for reads are no thread count's doing
    for count, first, sleep, waited in ((1, 0.3, 0.2, 0.2), (2, 0.0, 0.1, 0.0)):
        for seconds, wait in ((first, 0.0), (sleep, waited)):  # the first step at a new count is not timed
            timing.begin_step(4)
            assert torch.get_num_threads() == count
            time.sleep(seconds)
            timing.end_step(4, waited=wait)
    assert timing.chosen == {4: 1} and timing.step_ms[4][1] < timing.step_ms[4][2]
    torch.set_num_threads(before)
    lm = OffloadedLM.load(checkpoints["mixtral"], "lru", cache_ratio=0.5)
    new = 60  # decode steps enough to try every candidate of a 16-core box and run on with the choice
    alone = [t for t, _ in lm.generate(PROMPTS[1], new)]
    seen: list[int] = []
    lm.model.register_forward_pre_hook(lambda m, args, kwargs: seen.append(torch.get_num_threads()), with_kwargs=True)

    def run(batcher: Batcher) -> list[int]:
        heard = Listener()
        batcher.submit(Job(lm.fit_prompt(PROMPTS[1], new)[0], new, Sampling(), heard))
        assert heard.done.wait(120)
        return heard.tokens

    measured = Batcher(lm, max_batch=2, threads=None, remeasure_s=0)  # the first choice, kept for this short run
    options = measured.threads.options
    assert options == candidates()
    assert run(measured) == alone
    chosen = measured.threads.chosen.get(1)  # one request: every decode step had one row
    assert chosen in options and measured.threads.usual == chosen and measured.threads.steps[1] == new - 1
    if len(options) > 1:  # every count tried as often before the choice; the rest of the steps ran with it
        per = measured.threads.trials
        trials = len(options) * (per + math.ceil(per / BLOCK))  # each run of timed steps follows an untimed one
        step_ms = measured.threads.step_ms
        assert list(step_ms) == [1] and sorted(step_ms[1]) == options and all(v > 0 for v in step_ms[1].values())
        decode = seen[1:]  # the first forward is the prefill
        assert sorted(set(decode[:trials])) == options and set(decode[trials:]) == {chosen}
    measured.close()
    seen.clear()
    given = Batcher(lm, max_batch=2, threads=1)
    assert run(given) == alone and given.threads.given == given.threads.usual == 1 and set(seen) == {1}
    given.close()
    probe: list[int] = []
    t = threading.Thread(target=lambda: probe.append(torch.get_num_threads()))
    t.start()
    t.join()
    assert probe == [before]  # a new thread (the next engine) starts from the process's count
    lm.close()
