"""Profiling an architecture on an inference runtime (a backend other than torch): what a switch, a batch and a
resident expert cost there, measured through the backend exactly as the engine drives it.

On a runtime a switch is a session's creation from the backend's own model file (read from disk with its pages
dropped, as the engine reads it), a batch is a session run, and a resident expert holds the session's memory,
measured in a fresh process. An evicted session the backend keeps in the host tier comes back as a "host" load.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from ...experts.backends import get_backend
from ...experts.backends.base import Backend, Weights
from ...experts.base import Architecture
from ...runtime.devices import Device
from ...runtime.store import Tier
from ..online.profile import ArchProfile
from .concurrency import concurrency_curve
from .curve import batch_curve, cold_extra, curve_costs, time_call


def profile_on_runtime(arch: Architecture, device: Device, backend: Backend, expert: str, sha: str | None,
                       weight_path: Path, home: Path, threads: int, batch_sizes: Sequence[int], repeats: int,
                       drop_page_cache: bool) -> ArchProfile:
    """One architecture at `threads` on `backend`'s runtime (in the calling worker thread, as executors run)."""
    runtime = get_backend(backend.name, threads=threads)
    weights = Weights.of_file(weight_path, drop_page_cache)
    runtime.prepare(arch, expert, sha, weights, home)  # the export is the zoo's build, not a switch
    runtime.keep(1 << 40)

    def load() -> object:
        return runtime.load(arch, expert, sha, weights, device.torch, home)[0]

    load()  # the runtime's first session in a process pays one-off set-up
    disk_s = time_call(load, device, repeats)

    def back_from_host() -> None:
        runtime.retire(arch, runtime.cached(expert, sha, device.torch) or load(), device.torch)

    load_s = {Tier.DISK.value: disk_s}
    runtime.retire(arch, load(), device.torch)
    if runtime.cached(expert, sha, device.torch) is not None:  # it keeps evicted experts: they come back from host
        runtime.retire(arch, load(), device.torch)
        load_s[Tier.HOST.value] = time_call(back_from_host, device, repeats)
    loaded = runtime.cached(expert, sha, device.torch) or load()
    crops = [torch.rand(3, arch.input_size, arch.input_size) for _ in range(max(batch_sizes))]

    def batch(n: int) -> object:
        return runtime.run(arch, loaded, torch.stack([arch.preprocess(c) for c in crops[:n]]))

    batch(1)
    latency = batch_curve(batch, batch_sizes, repeats, lambda fn: time_call(fn, device, 1))

    def after_switch() -> Callable[[], object]:
        fresh = load()
        return lambda: runtime.run(arch, fresh, torch.stack([arch.preprocess(crops[0])]))

    cold_s = cold_extra(after_switch, latency[1], device, repeats)
    max_batch, k, b = curve_costs(latency)
    resident = runtime.resident_bytes(arch, expert, sha, weights, home, max_batch)
    return ArchProfile(key=arch.key, k_s=k, b_s=b, max_batch=max_batch, weight_bytes=arch.weight_bytes(),
                       act_bytes_per_sample=arch.activation_bytes(1),
                       load_s=load_s, batch_latency_s=latency,
                       threads=threads, resident_bytes=resident, cold_s=cold_s)


def runtime_concurrency(arch: Architecture, device: Device, backend: Backend, expert: str, sha: str | None,
                        weight_path: Path, home: Path, most: int, batch: int, repeats: int = 6) -> list[float]:
    """Throughput with 1..`most` executors running one session at once (one thread each), relative to one."""
    runtime = get_backend(backend.name, threads=1)
    weights = Weights.of_file(weight_path, False)
    loaded = runtime.load(arch, expert, sha, weights, device.torch, home)[0]
    crops = torch.stack([arch.preprocess(torch.rand(3, arch.input_size, arch.input_size)) for _ in range(batch)])
    runtime.run(arch, loaded, crops)
    return concurrency_curve(most, lambda: (lambda: runtime.run(arch, loaded, crops)), repeats)
