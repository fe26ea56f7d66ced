"""Runtime: ledgers, honest disk reads, the tiered store, zero-copy safetensors."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch
from safetensors.torch import load, save_file

from inspector.runtime import diskio
from inspector.runtime.arena import ALIGN, HostArena, aligned
from inspector.runtime.devices import Device, available_devices, fingerprint
from inspector.runtime.diskio import _NO_DIRECT, _address, _read_direct, fsync_and_drop, read_bytes, read_into
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


def _store_with_host_tier(tmp_path: Path) -> tuple[TieredStore, MemoryLedger, dict[str, torch.Tensor]]:
    path = tmp_path / "e.safetensors"
    state = _weights(path)
    host = MemoryLedger("host", 1 << 20)
    store = TieredStore(host_ledger=host)
    store.register("e", path)
    return store, host, state


def test_store_serves_disk_then_host_tier_with_accounting(tmp_path: Path) -> None:
    store, host, state = _store_with_host_tier(tmp_path)
    assert store.tier_of("e") is Tier.DISK
    got, rec = store.fetch("e", Device("cpu"))
    assert rec.tier is Tier.DISK and rec.nbytes == sum(t.numel() * t.element_size() for t in state.values())
    assert torch.equal(got["w"], state["w"])
    assert store.tier_of("e") is Tier.HOST and host.used == rec.nbytes
    _, rec2 = store.fetch("e", Device("cpu"))
    assert rec2.tier is Tier.HOST
    store.forget_host("e")
    assert host.used == 0 and store.tier_of("e") is Tier.DISK


def test_two_pools_reading_one_expert_from_disk_at_once_keep_one_host_copy(tmp_path: Path, monkeypatch) -> None:
    """Found on an H200 (coserve-paper, 5 of 1000 requests failed with 'host-cache: ... is already reserved'): two
    executors' pools missed the host tier for the same expert at once and both admitted their read."""
    store, host, state = _store_with_host_tier(tmp_path)
    both_read = threading.Barrier(2)
    read = store._read_disk  # noqa: SLF001 - held back until both fetches have missed the host tier

    def read_together(name: str, slot=None):  # noqa: ANN001, ANN202
        got = read(name, slot)
        both_read.wait(5)
        return got

    monkeypatch.setattr(store, "_read_disk", read_together)
    out: list[object] = []
    fetchers = [threading.Thread(target=lambda: out.append(store.fetch("e", Device("cpu"))[0])) for _ in range(2)]
    for t in fetchers:
        t.start()
    for t in fetchers:
        t.join(10)
    assert len(out) == 2 and all(torch.equal(s["w"], state["w"]) for s in out)  # both served
    assert store.host_resident() == ["e"] and host.used == sum(t.numel() * t.element_size() for t in state.values())


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


def test_arena_gives_aligned_slots_best_fit_and_merges_what_is_freed() -> None:
    arena = HostArena("pool", 10 * ALIGN)
    a = arena.alloc("a", 1)  # rounded up to a page
    b = arena.alloc("b", 3 * ALIGN)
    c = arena.alloc("c", 2 * ALIGN - 5)
    assert a is not None and b is not None and c is not None
    assert [len(v) for v in (a, b, c)] == [ALIGN, 3 * ALIGN, 2 * ALIGN]
    assert all(_address(v) % ALIGN == 0 for v in (a, b, c))
    assert arena.used == 6 * ALIGN and arena.largest_free == 4 * ALIGN
    with pytest.raises(KeyError, match="already holds"):
        arena.alloc("a", 1)
    assert arena.alloc("too big", 5 * ALIGN) is None  # the caller reads into memory of its own
    b[:] = b"\x01" * len(b)
    assert arena.free("b") and not arena.free("b")
    d = arena.alloc("d", ALIGN)  # best fit: b's hole (3 pages) beats the tail (4 pages)
    assert d is not None and _address(d) == _address(b)
    assert arena.free("a") and arena.free("c") and arena.free("d")
    assert arena.used == 0 and arena.largest_free == 10 * ALIGN  # every neighbour merged back into one extent
    arena.trim()  # free pages go back to the OS and read as zeros when used again
    e = arena.alloc("e", 10 * ALIGN)
    assert e is not None and bytes(e[ALIGN : 2 * ALIGN]) == b"\x00" * ALIGN


@pytest.mark.parametrize("drop_cache", [True, False])
def test_read_into_fills_a_slot_exactly(tmp_path: Path, drop_cache: bool) -> None:
    path = tmp_path / "x.bin"
    data = bytes(range(256)) * 50 + b"tail"  # not a whole number of blocks
    path.write_bytes(data)
    fsync_and_drop(path)
    arena = HostArena("pool", aligned(len(data)) + ALIGN)
    slot = arena.alloc("x", len(data))
    assert slot is not None
    assert read_into(path, slot, drop_cache=drop_cache) == len(data)
    assert bytes(slot[: len(data)]) == data
    unaligned = memoryview(bytearray(len(data) + 1))[1:]  # a buffer O_DIRECT cannot take: read buffered
    assert read_into(path, unaligned) == len(data) and bytes(unaligned) == data
    with pytest.raises(ValueError, match="do not fit"):
        read_into(path, memoryview(bytearray(10)))


def test_direct_reads_work_here_or_are_remembered_as_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.bin"
    path.write_bytes(b"z" * (3 * ALIGN + 17))
    fsync_and_drop(path)
    slot = HostArena("pool", 4 * ALIGN).alloc("x", 4 * ALIGN)
    assert slot is not None
    if _read_direct(path, slot, 3 * ALIGN + 17):
        assert bytes(slot[: 3 * ALIGN + 17]) == b"z" * (3 * ALIGN + 17)
    else:  # this filesystem refuses O_DIRECT (tmpfs): every later read here goes buffered, without trying again
        assert path.stat().st_dev in _NO_DIRECT


def _resident_bytes() -> int:
    import os

    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not Path("/proc/self/statm").is_file(), reason="reads the process's resident pages from /proc")
def test_a_pools_memory_is_faulted_in_when_made_not_by_its_first_switches() -> None:
    """The pages are the pool's from the start (MAP_POPULATE): a switch into a slot does not pay their first touch
    beside the computing executors."""
    before = _resident_bytes()
    arena = HostArena("pool", 64 << 20)
    grew = _resident_bytes() - before
    assert grew >= 0.9 * (64 << 20), f"only {grew / 2**20:.1f} MiB of a 64 MiB pool is resident when made"
    assert arena.alloc("a", 1 << 20) is not None


def test_store_reads_into_the_pools_slot_and_keeps_no_host_copy(tmp_path: Path) -> None:
    store, host, state = _store_with_host_tier(tmp_path)
    arena = HostArena("pool", 1 << 16)
    slots: list[memoryview] = []

    def slot(nbytes: int) -> memoryview | None:
        view = arena.alloc("e#0", nbytes)
        slots.append(view)
        return view

    got, rec = store.fetch("e", Device("cpu"), slot)
    assert rec.tier is Tier.DISK and arena.holds("e#0")
    base, size = _address(slots[0]), len(slots[0])
    for key, ref in state.items():
        assert torch.equal(got[key], ref)
        if ref.numel():  # a view of the slot: the read was the only copy
            assert base <= got[key].data_ptr() < base + size
    assert store.tier_of("e") is Tier.DISK and host.used == 0  # the slot is the pool's, not the cache's
    full = HostArena("full", ALIGN)
    got, _ = store.fetch("e", Device("cpu"), lambda n: full.alloc("e#1", n))  # no room: a buffer of its own
    assert torch.equal(got["w"], state["w"]) and not full.holds("e#1")


@pytest.mark.parametrize("drop_cache", [True, False])
def test_ranges_at_any_offset_read_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, drop_cache: bool) -> None:
    """A checkpoint's tensors sit at unaligned offsets: the O_DIRECT path reads the blocks around them and copies
    them out, in chunks when a range is larger than one request."""
    monkeypatch.setattr(diskio, "DIRECT_CHUNK", ALIGN)  # every range above a page goes in several requests
    path = tmp_path / "shard.bin"
    data = torch.randint(0, 256, (3 * ALIGN + 100,), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    path.write_bytes(bytes(data.tolist()))
    fsync_and_drop(path)
    raw = path.read_bytes()
    spans = [(5, 10), (ALIGN - 6, ALIGN + 5000 % ALIGN + 7), (len(raw) - 7, 7)]
    dests = [memoryview(bytearray(n)) for _, n in spans]
    diskio.read_ranges_into(path, [(off, d) for (off, _), d in zip(spans, dests)], drop_cache)
    for (off, n), d in zip(spans, dests):
        assert bytes(d) == raw[off : off + n]
    with pytest.raises(EOFError, match="the file ends"):
        diskio.read_ranges_into(path, [(len(raw) - 3, memoryview(bytearray(10)))], drop_cache)


def test_large_ranges_read_in_place_into_buffers_lined_up_with_the_file(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A buffer whose address matches its tensor's file offset (buffers.empty_for_read) takes the aligned middle
    of an O_DIRECT read in place; only the partial end blocks pass through the bounce buffer. Exact bytes at
    any offset, lined up or not, and a file that ends early is an EOFError."""
    from inspector.runtime.buffers import empty_for_read

    monkeypatch.setattr(diskio, "DIRECT_CHUNK", ALIGN)  # every range here is "large"
    monkeypatch.setattr(diskio, "IN_PLACE_CHUNK", 2 * ALIGN)  # and the in-place middle takes several requests
    in_place = []
    real = diskio._read_in_place
    monkeypatch.setattr(diskio, "_read_in_place", lambda *a: in_place.append(a[2]) or real(*a))
    path = tmp_path / "shard.bin"
    raw = bytes(torch.randint(0, 256, (9 * ALIGN + 300,), dtype=torch.uint8,
                              generator=torch.Generator().manual_seed(1)).tolist())
    path.write_bytes(raw)
    fsync_and_drop(path)
    end = len(raw) - 2 * ALIGN - 8
    spans = [(2, 5 * ALIGN + 6), (ALIGN, 3 * ALIGN), (ALIGN + 100, 2 * ALIGN), (end, 2 * ALIGN + 8)]
    for offset, n in spans:
        lined_up = empty_for_read((n,), torch.uint8, offset)
        plain = torch.empty(n + 1, dtype=torch.uint8)[1:]  # never lined up with an aligned offset
        for dest in (lined_up, plain):
            view = memoryview(dest.numpy())
            diskio.read_ranges_into(path, [(offset, view)], True)
            assert bytes(view) == raw[offset:offset + n]
    if path.stat().st_dev not in _NO_DIRECT:  # O_DIRECT here: the lined-up buffers were read in place
        assert sorted(set(in_place)) == sorted({offset for offset, _ in spans})
    short = empty_for_read((3 * ALIGN,), torch.uint8, len(raw) - 2 * ALIGN)
    with pytest.raises(EOFError, match="the file ends"):
        diskio.read_ranges_into(path, [(len(raw) - 2 * ALIGN, memoryview(short.numpy()))], True)


def test_neighbouring_ranges_share_one_disk_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An expert's three projections lie side by side in a shard: they are read in one O_DIRECT request (one seek
    and one completion, not three); a range past the gap gets its own, and a run that runs off the file's end
    says so."""
    path = tmp_path / "shard.bin"
    data = torch.randint(0, 256, (6 * ALIGN + 300_000,), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    path.write_bytes(bytes(data.tolist()))
    fsync_and_drop(path)
    raw = path.read_bytes()
    requests: list[int] = []
    real = diskio._pread_direct

    def counted(fd: int, view: memoryview, offset: int, first: bool) -> int | None:
        requests.append(offset)
        return real(fd, view, offset, first)

    monkeypatch.setattr(diskio, "_pread_direct", counted)
    far = 3 * ALIGN + 7 + diskio.COALESCE_GAP + 1000
    spans = [(ALIGN + 3, 2 * ALIGN), (37, ALIGN), (3 * ALIGN + 7, 100), (far, 5000)]  # unsorted, two overlap
    dests = [memoryview(bytearray(n)) for _, n in spans]
    diskio.read_ranges_into(path, [(off, d) for (off, _), d in zip(spans, dests)])
    for (off, n), d in zip(spans, dests):
        assert bytes(d) == raw[off : off + n]
    if path.stat().st_dev in _NO_DIRECT:
        pytest.skip("this filesystem refuses O_DIRECT: reads go buffered, one per range")
    assert requests == [0, far - far % ALIGN]  # the first three as one request from block 0, the far one alone
    requests.clear()
    with pytest.raises(EOFError, match="the file ends"):
        diskio.read_ranges_into(path, [(len(raw) - 50, memoryview(bytearray(10))),
                                       (len(raw) - 20, memoryview(bytearray(30)))])


def _write_many(path: str, fill: int, times: int) -> None:
    for _ in range(times):
        diskio.write_atomically(path, bytes([fill]) * (1 << 20))


def test_processes_writing_one_file_at_once_each_replace_it_whole(tmp_path: Path) -> None:
    """Two processes making the same file (a bench and the kiosk preparing one zoo's runtime files): every write
    succeeds, the file is always one writer's whole file, and nothing is left beside it. With one shared temporary
    name the writers wrote into one file and renamed it half written, or from under each other (FileNotFoundError)."""
    import multiprocessing

    path = tmp_path / "model.onnx"
    ctx = multiprocessing.get_context("spawn")
    writers = [ctx.Process(target=_write_many, args=(str(path), fill, 60)) for fill in (1, 2, 3)]
    for w in writers:
        w.start()
    seen = set()
    while any(w.is_alive() for w in writers):
        if path.exists():
            data = path.read_bytes()
            assert len(data) == 1 << 20 and len(set(data)) == 1, "a reader saw a file half of one writer's"
            seen.add(data[0])
    for w in writers:
        w.join()
        assert w.exitcode == 0, "a writer failed"
    data = path.read_bytes()
    assert len(data) == 1 << 20 and len(set(data)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~diskio._UMASK)


def test_what_a_killed_writer_left_is_removed_by_the_next_write_once_it_is_stale(tmp_path: Path) -> None:
    """A writer killed between writing and renaming leaves its temporary file; the next write of the same file removes
    those untouched for STALE_S, and leaves a fresh one (another writer's, at work) and other files' alone."""
    import os
    import time

    path = tmp_path / "expert.safetensors"
    stale, fresh = tmp_path / ".expert.safetensors.k1ll3d.tmp", tmp_path / ".expert.safetensors.w0rk1n.tmp"
    other = tmp_path / ".other.safetensors.k1ll3d.tmp"
    for f in (stale, fresh, other):
        f.write_bytes(b"half")
    old = time.time() - diskio.STALE_S - 60
    os.utime(stale, (old, old))
    os.utime(other, (old, old))
    diskio.write_atomically(path, b"whole")
    assert path.read_bytes() == b"whole"
    assert not stale.exists() and fresh.exists() and other.exists()
    # a file made under another name first (ONNX Runtime's optimised model, saved to a name ending .ort): the same
    optimised = tmp_path / "cls-R1.cpu-x86.ort"
    killed = tmp_path / ".cls-R1.cpu-x86.ort.k1ll3d.tmp.ort"
    killed.write_bytes(b"half")
    os.utime(killed, (old, old))
    scratch = diskio.scratch_beside(optimised, ".tmp.ort")
    assert not killed.exists() and scratch.exists() and scratch.name.endswith(".tmp.ort")
    assert scratch != diskio.scratch_beside(optimised, ".tmp.ort")  # one name per call
