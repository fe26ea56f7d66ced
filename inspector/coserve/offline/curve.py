"""Timing an architecture's batches, as both profilers (torch's, a runtime's) do it: one call timed with the device
synchronised, the batch-latency curve timed so that the box's slow spells fall on every batch size alike, the max
batch and K, B read off it so that the noise left does not move them, and a switch's cold first batch.

The max batch is read off this curve ("where the average latency stops falling", paper §4.5), so a bent curve
moves it. Timing each size's repeats back to back let one slow spell of the machine (a neighbour on the VM, the
page cache writing back) land on one size alone, and judged a 4 ms batch on 20 ms of single shots: on a 2-core
box resnet10@96 got a max batch of 2, 1, 4 and 8 in four profiles of one day. Here every round visits every size
in turn, so a spell shorter than half the rounds is outvoted by the median, and each sample of a size is the mean
of enough back-to-back runs to fill ROUND_SECONDS, so small batches are timed as long as large ones.

On a CPU the curve's tail is nearly flat (a batch costs K*n + B, and B/n is a few per cent of K past 8), so a
threshold on single points still flips with a few per cent of noise. Where the straight line describes every
point up to the best size to within LINEAR_FIT, the threshold is read off the line, which all those points hold
up; a GPU's curve (flat, then rising) is not a straight line and is read point by point, as its knee is sharp.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

from ...runtime.devices import Device
from ..online.profile import fit_linear

PLATEAU = 0.05  # a batch within 5% of the best average latency is on the plateau
LINEAR_FIT = 0.10  # the line describes the curve when it is this close to every point: about a VM's noise
ROUND_SECONDS = 0.02  # per size and round: about 5 batches of one of a small CNN on one core
MOST_RUNS = 64  # per sample: a batch that takes no measurable time still ends


def time_call(fn: Callable[[], object], device: Device, repeats: int) -> float:
    """The median seconds of `repeats` calls of `fn`, the device synchronised on either side of each."""
    samples = []
    for _ in range(repeats):
        device.synchronize()
        t = time.perf_counter()
        fn()
        device.synchronize()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def batch_curve(batch: Callable[[int], object], sizes: Sequence[int], rounds: int,
                once: Callable[[Callable[[], object]], float],
                round_seconds: float = ROUND_SECONDS) -> dict[int, float]:
    """Seconds per batch of each size in `sizes`: the median over `rounds` rounds, each visiting every size.

    `batch(n)` runs a batch of n; `once(fn)` times one call of fn as the profiler times anything (a device
    synchronised on either side).
    """
    samples: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(rounds):
        for n in sizes:
            spent, runs = 0.0, 0
            while runs == 0 or (spent < round_seconds and runs < MOST_RUNS):
                spent += once(lambda n=n: batch(n))
                runs += 1
            samples[n].append(spent / runs)
    return {n: statistics.median(s) for n, s in samples.items()}


def curve_costs(latency: dict[int, float]) -> tuple[int, float, float]:
    """(max batch, K, B) of a curve: the plateau, and the line through the sizes up to it (at least 1 and 2)."""
    max_batch = plateau_batch(latency)
    k, b = fit_linear([(n, s) for n, s in latency.items() if n <= max(max_batch, 2)])
    return max_batch, k, b


def cold_extra(after_switch: Callable[[], Callable[[], object]], warm_s: float, device: Device, repeats: int) -> float:
    """What a batch of one right after a switch takes beyond `warm_s`, the same batch back to back: `after_switch`
    switches the expert in again and returns its batch; the median of `repeats`, each timed once."""
    return max(0.0, statistics.median(time_call(after_switch(), device, 1) for _ in range(repeats)) - warm_s)


def plateau_batch(latency: dict[int, float]) -> int:
    """The smallest batch whose average latency is within PLATEAU of the best one.

    "Where the average latency stops falling" (paper §4.5), read off the straight line through the sizes up to the
    best one where it fits them (past the best, a CPU's caches overflow and the line no longer holds), and
    otherwise point by point, so that one noisy size does not end the search early.
    """
    avg = {n: s / n for n, s in latency.items()}
    top = min(avg, key=avg.__getitem__)
    line = relative_line({n: s for n, s in latency.items() if n <= top})
    if line is not None:
        k, b = line
        avg = {n: k + b / n for n in latency if n <= top}
    best = min(avg.values())
    return min(n for n, a in avg.items() if a <= best * (1 + PLATEAU))


def relative_line(latency: dict[int, float]) -> tuple[float, float] | None:
    """K, B of latency = K*n + B, least squares in relative error (a 4 ms batch counts as much as a 100 ms one), or
    None where the line misses a point by more than LINEAR_FIT or does not rise."""
    if len(latency) < 3:
        return None
    w = {n: 1.0 / (s * s) for n, s in latency.items()}
    sw = sum(w.values())
    sx = sum(w[n] * n for n in latency)
    sy = sum(w[n] * s for n, s in latency.items())
    sxx = sum(w[n] * n * n for n in latency)
    sxy = sum(w[n] * n * s for n, s in latency.items())
    k = (sw * sxy - sx * sy) / (sw * sxx - sx * sx)
    b = (sy - k * sx) / sw
    if k <= 0 or any(abs(k * n + b - s) > LINEAR_FIT * s for n, s in latency.items()):
        return None
    return k, b
