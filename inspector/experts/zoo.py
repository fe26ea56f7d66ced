"""A zoo: experts written to disk as safetensors, described by a manifest.

The benchmark zoo holds random but distinct experts (one seed each); the
inspection line's trained zoo uses the same manifest. Architectures are
shared objects so experts of one architecture share one meta skeleton.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save

from ..runtime.diskio import fsync_and_drop, write_atomically
from .base import Architecture
from .registry import architecture_from_spec
from .resnet import ResNetClassifier

MANIFEST = "manifest.json"
REPORTS = "reports"  # <zoo>/reports/<expert>@<sha12>/: a version's evaluation plots


def report_dir(root: Path, name: str, weights_sha256: str) -> Path:
    return Path(root) / REPORTS / f"{name}@{weights_sha256[:12]}"


def report_files(root: Path, name: str, weights_sha256: str) -> list[Path]:
    """The version's plots that exist (a demo expert's versions have none)."""
    folder = report_dir(root, name, weights_sha256)
    return [f for f in (folder / "confusion.png", folder / "pr.png") if f.is_file()]
ZOO_FORMAT = 1


class ZooMissing(FileNotFoundError):
    """No usable zoo at a path: build it with `inspector zoo build`."""


@dataclass(frozen=True)
class ZooItem:
    """One expert to build: its name, architecture spec and (classifiers) pass rate."""

    name: str
    spec: dict[str, Any]
    pass_rate: float | None = None


@dataclass(frozen=True)
class ExpertEntry:
    """One expert on disk as the manifest records it."""

    name: str
    role: str
    spec: dict[str, Any]
    file: str
    weight_bytes: int
    classes: tuple[str, ...] | None = None  # trained experts: class names, index = label
    weights_sha256: str | None = None  # trained experts: stored with every result they give
    data_hash: str | None = None  # trained experts: hash of the training data's recipe
    val_accuracy: float | None = None
    train_samples: int | None = None
    train_seed: int | None = None  # the seed of the training run kept (a run short of its floor is tried again)
    # trained experts retrained from reviews (experts/versions.py): every version's weights kept beside the first,
    # and the order they were put into service (the last is this entry's file; rollback steps back one)
    versions: tuple[dict[str, Any], ...] = ()
    served: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ExpertEntry:
        """An entry as a manifest stores it (lists where the dataclass keeps tuples)."""
        return cls(**{**raw, "classes": tuple(raw["classes"]) if raw.get("classes") else None,
                      "versions": tuple(raw.get("versions") or ()), "served": tuple(raw.get("served") or ())})


@dataclass
class Zoo:
    """Experts on disk; `unavailable` names those the engine cannot serve, with why."""

    root: Path
    build_key: str
    entries: dict[str, ExpertEntry]
    input_version: int | None = None  # the crops its trained experts expect (ingest/photometric.py); None: untrained
    unavailable: dict[str, str] = field(default_factory=dict)
    _archs: dict[str, Architecture] = field(default_factory=dict, repr=False)

    def report_dir(self, name: str, weights_sha256: str) -> Path:
        """Where one version's evaluation plots live (confusion.png, pr.png): written by teaching, shown by the
        dashboard's history for the parts that version called."""
        return report_dir(self.root, name, weights_sha256)

    def path_of(self, name: str) -> Path:
        return self.root / self.entries[name].file

    def architecture(self, name: str) -> Architecture:
        return self._archs[name]

    def serve_entry(self, entry: ExpertEntry) -> None:
        """Serve `entry` (another version of an expert here) from now on: its file, hash and operating point. The
        architecture object is the one its spec shares (registry.py), never changed in place: another expert may
        share the old one."""
        self._archs[entry.name] = architecture_from_spec(entry.spec)
        self.entries[entry.name] = entry

    @classmethod
    def load(cls, root: Path) -> Zoo:
        manifest = Path(root) / MANIFEST
        if not manifest.is_file():
            raise ZooMissing(f"no zoo manifest at {manifest}; build one with `inspector zoo build`")
        data = json.loads(manifest.read_text(encoding="utf-8"))
        zoo = cls(root=Path(root), build_key=data["build_key"], entries={}, input_version=data.get("input_version"))
        for raw in data["experts"]:
            entry = ExpertEntry.from_json(raw)
            zoo.entries[entry.name] = entry
            try:
                zoo._archs[entry.name] = architecture_from_spec(entry.spec)
            except (ValueError, FileNotFoundError) as exc:  # UnknownArchitecture is a ValueError
                zoo.unavailable[entry.name] = str(exc)
        return zoo


def build_key(items: Sequence[ZooItem], seed: int) -> str:
    payload = json.dumps(
        {"format": ZOO_FORMAT, "seed": seed, "items": [asdict(i) for i in items]}, sort_keys=True
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


SampleInputs = Callable[[str, int], torch.Tensor]


def build_random_zoo(
    root: Path,
    items: Sequence[ZooItem],
    seed: int = 0,
    sample_inputs: SampleInputs | None = None,
    progress: Callable[[str], None] | None = None,
) -> Zoo:
    """Write distinct random experts under `root`, reusing a zoo built from the same plan.

    `sample_inputs(name, n)` gives n preprocessed crops like the ones the
    expert will see; classifiers with a pass_rate are calibrated on them.
    """
    root = Path(root)
    key = build_key(items, seed)
    existing = current_zoo(root, key)
    if existing is not None:
        return existing
    root.mkdir(parents=True, exist_ok=True)
    entries = []
    for index, item in enumerate(items):
        arch = architecture_from_spec(item.spec)
        state = arch.random_state(seed * 100_003 + index)
        if item.pass_rate is not None and isinstance(arch, ResNetClassifier) and sample_inputs:
            module = arch.materialize(state, torch.device("cpu"))
            shift = arch.pass_bias_shift(module, sample_inputs(item.name, 64), item.pass_rate)
            state["fc.bias"] = state["fc.bias"].clone()
            state["fc.bias"][0] += shift
        entries.append(write_expert(root, item.name, arch.role, item.spec, state))
        if progress:
            progress(f"built {item.name} ({arch.name})")
    return write_manifest(root, key, seed, entries)


def current_zoo(root: Path, key: str) -> Zoo | None:
    """The zoo at `root` when it was built from `key` and all its files are there, else None."""
    try:
        existing = Zoo.load(root)
    except ZooMissing:
        return None
    if existing.build_key == key and all(existing.path_of(n).is_file() for n in existing.entries):
        return existing
    return None


def write_expert(root: Path, name: str, role: str, spec: dict[str, Any], state: dict[str, torch.Tensor],
                 digest: bool = False, **extra: Any) -> ExpertEntry:
    """One expert's safetensors file (out of the page cache), and its manifest entry.

    `digest` records the file's SHA-256 (trained experts: stored with every result they give). Written whole or not
    at all: a line may be reading the zoo (a switch reads the file) while it is taught or built again.
    """
    file = f"{name}.safetensors"
    data = save(state)
    write_atomically(root / file, data)
    fsync_and_drop(root / file)
    return ExpertEntry(name, role, spec, file, sum(t.numel() * t.element_size() for t in state.values()),
                       weights_sha256=hashlib.sha256(data).hexdigest() if digest else None, **extra)


def write_manifest(root: Path, key: str, seed: int, entries: Sequence[ExpertEntry], **extra: Any) -> Zoo:
    manifest = {"format": ZOO_FORMAT, "build_key": key, "seed": seed, **extra,
                "experts": [asdict(e) for e in entries]}
    write_atomically(root / MANIFEST, json.dumps(manifest, indent=1).encode())
    return Zoo.load(root)



def set_operating_point(zoo: Zoo, name: str, good_margin: float) -> Zoo:
    """The zoo with classifier `name` serving at `good_margin` (log-odds of good; its weights unchanged): the point
    a benchmark chose for its own measure on held-out data (a detection's best F-score, say), not the teaching's."""
    manifest = json.loads((zoo.root / MANIFEST).read_text(encoding="utf-8"))
    named = [e for e in manifest["experts"] if e["name"] == name]
    if not named or named[0]["role"] != "classifier":
        raise ValueError(f"{name} is not a classifier of the zoo at {zoo.root}")
    named[0]["spec"] = {**named[0]["spec"], "good_margin": float(good_margin)}
    write_atomically(zoo.root / MANIFEST, json.dumps(manifest, indent=1).encode())
    return Zoo.load(zoo.root)
