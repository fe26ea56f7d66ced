"""From a workload and a policy to executors, threads and budgets on a box (an EnginePlan).

Used by the measured bench, the simulator and the planner alike, so that
all three run the same configuration for the same inputs.
"""
from __future__ import annotations

from ...experts.registry import architecture_from_spec
from ...runtime.devices import Device, available_devices, cpu_cores
from .engine import EnginePlan, ExecutorSpec
from .policies import Policy
from .profile import DeviceProfile
from .workload import Workload


def primary_device() -> Device:
    return available_devices()[0]


def box_cores(profiles: dict[str, DeviceProfile]) -> int:
    return int(profiles["cpu"].fingerprint.get("cores", cpu_cores())) if "cpu" in profiles else cpu_cores()


def devices_of(profiles: dict[str, DeviceProfile]) -> list[Device]:
    """The devices a set of profiles describes, CUDA first (the main device)."""
    return sorted((Device.parse(k) for k in profiles), key=lambda d: (not d.is_cuda, d.index))


def cpu_threads(profile: DeviceProfile, workload: Workload, share: int) -> int:
    """Threads for a CPU executor: its share of the cores, unless one thread ran the classifier faster.

    Measured, not assumed: OpenMP teams in worker threads can lose to a single
    thread on small boxes (the profile is taken in a worker thread too).
    """
    if share <= 1:
        return 1
    key = architecture_from_spec(workload.classifier).key
    if not (profile.has(key, 1) and profile.has(key, share)):
        return share  # only one thread count profiled (a shipped device): take it as given
    return share if profile.get(key, share).exec_s(1) < profile.get(key, 1).exec_s(1) else 1


def build_plan(workload: Workload, policy: Policy, profiles: dict[str, DeviceProfile],
               all_resident: bool = False, drop_page_cache: bool = True) -> EnginePlan:
    """Executors and budgets for one policy on this box.

    Samba-style policies get one executor on the main device holding that
    device's whole expert pool; the others get the workload's executors with
    the device's pool shared by them. On a CPU-only box the main device is the CPU.
    """
    main = devices_of(profiles)[0]
    cores = box_cores(profiles)
    counts = workload.executor_counts(main.is_cuda, cores)
    devices: list[tuple[Device, int, int]] = []  # device, executors, pool bytes
    if policy.single_executor:
        devices.append((main, 1, workload.expert_pool_bytes))
    elif main.is_cuda:
        devices.append((main, max(1, counts["cuda"]), workload.expert_pool_bytes))
        if counts["cpu"]:
            devices.append((Device("cpu"), counts["cpu"], workload.cpu_pool_bytes))
    else:
        devices.append((main, max(1, counts["cpu"]), workload.expert_pool_bytes))
    cpu_execs = sum(n for d, n, _ in devices if not d.is_cuda)
    specs = []
    pools: dict[Device, int] = {}
    for device, count, pool in devices:
        prof = profiles[device.key]
        if workload.batch_bytes is not None:
            batch = workload.batch_bytes
        elif device == main and workload.device_bytes is not None and not all_resident:
            batch = max(1, (workload.device_bytes - pool) // count)  # what the experts leave, per executor
        else:  # limited-compute rule (§4.4): room for the profiled max batch
            batch = max(p.act_bytes_per_sample * p.max_batch for p in prof.archs.values())
        pools[device] = resident_total(workload, prof) if all_resident else pool
        threads = 1 if device.is_cuda else cpu_threads(prof, workload, cores // max(1, cpu_execs))
        specs += [ExecutorSpec(device, batch, threads) for _ in range(count)]
    return EnginePlan(specs, pools, host_cache_bytes=workload.host_cache_bytes,
                      drop_page_cache=drop_page_cache and not all_resident)


def resident_total(workload: Workload, profile: DeviceProfile) -> int:
    """What every expert of the workload holds resident on a device: its weights, or what its backend's profile
    measured a loaded one to hold (a runtime session)."""
    pairs = [(workload.classifier, len(workload.components))] + [(d.spec, 1) for d in workload.detectors]
    return sum(count * profile.pool_bytes_of(arch.key, arch.weight_bytes())
               for arch, count in ((architecture_from_spec(spec), n) for spec, n in pairs))
