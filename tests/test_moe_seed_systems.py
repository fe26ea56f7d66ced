"""fMoE, FIRM-MoE, DuoServe-MoE and MoESys on the real runtime, and the mechanics they brought: sub-expert reads,
the prefill pipeline, the expert-map store, Meeting-of-Layers, HEOP, the DuoServe predictor, DAOP's fixes."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import torch

from inspector.moe.bench import bench
from inspector.moe.calibration import RoutingTrace
from inspector.moe.checkpoint import ExpertKey, MoECheckpoint
from inspector.moe.engine import OffloadedLM, layer_slots
from inspector.moe.expert_maps import ExpertMapStore
from inspector.moe.offline.collect import calibrate
from inspector.moe.offline.predictor import PredictorRecipe, load_or_train, train_predictor
from inspector.moe.policies import DAOP, FIRM, get_policy, parse_spec
from inspector.moe.policies.heop import HEOP

from .moe_models import save_tiny

PROMPTS = [[0, 5, 17, 60, 3, 42, 8, 77, 11, 30, 12, 19, 44, 2, 71, 9], [0, 33, 34, 35, 90, 4, 4, 4, 61],
           [0, 7, 8, 9, 10, 11, 12, 13], [0, 50, 51, 52, 53, 20, 21, 22, 23, 24]]


@pytest.fixture(scope="module")
def mixtral(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny("mixtral", tmp_path_factory.mktemp("seed-systems"))


@pytest.fixture(scope="module")
def cal(mixtral: Path, tmp_path_factory: pytest.TempPathFactory):
    return calibrate(mixtral, PROMPTS, new_tokens=12, cache_dir=tmp_path_factory.mktemp("cal"))


def test_calibration_records_the_routing_trace_and_caches_it(mixtral: Path, cal, tmp_path: Path) -> None:
    trace = cal.trace
    assert trace.steps == 4 * 11 and trace.probs.shape == (44, 3, 8) and trace.picks.shape == (44, 3, 2)
    assert trace.embeddings.shape == (4, 32) and trace.step_seq.tolist() == sum(([i] * 11 for i in range(4)), [])
    torch.testing.assert_close(trace.probs.float().sum(-1), torch.ones(44, 3), atol=2e-3, rtol=0)
    for layer in range(3):  # the counts are the trace's picks
        assert cal.counts[layer] == torch.bincount(trace.picks[:, layer].long().flatten(), minlength=8).tolist()
    again = calibrate(mixtral, PROMPTS, new_tokens=12, cache_dir=cal.path.parent)
    assert torch.equal(again.trace.picks, trace.picks) and again.path == cal.path


# -- the runtime's new mechanics ------------------------------------------------------------------------------

def test_a_sub_expert_prefetch_reads_n_projections_and_completes_exactly_when_used(mixtral: Path) -> None:
    lm = OffloadedLM.load(mixtral, FIRM(parts=1), cache_ratio=0.25)
    rt, store = lm.runtime, lm.runtime.store
    key = next(ExpertKey(1, e) for e in range(8) if not rt.is_resident(ExpertKey(1, e)))
    whole = store.load(key)
    before = store.stats.bytes_read
    rt.prefetch(key)
    for future in list(rt._inflight.values()):
        future.result()
    staged = rt._staged[key]
    gate_bytes = whole.gate_up.numel() * whole.gate_up.element_size() // 2
    assert staged.landed == frozenset({"gate"}) and store.stats.bytes_read - before == gate_bytes
    w = rt.acquire(key)  # gate/up now, down in the background: compute waits only for what it needs
    w.wait()
    assert torch.equal(w.gate_up, whole.gate_up) and torch.equal(w.down, whole.down)
    assert store.stats.bytes_read - before == whole.nbytes  # each projection read once
    rt.release(key)
    lm.close()
    assert store.ledger.used == 0


def test_a_wrong_sub_expert_guess_costs_its_part_and_is_counted_unused(mixtral: Path) -> None:
    lm = OffloadedLM.load(mixtral, FIRM(parts=2), cache_ratio=0.25)
    rt, store = lm.runtime, lm.runtime.store
    key = next(ExpertKey(2, e) for e in range(8) if not rt.is_resident(ExpertKey(2, e)))
    before, parts = store.stats.bytes_read, store.stats.part_reads
    rt.prefetch(key)
    for future in list(rt._inflight.values()):
        future.result()
    rt.layer_done(2, torch.zeros(1, 32))  # the layer passed without it
    assert store.stats.part_reads - parts == 2 and rt.counters.prefetch_unused == 1
    assert store.stats.bytes_read - before == 2 * store.expert_bytes(key) // 3
    assert not store.holds_buffer(key)
    lm.close()


def test_the_prefill_pipeline_reads_each_used_expert_once_in_compute_order(mixtral: Path, cal) -> None:
    lm = OffloadedLM.load(mixtral, get_policy("duoserve", cal), cache_ratio=0.25)
    store = lm.runtime.store
    reads: list[ExpertKey] = []
    real = store.load_parts

    def spy(key, parts, into=None):  # noqa: ANN001, ANN202
        if into is None:
            reads.append(key)
        return real(key, parts, into)

    store.load_parts = spy
    started: dict[int, list[int]] = {}
    real_next = lm.runtime._pipeline_next

    def next_read(layer: int) -> None:  # the order reads start in (two run at once, so they may land in any)
        before = set(lm.runtime._inflight)
        real_next(layer)
        started.setdefault(layer, []).extend(k.expert for k in set(lm.runtime._inflight) - before)

    lm.runtime._pipeline_next = next_read
    out = list(lm.generate(PROMPTS[0], 1))  # prefill only
    assert started and all(order == sorted(order) for order in started.values())  # compute order: ascending
    used = {layer: [e for e in range(8) if lm.runtime.activity[layer][e] > 0] for layer in range(3)}
    wanted = [ExpertKey(layer, e) for layer in range(3) for e in used[layer]]
    assert Counter(k for k in reads if k in set(wanted)) == Counter(wanted)  # each used expert read exactly once
    for layer in range(3):
        assert sorted(k.expert for k in reads if k.layer == layer and k.expert in used[layer]) == used[layer]
    stats = out[-1][1]
    # layer 0's experts are read by the pipeline; a later layer's first one while the layer before finishes
    # (its gate on this layer's hidden states names them: a wrong one is a wasted read, counted unused)
    assert len(reads) == len(wanted) + stats.prefetch_unused and stats.prefetch_unused <= 2
    assert stats.pipelined + stats.prefetch_used == len(wanted) and stats.hits == stats.prefetch_used
    assert stats.pipelined >= len(used[0])
    assert store.ledger.peak <= 2 * store.expert_bytes(ExpertKey(0, 0))  # the k = 2 expert cache: never more
    lm.close()
    assert store.ledger.used == 0


# -- the expert-map store (fMoE) -----------------------------------------------------------------------------

def test_the_map_store_is_bounded_and_replaces_its_most_redundant_map() -> None:
    store = ExpertMapStore(layers=2, experts=4, dim=3, capacity=3, distance=1)
    maps = [torch.tensor([[1., 0, 0, 0], [0, 1, 0, 0]]), torch.tensor([[0., 0, 1, 0], [0, 0, 0, 1]]),
            torch.tensor([[0.25] * 4, [0.25] * 4])]
    sems = [torch.tensor([1., 0, 0]), torch.tensor([0., 1, 0]), torch.tensor([0., 0, 1])]
    for m, s in zip(maps, sems):
        store.add(m, s)
    assert len(store) == 3 and store.replaced == 0
    near = torch.tensor([[0.1, 0, 0.9, 0], [0, 0, 0.1, 0.9]])  # a near-copy of the second map
    assert store.add(near, torch.tensor([0.1, 1, 0])) == 1
    assert len(store) == 3 and store.replaced == 1
    assert torch.equal(store.maps[1], near) and torch.equal(store.maps[0], maps[0])  # the distinct ones stay
    assert store.match_semantic(torch.tensor([0., 0, 2])).index == 2
    match = store.match_trajectory(torch.tensor([[0.9, 0.1, 0, 0]]))  # layer 1's probabilities so far
    assert match.index == 0 and match.score > 0.9
    with pytest.raises(ValueError, match="capacity"):
        ExpertMapStore(2, 4, 3, capacity=0, distance=1)


def test_fmoe_builds_its_store_from_the_trace_and_updates_it_online(mixtral: Path, cal) -> None:
    pol = get_policy("fmoe:capacity=1000", cal)
    lm = OffloadedLM.load(mixtral, pol, cache_ratio=0.25)
    out = list(lm.generate(PROMPTS[0], 8))
    assert len(pol.store) == cal.trace.steps + 7  # one map per decode step that routed every layer
    assert pol.sem_map is not None and pol.sem_score > 0.99  # the prompt was a calibration prompt
    stats = out[-1][1]
    # layers 1-2 by trajectory after the layer before; layer 0 by the prompt's map at the end of the step before
    # (the first decode step's layer 0 has no step before it, the last step's guess for the next is never judged)
    assert stats.predicted == (7 * 3 - 1) * 2
    assert stats.prediction_accuracy is not None and stats.utilisation is not None
    lm.close()
    small = get_policy("fmoe:capacity=10", cal)
    lm = OffloadedLM.load(mixtral, small, cache_ratio=0.25)
    list(lm.generate(PROMPTS[1], 6))
    assert len(small.store) == 10 and small.store.replaced == cal.trace.steps + 5 - 10
    lm.close()


def test_fmoe_guesses_every_layer_up_to_its_distance_and_reads_by_p_over_layers_ahead(mixtral: Path, cal) -> None:
    plain = OffloadedLM.load(mixtral, "lru", cache_ratio=0.25)
    want = [t for t, _ in plain.generate(PROMPTS[0], 8)]
    plain.close()
    pol = get_policy("fmoe:distance=2", cal)
    lm = OffloadedLM.load(mixtral, pol, cache_ratio=0.25)
    seen: list[dict] = []
    ask = pol.lookahead
    pol.lookahead = lambda pool, layer, hidden, prefill: seen.append(ask(pool, layer, hidden, prefill)) or seen[-1]
    assert [t for t, _ in lm.generate(PROMPTS[0], 8)] == want  # exact, whatever it reads ahead
    decode = [g for g in seen if g]
    assert decode and all(len(g) == 2 for g in decode)  # layers l + 1 and l + 2, each step of 3 layers
    lm.close()
    # the order across layers: p / (l - l_now), so a sure expert two layers ahead beats an unsure one next
    pol.guide = {1: torch.tensor([0.3, 0.1, 0.0, 0.6]), 2: torch.tensor([0.9, 0.05, 0.05, 0.0])}
    pol.ahead = {1: 1, 2: 2}
    keys = [ExpertKey(1, 3), ExpertKey(1, 0), ExpertKey(2, 0), ExpertKey(2, 1)]
    assert pol.prefetch_order(None, keys) == [ExpertKey(1, 3), ExpertKey(2, 0), ExpertKey(1, 0), ExpertKey(2, 1)]


# -- FIRM-MoE: Meeting-of-Layers and HEOP -------------------------------------------------------------------

def test_mol_with_one_layer_and_top_k_candidates_is_daops_guess(mixtral: Path) -> None:
    lm = OffloadedLM.load(mixtral, FIRM(mol=True, heop=False, k=2, p=1), cache_ratio=0.25)
    rt, firm = lm.runtime, lm.runtime.policy
    daop = DAOP(predict_from=0)
    torch.manual_seed(3)
    for _ in range(5):
        h0, h1 = torch.randn(1, 32), torch.randn(1, 32)
        firm.on_decode(rt, 0, h0, [0, 1], None)
        assert firm.lookahead(rt, 0, h0, prefill=False) == {1: daop.predict(rt, 1, h0)}
        firm.on_decode(rt, 1, h1, [0, 1], None)
        assert firm.lookahead(rt, 1, h1, prefill=False) == {2: daop.predict(rt, 2, h1)}
    wide = FIRM(mol=True, heop=False, k=4, p=2)  # two voters: the intersection of their top-4
    wide.on_decode(rt, 0, h0, [0, 1], None)
    wide.on_decode(rt, 1, h1, [0, 1], None)
    (guess,) = wide.lookahead(rt, 1, h1, prefill=False).values()
    top = [set(torch.topk(rt.router_logits(2, h)[0], 4).indices.tolist()) for h in (h0, h1)]
    assert {k.expert for k in guess} == top[0] & top[1]
    lm.close()


def test_heop_finds_the_minimum_of_a_cost_landscape_per_group() -> None:
    minima = {"shallow": (2, 1), "middle": (5, 3), "deep": (7, 2)}
    heop = HEOP({g: (4, 2) for g in HEOP.GROUPS}, k_bounds=(1, 8), p_bounds=(1, 4), n_update=4, patience=2,
                steps=400)
    while not heop.done:
        for g, (k, p) in minima.items():
            gk, gp = heop.config(g)
            heop.record_loss(g, (gk - k) ** 2 + 2 * (gp - p) ** 2)
        heop.tick()
    assert {g: heop.config(g) for g in HEOP.GROUPS} == minima
    assert heop.trail and {t.group for t in heop.trail} == set(HEOP.GROUPS)
    assert heop.loss(unused=2, miss=3, hit=1) == 0.5 * 2 + 0.5 * (3 - 1)  # eq. 11 with alpha = beta = 0.5


def test_firm_searches_k_p_online_and_logs_its_trail(mixtral: Path) -> None:
    pol = get_policy("firm:heop_steps=16:n_update=4", None)  # four windows per group
    lm = OffloadedLM.load(mixtral, pol, cache_ratio=0.25)
    stats = list(lm.generate(PROMPTS[0], 20))[-1][1]
    # four windows judged in the groups with a guessed layer (a 3-layer model's shallow third is layer 0 alone,
    # which no earlier layer can vote for)
    assert pol.heop.done and len(pol.trail) == 4 * 2 and {t.group for t in pol.trail} == {"middle", "deep"}
    assert stats.utilisation is not None and stats.guessed > 0
    lm.close()


# -- DuoServe-MoE's predictor -------------------------------------------------------------------------------

def _affine_trace(steps: int = 240, layers: int = 4, experts: int = 8, seed: int = 0) -> RoutingTrace:
    """Each layer picks the previous layer's experts shifted by three: affinity says everything, popularity
    (near uniform) almost nothing."""
    g = torch.Generator().manual_seed(seed)
    picks = torch.zeros(steps, layers, 2, dtype=torch.int16)
    for n in range(steps):
        first = torch.randperm(experts, generator=g)[:2]
        for t in range(layers):
            picks[n, t] = (first + 3 * t) % experts
    probs = torch.full((steps, layers, experts), 1 / experts, dtype=torch.float16)
    return RoutingTrace(torch.randn(steps // 8, 4, generator=g), torch.arange(steps) // 8, probs, picks)


def test_the_predictor_learns_a_tiny_trace_and_beats_the_popularity_guess() -> None:
    predictor, report = train_predictor(_affine_trace(), experts=8, top_k=2, recipe=PredictorRecipe(epochs=40))
    assert report.heldout_samples > 0 and report.train_samples > report.heldout_samples
    assert report.accuracy > 0.9 and report.accuracy > report.popularity_accuracy + 0.4
    assert set(predictor.predict([[1, 5]], 1)) == {4, 0}


def test_duoserve_trains_once_and_caches_its_predictor_beside_the_calibration(mixtral: Path, cal) -> None:
    first, report = load_or_train(cal, 8, 2)
    path = next(cal.path.parent.glob(f"{cal.path.stem}.predictor-*.pt"))
    stamp = path.stat().st_mtime_ns
    again, cached = load_or_train(cal, 8, 2)
    assert path.stat().st_mtime_ns == stamp and cached == report
    state = first.state([[0, 1], [2, 3]], 2)
    assert torch.equal(again.mlp(state[None]), first.mlp(state[None]))


# -- DAOP's fixes and the policy specs ----------------------------------------------------------------------

def test_daop_predicting_from_a_later_block_makes_no_guess_before_it(mixtral: Path, cal) -> None:
    counts = {}
    for spec in ("daop:predict_from=0", "daop:predict_from=1", "daop:predict_from=2"):
        lm = OffloadedLM.load(mixtral, get_policy(spec, cal), cache_ratio=0.25)
        counts[spec] = list(lm.generate(PROMPTS[1], 12))[-1][1].predicted
        lm.close()
    # block b's hidden state guesses block b+1: from block 1 on only block 2 is guessed, from block 2 on none
    assert counts == {"daop:predict_from=0": 11 * 2 * 2, "daop:predict_from=1": 11 * 1 * 2, "daop:predict_from=2": 0}
    assert DAOP().first_predicted(32) == 4 and DAOP().first_predicted(8) == 1  # the paper's block 4 of 32


def test_leftover_slots_go_to_the_least_concentrated_layers_and_never_exceed_the_ratio(mixtral: Path, cal) -> None:
    ckpt = MoECheckpoint.open(mixtral)
    plain = layer_slots(ckpt, 0.469)  # 3.75 of 8 experts: 3 each, and 2 of the 3 leftover quarters
    assert sorted(plain.values()) == [3, 4, 4] and sum(plain.values()) == int(0.469 * 8 * 3)
    assert plain == {0: 4, 1: 4, 2: 3}  # without a calibration: the first layers
    by_cal = layer_slots(ckpt, 0.469, cal)
    cover = {layer: sum(sorted(cal.counts[layer], reverse=True)[:3]) / sum(cal.counts[layer]) for layer in range(3)}
    assert {layer for layer, n in by_cal.items() if n == 4} == set(sorted(cover, key=cover.get)[:2])
    assert layer_slots(ckpt, 0.25) == {0: 2, 1: 2, 2: 2} and layer_slots(ckpt, 1.0) == {0: 8, 1: 8, 2: 8}
    lm = OffloadedLM.load(mixtral, "lru", cache_ratio=0.469)
    list(lm.generate(PROMPTS[0], 6))
    assert {layer: len(lm.runtime.resident_in(layer)) for layer in range(3)} == plain
    lm.close()


def test_policy_specs_set_options_and_refuse_bad_ones_by_name() -> None:
    assert parse_spec("daop:predict_from=4") == ("daop", {"predict_from": 4})
    assert parse_spec("firm:parts=1:heop=false") == ("firm", {"parts": 1, "heop": False})
    assert parse_spec("daop+degrade") == ("daop", {"degrade": True})
    assert get_policy("fmoe:similar=0.5").similar == 0.5 and get_policy("firm:parts=1").name == "firm:parts=1"
    with pytest.raises(ValueError, match="unknown MoE policy 'fmo'"):
        parse_spec("fmo")
    with pytest.raises(ValueError, match="bad option 'depth=2'.*distance=1"):
        parse_spec("fmoe:depth=2")
    with pytest.raises(ValueError, match="option parts wants a int, got 'two'"):
        parse_spec("firm:parts=two")
    with pytest.raises(ValueError, match="parts must be 1, 2 or 3"):
        get_policy("firm:parts=4")


def test_bench_reports_every_seed_system_with_medians_and_exact_tokens(mixtral: Path, cal) -> None:
    policies = ["ondemand", "moesys", "daop", "fmoe", "firm", "duoserve"]
    report = bench(mixtral, policies, 0.25, PROMPTS[:2], 6, cal, repeat=2)
    doc = json.loads(json.dumps(report.to_json()))
    assert doc["repeat"] == 2 and [r["policy"] for r in doc["runs"]] == policies
    for r in doc["runs"]:
        assert r["same_tokens"] == 1.0 and r["repeats"] == 2 and r["bytes_read"] > 0, r["policy"]
        assert (r["prediction_accuracy"] is None) == (r["policy"] in ("ondemand", "moesys"))
    firm = doc["runs"][4]
    assert firm["details"]["k_p"].keys() == {"shallow", "middle", "deep"} and firm["utilisation"] is not None
    duo = doc["runs"][5]
    assert duo["details"]["predictor"]["heldout_samples"] > 0 and duo["pipelined"] > 0
    assert doc["runs"][1]["bytes_read"] > doc["runs"][0]["bytes_read"]  # MoESys reads whole layers


# -- tiers: host RAM between the pool and the disk; computing where an expert lies --------------------------

def test_a_host_tier_serves_experts_without_disk_reads_and_stays_in_its_budget(mixtral: Path) -> None:
    lm = OffloadedLM.load(mixtral, "ondemand", cache_ratio=0.25, host_ratio=1.0)
    first = list(lm.generate(PROMPTS[0], 6))
    again = list(lm.generate(PROMPTS[0], 6))
    assert [t for t, _ in again] == [t for t, _ in first]
    assert first[-1][1].bytes_read > 0 and again[-1][1].bytes_read == 0  # every expert came from host RAM
    assert again[-1][1].host_hits == again[-1][1].misses > 0
    lm.close()
    small = OffloadedLM.load(mixtral, "ondemand", cache_ratio=0.25, host_ratio=0.25)
    list(small.generate(PROMPTS[0], 6))
    host = small.runtime.store.host
    assert 0 < host.ledger.used <= host.ledger.capacity and len(host.held) <= 6  # a quarter of 24 experts
    small.close()
    assert host.ledger.used == 0
    plain = OffloadedLM.load(mixtral, "ondemand", cache_ratio=0.25)  # a CPU-only box: no host tier by default
    assert plain.runtime.store.host is None
    plain.close()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the CPU-compute path moves work off a GPU")
@pytest.mark.parametrize("policy", ["fiddler", "daop"])
def test_on_a_gpu_away_experts_compute_on_the_cpu_where_they_lie(mixtral: Path, cal, policy: str) -> None:
    lm = OffloadedLM.load(mixtral, get_policy(policy, cal), cache_ratio=0.25, device="cuda")
    stats = list(lm.generate(PROMPTS[0], 8))[-1][1]
    assert stats.host_computed > 0 and all(w.gate_up.is_cuda for w in lm.runtime.store.resident.values())
    lm.close()


def test_duoserve_holds_k_experts_in_all_through_prefill_and_decode(mixtral: Path, cal) -> None:
    lm = OffloadedLM.load(mixtral, get_policy("duoserve", cal), cache_ratio=0.25)
    for prompt in PROMPTS:
        stats = list(lm.generate(prompt, 10))[-1][1]
        assert stats.prefetch_used > 0 and stats.misses > 0  # guesses used, wrong ones read again
    store = lm.runtime.store
    assert store.ledger.peak <= 2 * store.expert_bytes(ExpertKey(0, 0))  # top-k = 2: the paper's provisioning
    lm.close()


def test_duoserve_serves_a_single_moe_layer_without_its_predictor_and_exactly(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, MixtralConfig

    from .moe_models import COMMON
    config = MixtralConfig(**dict(COMMON, num_hidden_layers=1), intermediate_size=48, num_local_experts=8,
                           num_experts_per_tok=2)
    one = save_tiny("mixtral", tmp_path, config=config)
    cal = calibrate(one, PROMPTS, new_tokens=8, cache_dir=tmp_path / "cal")
    with pytest.raises(ValueError, match="one MoE layer"):
        train_predictor(cal.trace, 8, 2)  # nothing to learn: said as such, not as a short calibration
    said: list[str] = []
    lm = OffloadedLM.load(one, get_policy("duoserve", cal, log=said.append), cache_ratio=0.25)
    got = list(lm.generate(PROMPTS[0], 10))
    model = AutoModelForCausalLM.from_pretrained(one).eval()
    ids = torch.tensor([PROMPTS[0]])
    with torch.inference_mode():
        want = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=10,
                              min_new_tokens=10)[0, ids.shape[1]:].tolist()
    assert [t for t, _ in got] == want
    stats = got[-1][1]
    assert stats.predicted == 0 and stats.expert_loads > 0 and lm.runtime.policy.without_predictor
    assert sum("running without the predictor" in s for s in said) == 1  # said once, not per token
    lm.close()
    report = bench(one, ["ondemand", "duoserve"], 0.25, PROMPTS[:2], 6, cal, ceiling=False)
    assert all(r.same_tokens == 1.0 for r in report.runs)
    assert report.runs[1].details == {"without_predictor": "one MoE layer: no next layer to guess"}
