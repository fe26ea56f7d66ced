"""Tiered weight store: disk (safetensors) -> host RAM (pinned with a GPU) -> device.

The store moves *weights* (state dicts); turning them into modules is the
experts' business and deciding what stays in a device pool is a policy's.
Host RAM is an LRU cache in front of the disk when a host ledger is given
(the Samba-CoE arrangement on a GPU box); on a CPU-only box the device pool
*is* host RAM and the store reads straight from disk, into a slot of the
pool's own memory when the pool offers one (`arena.py`: no fresh buffer, and
an O_DIRECT read that costs the executors' cores almost nothing).

An expert registered with the sha256 of its trained weights is checked the
first time its file is read in this process (then trusted until its size,
time or inode changes): a file swapped or damaged on disk fails that expert
only, with both digests. `verify` checks files ahead of serving, so that the
check is not paid inside the first switch to each expert.
"""
from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import torch

from .devices import Device
from .diskio import file_stamp, read_bytes, read_into
from .memory import MemoryLedger
from .safetensors_io import CorruptWeights, parse

StateDict = dict[str, torch.Tensor]
# given a file's size, a writable page-aligned buffer of at least that many bytes, or None (read into a fresh one)
SlotSource = Callable[[int], "memoryview | None"]

# (path, sha256) -> (size, mtime_ns, inode) of the file that matched: process-wide, since every engine of a
# process (a bench runs several) reads the same files
_VERIFIED: dict[tuple[str, str], tuple[int, int, int]] = {}
_VERIFIED_LOCK = threading.Lock()


class Tier(str, Enum):
    """Where an expert's weights are now."""

    DEVICE = "device"
    HOST = "host"
    DISK = "disk"


class WeightsUnavailable(RuntimeError):
    """An expert's weight file is missing or corrupt; rebuild or restore it."""

    def __init__(self, name: str, path: Path, reason: str) -> None:
        super().__init__(
            f"weights of expert {name!r} at {path} are {reason}; rebuild the zoo "
            f"(inspector zoo build) or restore the file"
        )
        self.expert = name
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class LoadRecord:
    """One fetch: which tier served it, how long it took, how many bytes moved."""

    tier: Tier
    seconds: float
    nbytes: int


def state_dict_bytes(state: StateDict) -> int:
    return sum(t.numel() * t.element_size() for t in state.values())


class TieredStore:
    """Serves state dicts for named experts from the fastest tier that has them."""

    def __init__(
        self,
        host_ledger: MemoryLedger | None = None,
        pin_host: bool = False,
        drop_page_cache: bool = True,
    ) -> None:
        self._paths: dict[str, Path] = {}
        self._sha256: dict[str, str] = {}
        self._host: OrderedDict[str, StateDict] = OrderedDict()
        self._host_ledger = host_ledger
        self._pin = pin_host
        self.drop_page_cache = drop_page_cache
        self._lock = threading.Lock()

    def register(self, name: str, path: Path, sha256: str | None = None) -> None:
        """`sha256`: the digest the weights were recorded with; the file must match it to be served."""
        self._paths[name] = Path(path)
        if sha256:
            self._sha256[name] = sha256.lower()

    def path_of(self, name: str) -> Path:
        return self._paths[name]

    def tier_of(self, name: str) -> Tier:
        with self._lock:
            return Tier.HOST if name in self._host else Tier.DISK

    @property
    def host_ledger(self) -> MemoryLedger | None:
        return self._host_ledger

    def fetch(self, name: str, device: Device, slot: SlotSource | None = None) -> tuple[StateDict, LoadRecord]:
        """Weights of `name` on `device`, and where they came from.

        `slot`: on a CPU device, where a disk read may land (the pool's
        memory); the returned tensors are then views of that slot, so the
        caller owns it for as long as they live, and the host cache keeps no
        copy of them (the slot is the pool's, not the cache's).
        """
        start = time.perf_counter()
        with self._lock:
            cached = self._host.get(name)
            if cached is not None:
                self._host.move_to_end(name)
        if cached is not None:
            tier = Tier.HOST
            host_state = cached
        else:
            tier = Tier.DISK
            into = slot if slot is not None and not device.is_cuda else None
            host_state = self._read_disk(name, into)
            if self._host_ledger is not None and into is None:
                host_state = self._admit_host(name, host_state)
        if device.is_cuda:
            state = {k: v.to(device.torch, non_blocking=self._pin) for k, v in host_state.items()}
            device.synchronize()
        else:
            state = host_state
        return state, LoadRecord(tier, time.perf_counter() - start, state_dict_bytes(state))

    def _read_disk(self, name: str, slot: SlotSource | None = None) -> StateDict:
        path = self._paths.get(name)
        if path is None:
            raise KeyError(f"expert {name!r} is not registered in the weight store")
        try:
            raw = self._read_file(path, slot)
        except FileNotFoundError:
            raise WeightsUnavailable(name, path, "missing") from None
        except OSError as exc:
            raise WeightsUnavailable(name, path, f"unreadable ({exc.strerror})") from None
        except (EOFError, ValueError) as exc:  # its size changed between the stat and the read
            raise WeightsUnavailable(name, path, f"changed while being read ({exc})") from None
        self._verify(name, path, raw)
        try:
            return parse(raw)
        except CorruptWeights as exc:
            raise WeightsUnavailable(name, path, f"corrupt ({exc})") from None

    def _read_file(self, path: Path, slot: SlotSource | None) -> bytes | memoryview:
        dest = slot(os.stat(path).st_size) if slot is not None else None
        if dest is None:
            return read_bytes(path, drop_cache=self.drop_page_cache)
        return dest[: read_into(path, dest, drop_cache=self.drop_page_cache)]

    def _verify(self, name: str, path: Path, raw: bytes | memoryview) -> None:
        expected = self._sha256.get(name)
        if expected is None:
            return
        key, stamp = (str(path), expected), file_stamp(path)
        with _VERIFIED_LOCK:
            if _VERIFIED.get(key) == stamp:
                return
        got = hashlib.sha256(raw).hexdigest()
        if got != expected:
            raise WeightsUnavailable(name, path, f"not the weights this expert was trained with (sha256 {got[:16]}..., "
                                                 f"the zoo records {expected[:16]}...)")
        with _VERIFIED_LOCK:
            _VERIFIED[key] = stamp

    def verify(self, names: list[str] | None = None) -> dict[str, str]:
        """Check the registered experts' files now (all, or `names`); the failures, with their reasons.

        A file that fails is not remembered: its expert fails again, with the
        same reason, when a request first needs it.
        """
        failed: dict[str, str] = {}
        for name in names if names is not None else list(self._paths):
            path = self._paths[name]
            if self._sha256.get(name) is None:
                continue
            with _VERIFIED_LOCK:
                if _VERIFIED.get((str(path), self._sha256[name])) == file_stamp(path):
                    continue
            try:
                self._verify(name, path, read_bytes(path, drop_cache=self.drop_page_cache))
            except WeightsUnavailable as exc:
                failed[name] = str(exc)
            except OSError as exc:
                failed[name] = f"{path}: {exc.strerror or exc}"
        return failed

    def _admit_host(self, name: str, state: StateDict) -> StateDict:
        """Keep a (pinned) host copy, evicting least recently used copies to fit."""
        assert self._host_ledger is not None
        nbytes = state_dict_bytes(state)
        if nbytes > self._host_ledger.capacity:
            return state
        if self._pin:
            state = {k: v.pin_memory() for k, v in state.items()}
        with self._lock:
            kept = self._host.get(name)
            if kept is not None:  # two pools read it from disk at once (a GPU box's pools): one copy is kept
                self._host.move_to_end(name)
                return kept
            while self._host_ledger.free < nbytes and self._host:
                old, _ = self._host.popitem(last=False)
                self._host_ledger.release(old)
            self._host_ledger.reserve(name, nbytes)
            self._host[name] = state
        return state

    def forget_host(self, name: str) -> None:
        """Drop a host copy (the next fetch reads the disk again)."""
        with self._lock:
            if self._host.pop(name, None) is not None and self._host_ledger is not None:
                self._host_ledger.release(name)

    def host_resident(self) -> list[str]:
        with self._lock:
            return list(self._host)
