"""What one loaded expert really holds in memory, measured: the RSS one more live copy adds, in a fresh process.

A runtime's loaded form is not its weights (a session keeps prepacked kernels, its graph, maybe a copy of the
bytes it was given), and the pool must be charged what it holds. The measurement runs in a fresh process started
with a fixed mmap threshold, so that buffers freed by earlier work leave RSS instead of hiding new growth, and it
takes the growth from the 2nd to the last copy over their number, so one-off growth around the first is charged
to none.
"""
from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from .base import BackendUnavailable


def marginal_rss(make: Callable[[], Any], run: Callable[[Any], None], count: int = 8) -> int:
    """Bytes of RSS one more live object from `make` adds once `run` has used it."""
    import psutil

    proc = psutil.Process()
    live, rss = [], []
    for _ in range(count):
        obj = make()
        run(obj)
        live.append(obj)
        gc.collect()
        rss.append(proc.memory_info().rss)
    return max(0, (rss[-1] - rss[1]) // (count - 2))


def measured_in_fresh_process(module: str, args: list[str], what: str) -> int:
    """Run `python -m module args...` (whose last printed word is a byte count) with glibc's mmap threshold fixed."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(1 << 20)}
    done = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, encoding="utf-8", timeout=300,
                          env=env)
    if done.returncode != 0:
        raise BackendUnavailable(f"measuring {what} failed: {done.stderr.strip()[-400:]}")
    return int(done.stdout.split()[-1])
