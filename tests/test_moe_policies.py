"""DAOP and Fiddler on the real runtime: calibration, Algorithm 1, prediction, prefetch, degradation, the bench."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from inspector.moe.bench import bench
from inspector.moe.calibration import Calibration
from inspector.moe.checkpoint import CheckpointError, ExpertKey
from inspector.moe.engine import OffloadedLM
from inspector.moe.offline.collect import calibrate
from inspector.moe.policies import DAOP, Fiddler, get_policy

from .moe_models import save_tiny

PROMPTS = [[0, 5, 17, 60, 3, 42, 8, 77, 11, 30, 12, 19, 44, 2, 71, 9], [0, 33, 34, 35, 90, 4, 4, 4, 61]]


@pytest.fixture(scope="module")
def mixtral(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny("mixtral", tmp_path_factory.mktemp("moe-policies"))


def test_calibration_counts_decode_selections_and_is_cached(mixtral: Path, tmp_path: Path) -> None:
    cal = calibrate(mixtral, PROMPTS, new_tokens=6, cache_dir=tmp_path)
    assert cal.texts == 2 and cal.tokens == 12
    for layer, row in cal.counts.items():
        # every decode step but the last runs the model again: 5 steps per prompt, top-2 experts each
        assert sum(row) == 2 * 5 * 2, layer
        ranking = cal.ranking(layer)
        assert sorted(ranking) == list(range(8)) and row[ranking[0]] == max(row)
    (cached,) = tmp_path.glob("*.json")
    stamp = cached.stat().st_mtime_ns
    assert calibrate(mixtral, PROMPTS, new_tokens=6, cache_dir=tmp_path).counts == cal.counts
    assert cached.stat().st_mtime_ns == stamp
    assert calibrate(mixtral, PROMPTS, new_tokens=7, cache_dir=tmp_path).tokens == 14  # another key


def test_fiddler_places_the_calibrated_favourites_and_never_moves_them(mixtral: Path) -> None:
    cal = Calibration({layer: [0, 0, 0, 0, 0, 0, 9, 5] for layer in range(3)})
    lm = OffloadedLM.load(mixtral, Fiddler(cal), cache_ratio=0.25)
    placed = {layer: set(lm.runtime.resident_in(layer)) for layer in range(3)}
    assert placed == {layer: {ExpertKey(layer, 6), ExpertKey(layer, 7)} for layer in range(3)}
    stats = list(lm.generate(PROMPTS[0], 8))[-1][1]
    assert {layer: set(lm.runtime.resident_in(layer)) for layer in range(3)} == placed
    assert stats.expert_loads == stats.misses  # every miss read once, used, dropped
    lm.close()


def test_algorithm_1_swaps_in_the_sequence_hot_experts_over_the_threshold(mixtral: Path) -> None:
    cal = Calibration({layer: [0, 0, 0, 0, 0, 0, 9, 5] for layer in range(3)})
    lm = OffloadedLM.load(mixtral, DAOP(cal), cache_ratio=0.25)
    before = {layer: {k.expert for k in lm.runtime.resident_in(layer)} for layer in range(3)}
    stats = list(lm.generate(PROMPTS[0], 1))[-1][1]  # prefill only
    lm.runtime.close()  # waits for the swap reads
    swaps = 0
    for layer in range(3):
        counts = lm.runtime.activity[layer].tolist()
        resident = set(before[layer])
        hot = sorted((e for e in range(8) if e not in resident), key=lambda e: -counts[e])
        cold = sorted(resident, key=lambda e: counts[e])
        for h, c in zip(hot, cold):
            if counts[h] > 0 and counts[h] >= 1.05 * counts[c]:
                resident = (resident - {c}) | {h}
                swaps += 1
        assert {k.expert for k in lm.runtime.resident_in(layer)} == resident, (layer, counts)
    assert stats.swaps == swaps > 0
    lm.close()


def test_daop_predicts_with_the_next_gate_and_prefetches_what_is_away(mixtral: Path) -> None:
    lm = OffloadedLM.load(mixtral, "daop", cache_ratio=0.25)
    stats = list(lm.generate(PROMPTS[0], 12))[-1][1]
    assert stats.predicted == 11 * 2 * 2  # decode steps x predicted layers x top-k
    assert 0.0 <= stats.prediction_accuracy <= 1.0
    assert stats.prefetches > 0 and stats.swaps >= 0
    ledger = lm.runtime.store.ledger
    assert ledger.peak <= ledger.capacity
    lm.close()
    assert ledger.used == 0


def test_graceful_degradation_is_off_by_default_and_substitutes_only_mispredicted_away_picks(mixtral: Path) -> None:
    assert not get_policy("daop").approximate and get_policy("daop+degrade").approximate
    lm = OffloadedLM.load(mixtral, "daop+degrade", cache_ratio=0.25)
    rt, pol = lm.runtime, lm.runtime.policy
    resident = sorted(k.expert for k in rt.resident_in(1))
    away = [e for e in range(8) if e not in resident]
    hidden = torch.randn(1, 32)

    def degrade(picks: list[int], guess: set[int] | None) -> list[int]:
        index = torch.tensor([picks])
        pol.adjust_route(rt, 1, hidden, index, torch.ones(1, 2), guess)
        return index[0].tolist()

    assert degrade([away[0], away[1]], None) == [away[0], away[1]]  # no guess for the layer: nothing to replace
    assert degrade([away[0], away[1]], {away[0], away[1]}) == [away[0], away[1]]  # both foreseen: kept
    assert degrade([away[0], resident[0]], set()) == [away[0], resident[0]]  # one away pick: kept
    logits = rt.router_logits(1, hidden)[0]
    got = degrade([away[0], away[1]], {away[0]})  # away[1] was mispredicted: it alone may go
    assert got[0] == away[0] and got[1] == max(resident, key=lambda e: float(logits[e]))
    assert rt.counters.degraded == 1
    exact = [t for t, _ in OffloadedLM.load(mixtral, "daop", cache_ratio=0.25).generate(PROMPTS[1], 12)]
    out = list(lm.generate(PROMPTS[1], 12))
    assert len(out) == len(exact)
    lm.close()


def test_bench_runs_every_policy_on_one_prompt_set_and_exact_ones_agree(mixtral: Path) -> None:
    report = bench(mixtral, ["ondemand", "lru", "fiddler", "daop", "daop+degrade"], 0.25, PROMPTS, 6, None)
    doc = json.loads(json.dumps(report.to_json()))
    assert set(doc) >= {"model", "cache_ratio", "ceiling_tokens_per_s", "runs"} and doc["cache_ratio"] == 0.25
    assert doc["ceiling_tokens_per_s"] > 0
    for run in doc["runs"]:
        assert set(run) >= {"policy", "tokens_per_s", "ttft_s", "expert_loads", "hit_rate", "peak_device_bytes",
                            "prediction_accuracy"}
    by = {r.policy: r for r in report.runs}
    assert all(by[p].same_tokens == 1.0 for p in ("ondemand", "lru", "fiddler", "daop"))
    assert by["ondemand"].hit_rate == 0.0 and by["ondemand"].prediction_accuracy is None
    assert by["daop"].prediction_accuracy is not None and by["daop+degrade"].approximate
    assert by["ondemand"].expert_loads > by["lru"].expert_loads


def test_a_prefetched_expert_is_staged_used_once_admitted_and_unused_ones_give_their_bytes_back(mixtral: Path) -> None:
    lm = OffloadedLM.load(mixtral, "daop", cache_ratio=0.25)
    rt, ledger = lm.runtime, lm.runtime.store.ledger
    away = [ExpertKey(1, e) for e in range(8) if not rt.is_resident(ExpertKey(1, e))]
    used, unused = away[0], away[1]
    before = set(rt.resident_in(1))
    rt.prefetch(used)
    rt.prefetch(unused)
    for key in (used, unused):
        future = rt._inflight.get(key)
        if future is not None:
            future.result()
    assert set(rt.resident_in(1)) == before  # staged, not installed: a wrong guess evicts nothing
    assert ledger.holds(f"buffer:{used}") and ledger.holds(f"buffer:{unused}")
    hits = rt.counters.hits
    w = rt.acquire(used)
    assert w.gate_up.shape[0] == 2 * 48 and rt.counters.hits == hits + 1 and rt.counters.prefetch_used == 1
    assert rt.is_resident(used)  # DAOP admits what a decode step used, in place of the least active one
    rt.release(used)
    rt.layer_done(1, torch.zeros(1, 32))
    assert not rt.is_resident(unused) and not ledger.holds(f"buffer:{unused}")
    assert len(rt.resident_in(1)) == rt.slots[1]
    lm.close()
    assert ledger.used == 0


@pytest.mark.parametrize("policy", ["ondemand", "daop"])
def test_a_damaged_shard_fails_the_request_clearly_and_the_engine_serves_the_next(tmp_path: Path, policy: str) -> None:
    root = save_tiny("mixtral", tmp_path)
    shard = root / "model.safetensors"
    good = shard.read_bytes()
    lm = OffloadedLM.load(root, policy, cache_ratio=0.25)
    want = [t for t, _ in lm.generate(PROMPTS[0], 6)]
    shard.write_bytes(good[:len(good) // 3])  # replaced by a truncated copy while the model is loaded
    with pytest.raises(CheckpointError, match="could not be read .* copy it again"):
        for layer in range(3):  # nothing resident: every expert must be read
            for key in lm.runtime.resident_in(layer):
                lm.runtime.store.evict(key)
        list(lm.generate(PROMPTS[0], 6))
    ledger = lm.runtime.store.ledger
    assert not [k for k in ledger.keys() if k.startswith("buffer:")]  # no read's bytes left behind
    shard.write_bytes(good)
    assert [t for t, _ in OffloadedLM.load(root, policy, cache_ratio=0.25).generate(PROMPTS[0], 6)] == want
    assert [t for t, _ in lm.generate(PROMPTS[0], 6)] == want
