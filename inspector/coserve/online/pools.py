"""Which expert pools exist and which executors draw on each: the paper's or ours.

The paper (§4.1) runs every executor as a process with its own model pool:
a device's expert memory is split between its executors, an expert can sit
in two pools at once, and initial placement deals experts round-robin over
the executors. Ours are threads of one process, so they may share one pool
per device instead: a resident expert serves every executor of the device
and is never loaded twice. The policy says which (`Policy.shared_pool`); the
engine and the simulator both build their pools from this layout.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...experts.zoo import Zoo
from ...runtime.arena import ALIGN, HostArena
from ...runtime.devices import Device


@dataclass(frozen=True)
class PoolSpec:
    """One expert pool: its name (ledger and dashboard), device, bytes and the executors it serves."""

    name: str
    device: Device
    nbytes: int
    executors: tuple[int, ...]

    @property
    def key(self) -> str:
        """The pool's name across devices ("cpu/pool-0"): its manager's and its ledger's."""
        return f"{self.device.key}/{self.name}"


def pool_layout(executor_devices: Sequence[Device], pool_bytes: dict[Device, int], shared: bool) -> list[PoolSpec]:
    """One pool per device (shared) or one per executor with an equal share of its device's bytes."""
    by_device: dict[Device, list[int]] = {}
    for i, device in enumerate(executor_devices):
        by_device.setdefault(device, []).append(i)
    pools: list[PoolSpec] = []
    for device, nbytes in pool_bytes.items():
        members = by_device.get(device, [])
        if shared or not members:
            pools.append(PoolSpec("pool", device, nbytes, tuple(members)))
        else:
            share = nbytes // len(members)
            pools += [PoolSpec(f"pool-{i}", device, share, (i,)) for i in members]
    return pools


def pool_arena(pool: PoolSpec, zoo: Zoo) -> HostArena | None:
    """A CPU pool's own memory for its disk reads (`runtime/arena.py`); None for a GPU pool.

    Sized to the pool's bytes plus what its files carry beyond their weights
    (headers, page rounding) for as many experts as the pool can hold at once,
    plus room for the largest expert: slots of mixed sizes fragment the free
    space, and a switch that finds no slot reads into fresh memory, which on a
    CPU costs it several times its read (runtime/arena.py).
    """
    if pool.device.is_cuda:
        return None
    entries = {n: e for n, e in zoo.entries.items() if n not in zoo.unavailable}
    if not entries:
        return None
    overhead = 0
    for name, entry in entries.items():
        try:
            overhead = max(overhead, zoo.path_of(name).stat().st_size - entry.weight_bytes)
        except OSError:
            continue  # a missing file fails its expert at load time, with the reason
    most = pool.nbytes // max(1, min(e.weight_bytes for e in entries.values())) + 1
    largest = max(e.weight_bytes for e in entries.values()) + overhead + ALIGN
    return HostArena(pool.key, pool.nbytes + most * (overhead + ALIGN) + largest)
