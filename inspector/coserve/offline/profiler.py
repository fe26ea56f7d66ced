"""Microbenchmarks that fill a DeviceProfile (paper §4.5), once per architecture and device."""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...experts.backends.base import Backend, BackendUnavailable, Weights
from ...experts.base import Architecture
from ...experts.zoo import Zoo
from ...runtime.arena import HostArena, aligned
from ...runtime.devices import Device, cpu_cores, fingerprint
from ...runtime.memory import MemoryLedger
from ...runtime.store import Tier, TieredStore
from ..online.profile import ArchProfile, DeviceProfile
from .concurrency import concurrency_curve
from .curve import batch_curve, cold_extra, curve_costs, time_call
from .runtime_profile import profile_on_runtime, runtime_concurrency

BATCH_SIZES = (1, 2, 4, 8, 16, 32)


def profile_architecture(
    arch: Architecture,
    device: Device,
    weight_path: Path,
    threads: int = 1,
    batch_sizes: Sequence[int] = BATCH_SIZES,
    repeats: int = 5,
    drop_page_cache: bool = True,
    runtime: RuntimeTarget | None = None,
) -> ArchProfile:
    """Measure one architecture at `threads` CPU threads: batch latencies, K/B, max batch, loads per tier.

    A batch is timed as the executor runs it: in a worker thread (OpenMP in a
    non-main thread behaves differently: on a 2-core box two threads there ran
    slower than one), preprocessing the crops, then the forward pass and
    reading out the predictions.
    """
    out: list[ArchProfile] = []
    errors: list[BaseException] = []

    def work() -> None:
        torch.set_num_threads(threads if runtime is None else runtime.backend.torch_threads(threads))  # as served
        try:
            if runtime is None:
                out.append(_profile(arch, device, weight_path, threads, batch_sizes, repeats, drop_page_cache))
            else:
                out.append(profile_on_runtime(
                    arch, device, runtime.backend, runtime.expert, runtime.sha256, weight_path, runtime.home,
                    threads, batch_sizes, repeats, drop_page_cache))
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    worker = threading.Thread(target=work, name=f"profile-{arch.key}-t{threads}")
    worker.start()
    worker.join()
    if errors:
        raise errors[0]
    return out[0]


def _profile(arch: Architecture, device: Device, weight_path: Path, threads: int,
             batch_sizes: Sequence[int], repeats: int, drop_page_cache: bool) -> ArchProfile:
    name = "__profile__"
    host = MemoryLedger("profile-host", 1 << 40) if device.is_cuda else None
    store = TieredStore(host_ledger=host, pin_host=device.is_cuda, drop_page_cache=drop_page_cache)
    store.register(name, weight_path)
    # on a CPU the engine's pools read into memory of their own (`runtime/arena.py`): so does the profile
    arena = None if device.is_cuda else HostArena("profile", aligned(weight_path.stat().st_size))

    def load_from_store() -> torch.nn.Module:
        slot = None if arena is None else (lambda nbytes: arena.alloc(name, nbytes))
        state, _ = store.fetch(name, device, slot)
        return arch.materialize(state, device.torch)

    def switch() -> None:
        """A load as the engine does it in steady state: into the shell and the slot an eviction handed back."""
        arch.retire(load_from_store(), device.torch)
        if arena is not None:
            arena.free(name)

    # disk: every fetch drops the file from the page cache again, so each read is a disk read.
    switch()  # the first load builds a shell; the timed ones reuse it
    if host is not None:
        disk_s = time_call(lambda: (switch(), store.forget_host(name)), device, repeats)
        load_from_store()
        host_s = time_call(switch, device, repeats)
        load_s = {Tier.DISK.value: disk_s, Tier.HOST.value: host_s}
    else:
        load_s = {Tier.DISK.value: time_call(switch, device, repeats)}
    module = load_from_store()
    crops = [torch.rand(3, arch.input_size, arch.input_size) for _ in range(max(batch_sizes))]

    def batch(n: int) -> object:
        return arch.run(module, torch.stack([arch.preprocess(c) for c in crops[:n]]).to(device.torch))

    batch(1)  # warm-up: lazy init, allocator, anchors
    latency = batch_curve(batch, batch_sizes, repeats, lambda fn: time_call(fn, device, 1))

    def after_switch() -> Callable[[], object]:
        nonlocal module
        arch.retire(module, device.torch)
        if arena is not None:
            arena.free(name)
        module = load_from_store()
        return lambda: batch(1)

    cold_s = cold_extra(after_switch, latency[1], device, repeats)
    x = torch.stack(crops).to(device.torch)
    max_batch, k, b = curve_costs(latency)
    act = _cuda_activation_bytes(arch, module, x, device) if device.is_cuda else arch.activation_bytes(1)
    return ArchProfile(
        key=arch.key, k_s=k, b_s=b, max_batch=max_batch, weight_bytes=arch.weight_bytes(),
        act_bytes_per_sample=act, load_s=load_s, batch_latency_s=latency, threads=threads, cold_s=cold_s,
    )


def _cuda_activation_bytes(arch: Architecture, module: torch.nn.Module, x: torch.Tensor, device: Device) -> int:
    """Peak intermediate bytes per sample, measured by the CUDA allocator at the largest batch."""
    torch.cuda.synchronize(device.index)
    base = torch.cuda.memory_allocated(device.index)
    torch.cuda.reset_peak_memory_stats(device.index)
    arch.run(module, x)
    torch.cuda.synchronize(device.index)
    peak = torch.cuda.max_memory_allocated(device.index) - base
    return max(1, peak // x.shape[0])


def measure_concurrency(arch: Architecture, device: Device, weight_path: Path, most: int, batch: int,
                        repeats: int = 6) -> list[float]:
    """The device's throughput with 1..`most` executors running batches at once, relative to one alone.

    Each executor is a worker thread with one CPU thread (and its own CUDA
    stream on a GPU), running `repeats` batches of `batch` crops, as the
    engine's executors do; what the simulator uses to share a device's compute.
    """
    store = TieredStore(host_ledger=None, pin_host=False, drop_page_cache=False)
    store.register("__concurrency__", weight_path)
    state, _ = store.fetch("__concurrency__", device)
    module = arch.materialize(state, device.torch)
    crops = torch.stack([arch.preprocess(torch.rand(3, arch.input_size, arch.input_size)) for _ in range(batch)])
    arch.run(module, crops.to(device.torch))  # warm-up

    def batch_in() -> Callable[[], object]:
        torch.set_num_threads(1)
        if not device.is_cuda:
            return lambda: arch.run(module, crops.to(device.torch))
        stream = torch.cuda.Stream(device.torch)

        def on_stream() -> object:
            with torch.cuda.stream(stream):
                return arch.run(module, crops.to(device.torch))

        return on_stream

    return concurrency_curve(most, batch_in, repeats, device.synchronize)


def concurrency_counts(device: Device) -> int:
    """How many concurrent executors to measure: past the cores (CPU) or a GPU's usual 3-4, to see the decline."""
    return cpu_cores() + 2 if not device.is_cuda else 6


PROFILE_FORMAT = 7  # 3: loads timed into reused shells (experts/base.py), the device's concurrency curve; 4: and CPU
# loads into a pool's own memory (runtime/arena.py), tensors put in place by experts/assign.py; 5: the concurrency
# curve's points the best of three runs of at least 0.2 s (offline/concurrency.py); 6: cold_s, a batch right after a
# switch; 7: the batch-latency curve timed in rounds (offline/curve.py)


def thread_counts(device: Device) -> list[int]:
    """Thread counts executors may run with: one (many executors) and all cores (one executor)."""
    return [1] if device.is_cuda else sorted({1, cpu_cores()})


@dataclass(frozen=True)
class RuntimeTarget:
    """Profile through an inference runtime: the backend, and the expert whose model files stand for its
    architecture (made ahead under `home`, the zoo's runtime folder)."""

    backend: Backend
    expert: str
    sha256: str | None
    home: Path


def profile_path(root: Path, device: Device, backend: str = "torch") -> Path:
    """One file per device and backend: torch's keeps the name it always had."""
    suffix = "" if backend == "torch" else f"-{backend}"
    return Path(root) / f"{device.key.replace(':', '-')}{suffix}.json"


def _expected(device: Device, root: Path, backend: Backend | None) -> tuple[Path, dict[str, Any], set[str]]:
    """(the profile file of `device` on `backend`, the fingerprint it must carry here, the fingerprint's keys that
    name software: a difference there is an upgrade, measured again, not another machine)."""
    on_runtime = backend is not None and backend.name != "torch"
    path = profile_path(root, device, backend.name if on_runtime else "torch")
    expect = {**fingerprint(device), "profile_format": PROFILE_FORMAT}
    software = {"profile_format", "torch"}
    if on_runtime:
        expect.update({"backend": backend.name, **backend.versions()})
        software |= set(backend.versions())
    return path, expect, software


def saved_profile(device: Device, root: Path, backend: Backend | None, keys: set[str]) -> DeviceProfile | None:
    """This box's saved profile of `device` on `backend` when it was measured under the software here and holds
    every architecture in `keys` at every thread count an executor may use; else None (`load_or_profile` measures).
    What a simulation needs of a workload whose architectures this box has measured: no zoo built for it."""
    path, expect, _ = _expected(device, root, backend)
    if not path.is_file():
        return None
    prof = DeviceProfile.load(path)
    if any(prof.fingerprint.get(k) != v for k, v in expect.items()) or not prof.concurrency:
        return None
    return prof if all(prof.has(k, t) for k in keys for t in thread_counts(device)) else None


def software_changes(measured: dict[str, Any], expect: dict[str, Any], software: set[str]) -> str | None:
    """What differs between a saved profile's fingerprint (`measured`) and this box's (`expect`) where only software
    differs (`software`: the keys naming it), as "key old -> new, ..."; None where nothing differs, or where the
    machine does (DeviceProfile.load then refuses it: another box's profile is not this one's)."""
    changed = {k for k in set(measured) | set(expect) if measured.get(k) != expect.get(k)}
    if not changed or not changed <= software:
        return None
    return ", ".join(f"{k} {measured.get(k, 'unrecorded')} -> {expect.get(k)}" for k in sorted(changed))


def load_or_profile(
    zoo: Zoo,
    device: Device,
    root: Path,
    force: bool = False,
    progress: Callable[[str], None] | None = None,
    drop_page_cache: bool = True,
    backend: Backend | None = None,
) -> DeviceProfile:
    """The device's profile with every architecture of `zoo` in it, measuring what is missing, for `backend`
    (torch when None; a runtime's switches, batches and memory are its own).

    A profile of this box under other software (the profile's format, torch's or the runtime's version, the way the
    backend switches: what an upgrade changes) is measured again, saying why, so an upgraded line comes back up on
    its own; one measured on another device raises ProfileMismatch unless `force`.
    """
    on_runtime = backend is not None and backend.name != "torch"
    path, expect, software = _expected(device, root, backend)
    prof = DeviceProfile(expect)
    if path.is_file() and not force:
        upgraded = software_changes(DeviceProfile.load(path).fingerprint, expect, software)
        if upgraded is not None:
            if progress:
                progress(f"{path} was measured under other software ({upgraded}): measuring again")
        else:
            prof = DeviceProfile.load(path, expect=expect)
    todo: dict[str, tuple[Architecture, str, int]] = {}
    for name in zoo.entries:
        if name in zoo.unavailable or not zoo.path_of(name).is_file():
            continue
        arch = zoo.architecture(name)
        for threads in thread_counts(device):
            if not prof.has(arch.key, threads):
                todo.setdefault(DeviceProfile.entry(arch.key, threads), (arch, name, threads))
    label = f" on {backend.name}" if on_runtime else ""
    if todo or not prof.concurrency:
        os.sync()  # what a zoo build just wrote is written back now, not by the kernel's threads during the timing
    for entry, (arch, name, threads) in todo.items():
        if progress:
            progress(f"profiling {arch.key} on {device.key}{label} with {threads} thread(s)")
        if not on_runtime:
            prof.archs[entry] = profile_architecture(arch, device, zoo.path_of(name), threads,
                                                     drop_page_cache=drop_page_cache)
            continue
        refused: dict[str, str] = {}
        for other in [n for n in zoo.entries if zoo.architecture(n).key == arch.key and n not in zoo.unavailable]:
            target = RuntimeTarget(backend, other, zoo.entries[other].weights_sha256, zoo.root / "runtime")
            try:  # an expert the runtime refuses (its export disagrees with torch) cannot stand for its shape
                prof.archs[entry] = profile_architecture(arch, device, zoo.path_of(other), threads,
                                                         drop_page_cache=drop_page_cache, runtime=target)
                break
            except BackendUnavailable as exc:
                refused[other] = str(exc)
        else:
            raise BackendUnavailable(f"{backend.name} serves no expert of {arch.key}: " + "; ".join(refused.values()))
    measured = False
    if not prof.concurrency:
        measured = _measure_device_concurrency(zoo, device, prof, progress, backend if on_runtime else None)
    if todo or measured:
        prof.save(path)
    return prof


def _measure_device_concurrency(zoo: Zoo, device: Device, prof: DeviceProfile,
                                progress: Callable[[str], None] | None, backend: Backend | None = None) -> bool:
    """Fill `prof.concurrency` with the zoo's most common architecture (its classifiers'), at its max batch."""
    names = [n for n, e in zoo.entries.items() if n not in zoo.unavailable and zoo.path_of(n).is_file()]
    if not names:
        return False
    keys = [zoo.architecture(n).key for n in names]
    key = max(set(keys), key=keys.count)
    name = names[keys.index(key)]
    if backend is not None:  # a shape's expert the runtime serves (one it refused has no model files)
        ready = [n for n, k in zip(names, keys) if k == key and _served(backend, zoo, n)]
        name = ready[0] if ready else name
    most = concurrency_counts(device)
    if progress:
        progress(f"profiling 1..{most} concurrent executors on {device.key} ({key})")
    batch = prof.get(key, 1).max_batch
    if backend is not None:
        prof.concurrency = runtime_concurrency(zoo.architecture(name), device, backend, name,
                                               zoo.entries[name].weights_sha256, zoo.path_of(name),
                                               zoo.root / "runtime", most, batch)
    else:
        prof.concurrency = measure_concurrency(zoo.architecture(name), device, zoo.path_of(name), most, batch)
    return True


def _served(backend: Backend, zoo: Zoo, name: str) -> bool:
    try:
        backend.prepare(zoo.architecture(name), name, zoo.entries[name].weights_sha256,
                        Weights.of_file(zoo.path_of(name), False), zoo.root / "runtime")
        return True
    except BackendUnavailable:
        return False
