"""What one more expert loaded on a shared graph holds in RAM, measured in a fresh process (its own module, run as
`python -m`, so the shared graph's module needs nothing of the backend that uses it)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .footprint import marginal_rss
from .onnxruntime_backend import OnnxRuntimeBackend
from .shared_graph import read_weights


def weights_bytes(graph: Path, weights: Path, threads: int, input_size: int, batch: int) -> int:
    """Resident bytes one more loaded expert adds on a shared graph after running `batch` crops (footprint.py)."""
    session = OnnxRuntimeBackend(threads=threads).session(str(graph), optimise=False)
    x = np.random.default_rng(0).random((batch, 3, input_size, input_size), dtype=np.float32)
    return marginal_rss(lambda: read_weights(weights, drop_cache=False),
                        lambda feeds: session.run(None, {**feeds, "images": x}))


if __name__ == "__main__":  # python -m ...shared_weights_rss GRAPH WEIGHTS THREADS INPUT_SIZE BATCH
    import sys

    a = sys.argv[1:]
    print(weights_bytes(Path(a[0]), Path(a[1]), int(a[2]), int(a[3]), int(a[4])))
