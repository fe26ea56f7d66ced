"""Profiles: the measured costs of an architecture on a device (paper §4.5).

K and B model a same-expert batch's latency as K*n + B; max_batch is where
the average latency stops falling; load_s holds the switch latency per tier.
A DeviceProfile is cached per device and rejected when the device it was
measured on differs (a stale or foreign profile).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

from ...runtime.diskio import write_atomically


def fit_linear(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares K, B of latency = K*n + B (B clamped at 0)."""
    if len(points) == 1:
        return points[0][1], 0.0
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    mx, my = fmean(xs), fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    k = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var
    b = my - k * mx
    if b < 0:  # a negative intercept predicts free batches; refit through the origin
        k, b = sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs), 0.0
    if k < 0:  # noise made bigger batches look cheaper: latency is flat, not falling
        k, b = 0.0, my
    return k, b


class ProfileMismatch(ValueError):
    """A profile file was measured on another device or torch; re-profile explicitly."""


@dataclass
class ArchProfile:
    key: str
    k_s: float
    b_s: float
    max_batch: int
    weight_bytes: int
    act_bytes_per_sample: int
    load_s: dict[str, float]
    batch_latency_s: dict[int, float] = field(default_factory=dict)
    threads: int = 1  # CPU threads the batches ran with (1 on a GPU: the launching thread)
    # what one resident expert holds, measured, where its backend's loaded form is not its weights (a runtime
    # session: weights, prepacked kernels, graph); 0: its weights
    resident_bytes: int = 0
    # what the first batch after a switch takes beyond exec_s (measured at batch 1): the weights just read have not
    # been through the processor's caches, and on the 2-core box that was 0.35-1.2 ms on a 1.6-3.4 ms batch; 0 in
    # profiles before format 6 and in refits that saw no such batch
    cold_s: float = 0.0

    def pool_bytes(self) -> int:
        return self.resident_bytes or self.weight_bytes

    def exec_s(self, n: int) -> float:
        return self.k_s * n + self.b_s

    def batch_s(self, n: int, cold: bool) -> float:
        """A batch of `n`, the first on its expert since the switch when `cold`."""
        return self.exec_s(n) + (self.cold_s if cold else 0.0)

    def switch_s(self, tier: str) -> float:
        return self.load_s.get(tier, self.load_s.get("disk", 0.0))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ArchProfile:
        data = dict(data)
        data["batch_latency_s"] = {int(k): float(v) for k, v in data.get("batch_latency_s", {}).items()}
        return cls(**data)


@dataclass
class DeviceProfile:
    """Every architecture profiled on one device, plus what that device was."""

    fingerprint: dict[str, Any]
    archs: dict[str, ArchProfile] = field(default_factory=dict)
    # concurrency[k-1]: the device's throughput with k executors computing at once, in units of one alone
    # (measured by the profiler; how executors on one device share its compute). Empty: not measured.
    concurrency: list[float] = field(default_factory=list)

    def speedup(self, k: float) -> float:
        """Throughput of k concurrent executors relative to one; flat past the last count measured.

        A fractional k (an average over a batch) interpolates. Unmeasured (an
        old profile), executors are taken as independent (k).
        """
        if k <= 1:
            return max(0.0, k)
        if not self.concurrency:
            return float(k)
        curve = [0.0, *self.concurrency]
        if k >= len(curve) - 1:
            return curve[-1]
        lo = int(k)
        return curve[lo] + (k - lo) * (curve[lo + 1] - curve[lo])

    def solo_s(self, seconds: float, k: float) -> float:
        """What a batch that took `seconds` beside k - 1 others would take alone."""
        return seconds * self.speedup(k) / k if k > 1 else seconds

    @staticmethod
    def entry(key: str, threads: int) -> str:
        return f"{key}#t{threads}"

    def get(self, key: str, threads: int = 1) -> ArchProfile:
        """The profile of `key` at `threads`, or at the nearest thread count measured."""
        exact = self.archs.get(self.entry(key, threads))
        if exact is not None:
            return exact
        measured = [p for p in self.archs.values() if p.key == key]
        if not measured:
            raise KeyError(f"architecture {key} is not profiled on {self.fingerprint.get('device')}")
        return min(measured, key=lambda p: abs(p.threads - threads))

    def pool_bytes_of(self, key: str, weight_bytes: int) -> int:
        """What one resident expert of architecture `key` holds in a pool: the most any thread count of it was
        measured to hold (a runtime session's memory), else `weight_bytes` (its weights)."""
        return max((p.resident_bytes for p in self.archs.values() if p.key == key and p.resident_bytes),
                   default=weight_bytes)

    def has(self, key: str, threads: int) -> bool:
        return self.entry(key, threads) in self.archs

    def to_json(self) -> dict[str, Any]:
        """The profile as its file holds it (and a box file's device entry)."""
        return {"fingerprint": self.fingerprint, "archs": {k: asdict(v) for k, v in self.archs.items()},
                "concurrency": self.concurrency}

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, json.dumps(self.to_json(), indent=1).encode("utf-8"))

    @classmethod
    def load(cls, path: Path, expect: dict[str, Any] | None = None) -> DeviceProfile:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        prof = cls(data["fingerprint"], {k: ArchProfile.from_json(v) for k, v in data["archs"].items()},
                   [float(x) for x in data.get("concurrency", [])])
        if expect is not None and prof.fingerprint != expect:
            diff = {k: (prof.fingerprint.get(k), expect.get(k)) for k in sorted(set(prof.fingerprint) | set(expect))
                    if prof.fingerprint.get(k) != expect.get(k)}  # a key on one side only too
            backend = expect.get("backend", "torch")
            raise ProfileMismatch(
                f"profile {path} was measured on another device or software ({diff}); "
                f"re-profile with `inspector profile --force{'' if backend == 'torch' else ' --backend ' + backend}`"
            )
        return prof


def load_box(path: Path) -> tuple[str, dict[str, DeviceProfile], dict[str, Any]]:
    """A box profile: several devices' profiles in one file (e.g. a paper device), plus its notes."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    try:
        devices = {
            key: DeviceProfile(dev["fingerprint"], {k: ArchProfile.from_json(v) for k, v in dev["archs"].items()},
                               [float(x) for x in dev.get("concurrency", [])])
            for key, dev in data["devices"].items()
        }
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a box profile ({exc}); expected {{name, devices: {{cpu: ...}}}}") from None
    return data.get("name", Path(path).stem), devices, data


def busy_share(intervals: Sequence[tuple[float, float]]) -> float:
    """Time the intervals cover together / their summed lengths (1.0 when none overlap)."""
    total = sum(d for _, d in intervals)
    if total <= 0:
        return 1.0
    covered, end = 0.0, float("-inf")
    for start, dur in sorted(intervals):
        covered += max(0.0, start + dur - max(start, end))
        end = max(end, start + dur)
    return covered / total


# a batch as an executor served it (executor.py's `served`); older callers give the first three or four fields
ServedBatch = tuple[str, int, float] | tuple[str, int, float, float] | tuple[str, int, float, float, bool]


def served_profile(profile: DeviceProfile, batches: Sequence[ServedBatch], loads: list[tuple[str, str, float, float]],
                   threads: int) -> DeviceProfile:
    """A copy of `profile` whose K, B, cold_s and load latencies are refit from what a run really cost.

    `batches` are (architecture key, batch size, seconds[, executors computing on the device
    meanwhile[, the first batch since its expert's switch]]) as executors ran them at `threads`;
    seconds shared with others are turned back into solo seconds through the profile's
    concurrency curve (the simulator shares the device itself). K and B come from the batches
    on a warm expert and cold_s from the rest (with no warm batch, all of them fit K and B, cold_s 0);
    `loads` are (architecture key, tier, start, seconds) of its switches. Loads that
    overlapped waited for each other; the simulator queues them on one disk itself, so
    each tier's durations are scaled by its busy share to get the disk's service time.
    Entries without observations keep the profiled values.
    """
    archs = {k: ArchProfile.from_json(asdict(v)) for k, v in profile.archs.items()}
    out = DeviceProfile(dict(profile.fingerprint), archs, list(profile.concurrency))
    solo = [(b[0], b[1], profile.solo_s(b[2], b[3] if len(b) > 3 else 1.0), len(b) > 4 and bool(b[4]))
            for b in batches]
    for key in {s[0] for s in solo}:
        base = out.get(key, threads)
        entry = out.archs[DeviceProfile.entry(base.key, base.threads)]
        mine = [s for s in solo if s[0] == key]
        warm = [s for s in mine if not s[3]]
        by_n: dict[int, list[float]] = {}
        for _, n, sec, _ in warm or mine:
            by_n.setdefault(n, []).append(sec)
        points = [(n, sum(v) / len(v)) for n, v in sorted(by_n.items())]
        if len(points) >= 2:
            entry.k_s, entry.b_s = fit_linear(points)
        else:
            n, sec = points[0]
            entry.b_s = max(0.0, sec - entry.k_s * n)
        cold = [sec - entry.exec_s(n) for _, n, sec, first in mine if first]
        if cold:  # none: the profile's stands; no warm batch: K and B above took the cold ones in
            entry.cold_s = max(0.0, fmean(cold)) if warm else 0.0
    share = {tier: busy_share([(st, d) for _, t, st, d in loads if t == tier]) for tier in {t for _, t, _, _ in loads}}
    for key in {k for k, _, _, _ in loads}:
        for tier in {t for k, t, _, _ in loads if k == key}:
            secs = [d for k, t, _, d in loads if k == key and t == tier]
            for entry in out.archs.values():
                if entry.key == key:
                    entry.load_s[tier] = share[tier] * sum(secs) / len(secs)
    return out
