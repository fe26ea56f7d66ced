"""Boxes to simulate on: a shipped or given box profile, or this machine's measured profiles.

A box file carries its devices' profiles and, optionally, its memory:
    "memory": {"host_mb": 16384}                           separate host RAM (NUMA): CPU pool + cache fit
    "memory": {"unified_mb": 24576, "reserved_mb": 6144}   one memory for CPU and GPU (UMA)
    "executors": {"cuda": 2, "cpu": 1}                     the box's casual executor counts (§5.2)
On a unified box there is no host cache in front of the disk for anyone
(paper §5.1: on UMA "tiered caching is not used, and experts are loaded
directly from SSD"), and the GPU's and the CPU's pools and batches come out
of one budget: unless the workload fixes its expert pool, the GPU gets what
the reserve and the CPU pool leave (75% of it for experts, §5.2 casual).
The task (board, requests, feed) is the workload's; the memory is the box's,
so the box's rules are applied to the workload here.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from ...experts.backends import get_backend
from ...experts.registry import architecture_from_spec
from ...experts.zoo import Zoo
from ...paths import SHIPPED_BOXES, shipped_boxes
from ...runtime.devices import available_devices
from ...runtime.diskio import write_atomically
from ..offline.profiler import saved_profile
from ..online.executor_plan import devices_of, primary_device
from ..online.profile import DeviceProfile, load_box
from ..online.workload import CASUAL_EXPERT_SHARE, MiB, Workload
from .preparation import Progress, prepare
from .simulation import simulated_zoo


def find_box(box: str) -> Path:
    path = Path(box)
    if not path.is_file():
        path = SHIPPED_BOXES / f"{box}.json"
    if not path.is_file():
        raise ValueError(f"no box profile {box!r}: give a file or one of: {', '.join(shipped_boxes())}")
    return path


def write_box(path: Path, profiles: dict[str, DeviceProfile], measured: str, sources: dict[str, str]) -> None:
    """A box file of this machine: its devices' profiles as given (a check's served refit), its host RAM, and where
    every figure came from, so a later `--simulate --box FILE` says what it reproduces."""
    host_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // MiB
    doc = {"name": path.stem, "measured": measured,
           "sources": {**sources, "memory": f"this machine's {host_mb} MiB of host RAM (sysconf)"},
           "devices": {key: prof.to_json() for key, prof in profiles.items()}, "memory": {"host_mb": host_mb}}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(doc, indent=1).encode("utf-8"))


def fit_to_box(workload: Workload, doc: dict[str, Any], box: str) -> Workload:
    """The workload with the box's memory rules and casual executor counts applied; ValueError naming what does not fit.

    A box may name its casual executors (`"executors": {"cuda": 2, "cpu": 1}`, the
    paper's UMA setting, §5.2); they apply where the workload leaves executors open.
    """
    memory = doc.get("memory", {})
    if not workload.executors_fixed and isinstance(doc.get("executors"), dict):
        workload = dataclasses.replace(workload, executors={k: doc["executors"].get(k) for k in ("cpu", "cuda")})
    device = workload.device_bytes or workload.expert_pool_bytes
    if "unified_mb" in memory:
        usable = (memory["unified_mb"] - memory.get("reserved_mb", 0)) * MiB
        if not workload.pool_fixed:  # the GPU may use what the OS and the CPU pool leave of the one memory
            device = usable - workload.cpu_pool_bytes
            workload = dataclasses.replace(workload, device_bytes=device,
                                           expert_pool_bytes=int(CASUAL_EXPERT_SHARE * device))
        need = device + workload.cpu_pool_bytes
        if need > usable:
            raise ValueError(f"{box}: the GPU's {device / MiB:.0f} MiB and the CPU pool's "
                             f"{workload.cpu_pool_bytes / MiB:.0f} MiB exceed the {usable / MiB:.0f} MiB of unified "
                             "memory left to the engine; lower memory.device_mb or memory.cpu_pool_mb")
        return dataclasses.replace(workload, host_cache_bytes=0)
    if "host_mb" in memory:
        host = workload.cpu_pool_bytes + workload.host_cache_bytes
        if host > memory["host_mb"] * MiB:
            raise ValueError(f"{box}: the CPU pool ({workload.cpu_pool_bytes / MiB:.0f} MiB) and the host cache "
                             f"({workload.host_cache_bytes / MiB:.0f} MiB) exceed the box's {memory['host_mb']} MiB "
                             "of host RAM; lower memory.cpu_pool_mb or memory.host_cache_mb")
    return workload


def measured_here(workload: Workload, models_dir: Path, backend: str) -> dict[str, DeviceProfile] | None:
    """This box's saved profiles, one per device `backend` runs on, where each holds every architecture of the
    workload under the software here; else None."""
    runtime = get_backend(backend)
    keys = {architecture_from_spec(item.spec).key for item in workload.zoo_items()}
    out: dict[str, DeviceProfile] = {}
    for device in available_devices():
        if not runtime.runs_on(device.torch):
            continue
        prof = saved_profile(device, Path(models_dir) / "profiles", runtime, keys)
        if prof is None:
            return None
        out[device.key] = prof
    return out or None


def box_profiles(box: str | None, models_dir: Path, workload: Workload, progress: Progress | None = None,
                 backend: str = "torch") -> tuple[str, Zoo, dict[str, DeviceProfile], Workload]:
    """(label, zoo, profiles, workload as the box runs it) to simulate with: this box's profile on `backend`,
    or a box file's (which carries its own devices' costs, whatever ran them)."""
    if box is None:
        label = primary_device().describe() + " (simulated)"
        saved = measured_here(workload, models_dir, backend)
        if saved is not None:  # every architecture measured here already: no zoo to build (a wide one is gigabytes)
            return label, simulated_zoo(workload, saved[devices_of(saved)[0].key]), saved, workload
        zoo, profiles = prepare(workload, models_dir, progress, backend=backend)
        return label, zoo, profiles, workload
    name, profiles, doc = load_box(find_box(box))
    main = devices_of(profiles)[0]
    workload = fit_to_box(workload, doc, name)
    return f"{name} (simulated)", simulated_zoo(workload, profiles[main.key]), profiles, workload
