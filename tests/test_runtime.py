"""Runtime: ledgers, honest disk reads, the tiered store, zero-copy safetensors."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load, save_file

from inspector.runtime.devices import Device, available_devices, fingerprint
from inspector.runtime.diskio import fsync_and_drop, read_bytes
from inspector.runtime.memory import DeviceBudget, MemoryLedger, OverBudget
from inspector.runtime.safetensors_io import CorruptWeights, parse
from inspector.runtime.store import Tier, TieredStore, WeightsUnavailable


def _weights(path: Path, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    state = {"w": torch.randn(64, 32, generator=g), "b": torch.randn(64, generator=g),
             "n": torch.tensor(7, dtype=torch.int64), "h": torch.randn(3, 3, generator=g).half()}
    save_file(state, str(path))
    fsync_and_drop(path)
    return state


def test_ledger_counts_every_byte_and_refuses_overflow() -> None:
    ledger = MemoryLedger("pool", 100)
    ledger.reserve("a", 60)
    ledger.reserve("b", 40)
    assert ledger.used == 100 and ledger.free == 0 and ledger.peak == 100
    with pytest.raises(OverBudget, match="c needs 1 bytes but only 0 of 100 are free"):
        ledger.reserve("c", 1)
    assert ledger.release("a") == 60
    assert ledger.keys() == ["b"] and ledger.used == 40


def test_device_budget_covers_all_ledgers() -> None:
    budget = DeviceBudget("cpu", 1000)
    budget.open("inspection-pool", 600)
    budget.open("llm-pool", 400)
    with pytest.raises(OverBudget, match="only 0 of 1000 are unallocated"):
        budget.open("more", 1)
    budget.close("llm-pool")
    assert budget.allocated == 600


def test_cpu_is_always_available_and_fingerprinted() -> None:
    devices = available_devices()
    assert devices[-1] == Device("cpu")
    fp = fingerprint(Device("cpu"))
    assert fp["device"] == "cpu" and fp["cores"] >= 1 and fp["torch"]
    assert Device.parse("cuda:1") == Device("cuda", 1)
    with pytest.raises(ValueError, match="unknown device"):
        Device.parse("tpu")


def test_read_bytes_reads_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "x.bin"
    path.write_bytes(b"abc" * 1000)
    assert read_bytes(path) == b"abc" * 1000
    assert read_bytes(path, drop_cache=False) == b"abc" * 1000


def test_zero_copy_parse_matches_safetensors(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    _weights(path)
    ours, ref = parse(read_bytes(path)), load(path.read_bytes())
    assert ours.keys() == ref.keys()
    for key in ref:
        assert ours[key].dtype == ref[key].dtype and torch.equal(ours[key], ref[key])


@pytest.mark.parametrize("damage", ["truncate", "header"])
def test_corrupt_safetensors_is_reported(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "w.safetensors"
    _weights(path)
    raw = path.read_bytes()
    bad = raw[: len(raw) // 2] if damage == "truncate" else raw[:8] + b"{not json" + raw[17:]
    with pytest.raises(CorruptWeights):
        parse(bad)


def test_store_serves_disk_then_host_tier_with_accounting(tmp_path: Path) -> None:
    path = tmp_path / "e.safetensors"
    state = _weights(path)
    host = MemoryLedger("host", 1 << 20)
    store = TieredStore(host_ledger=host)
    store.register("e", path)
    assert store.tier_of("e") is Tier.DISK
    got, rec = store.fetch("e", Device("cpu"))
    assert rec.tier is Tier.DISK and rec.nbytes == sum(t.numel() * t.element_size() for t in state.values())
    assert torch.equal(got["w"], state["w"])
    assert store.tier_of("e") is Tier.HOST and host.used == rec.nbytes
    _, rec2 = store.fetch("e", Device("cpu"))
    assert rec2.tier is Tier.HOST
    store.forget_host("e")
    assert host.used == 0 and store.tier_of("e") is Tier.DISK


def test_host_tier_evicts_least_recently_used(tmp_path: Path) -> None:
    sizes = {}
    for i in range(3):
        _weights(tmp_path / f"e{i}.safetensors", seed=i)
    one = sum(t.numel() * t.element_size() for t in parse(read_bytes(tmp_path / "e0.safetensors")).values())
    host = MemoryLedger("host", 2 * one)
    store = TieredStore(host_ledger=host)
    for i in range(3):
        store.register(f"e{i}", tmp_path / f"e{i}.safetensors")
        sizes[i] = one
    store.fetch("e0", Device("cpu"))
    store.fetch("e1", Device("cpu"))
    store.fetch("e0", Device("cpu"))  # e0 is now the most recent
    store.fetch("e2", Device("cpu"))  # evicts e1
    assert store.host_resident() == ["e0", "e2"] and host.used == 2 * one


def test_missing_and_corrupt_weights_raise_with_advice(tmp_path: Path) -> None:
    store = TieredStore()
    store.register("gone", tmp_path / "gone.safetensors")
    with pytest.raises(WeightsUnavailable, match="missing; rebuild the zoo"):
        store.fetch("gone", Device("cpu"))
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x00" * 4)
    store.register("bad", bad)
    with pytest.raises(WeightsUnavailable, match="corrupt"):
        store.fetch("bad", Device("cpu"))
