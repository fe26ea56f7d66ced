"""The training text: the Python standard library's own sources and docstrings, shipped with every Python.

Files are split into train and held-out by a hash of their path, so the
held-out perplexity measures text the model never saw, and the split is the
same on every machine with the same Python.
"""
from __future__ import annotations

import hashlib
import sysconfig
from dataclasses import dataclass
from pathlib import Path

SKIP_TOP = {"test", "tests", "idlelib", "site-packages", "dist-packages", "lib2to3", "turtledemo", "__pycache__"}


@dataclass(frozen=True)
class Corpus:
    root: Path
    train: tuple[Path, ...]
    held_out: tuple[Path, ...]

    def fingerprint(self) -> str:
        """Changes when the Python (and so the text) changes; part of the demo model's cache key."""
        h = hashlib.sha256(str(self.root).encode())
        for f in self.train + self.held_out:
            h.update(f"{f.relative_to(self.root)}:{f.stat().st_size}".encode())
        return h.hexdigest()[:12]

    @staticmethod
    def read(paths: tuple[Path, ...]) -> list[str]:
        return [p.read_text(encoding="utf-8", errors="replace") for p in paths]


def stdlib_corpus(held_out_percent: int = 5, root: Path | None = None) -> Corpus:
    root = Path(root or sysconfig.get_paths()["stdlib"])
    if not root.is_dir():
        raise FileNotFoundError(f"the Python standard library is not at {root}; pass --corpus DIR with .py files")
    files = sorted(f for f in root.rglob("*.py") if not (set(f.relative_to(root).parts) & SKIP_TOP))
    if not files:
        raise FileNotFoundError(f"no .py files under {root}; pass --corpus DIR with .py files")
    train, held = [], []
    for f in files:
        bucket = int(hashlib.sha256(str(f.relative_to(root)).encode()).hexdigest(), 16) % 100
        (held if bucket < held_out_percent else train).append(f)
    return Corpus(root, tuple(train), tuple(held))
