"""A quantized copy of a checkpoint's routed experts, on disk beside the checkpoint's own cache files.

Written once per (checkpoint, expert dtype, serving device), one expert at a time (the peak is one expert in
float32 and one shard being written, never a layer), into sharded safetensors under
models/llm/quantized/<checkpoint fingerprint>-<dtype>-<cpu|gpu>/; a manifest says how each projection is
quantized, and the copy is used only when its manifest matches. The engine then reads quantized experts
from it in place of the checkpoint's: the bytes a switch moves shrink with the bits.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file

from ...runtime.buffers import empty_for_read
from ...runtime.diskio import fsync_and_drop
from ...runtime.safetensors_io import TensorSpan, header_index
from ..calibration import checkpoint_fingerprint
from ..checkpoint import CheckpointError, ExpertKey, MoECheckpoint
from . import EXPERT_DTYPES
from .weights import QPair, QWeight, packing_probe, quantize

QUANT_DIR = Path(__file__).resolve().parents[3] / "models" / "llm" / "quantized"
MANIFEST = "manifest.json"
SHARD_BYTES = 1 << 30
PARTS = ("gate", "up", "down")
FORMAT = 1
KERNEL_ALIGN = 64


@dataclass(frozen=True)
class QuantSpans:
    """Where one quantized expert's tensors lie: per projection its data and its scales."""

    parts: dict[str, tuple[TensorSpan, TensorSpan]]
    meta: dict[str, dict]  # projection -> kind, shape, group, layout

    @property
    def nbytes(self) -> int:
        return sum(d.nbytes + s.nbytes for d, s in self.parts.values())

    @property
    def path(self) -> str:
        return self.parts["gate"][0].path

    def empty(self) -> tuple[QPair, QWeight]:
        """Buffers for a read: (gate_up, down), shaped as the copy stores them."""
        made = {}
        for part, (data, scales) in self.parts.items():
            m = self.meta[part]
            made[part] = QWeight(m["kind"], tuple(m["shape"]),  # the packed kernels want 64-byte aligned buffers
                                 empty_for_read(data.shape, data.dtype, data.offset, KERNEL_ALIGN),
                                 empty_for_read(scales.shape, scales.dtype, scales.offset, KERNEL_ALIGN),
                                 m["group"], m["layout"])
        return QPair(made["gate"], made["up"]), made["down"]


def copy_dir(ckpt: MoECheckpoint, kind: str, device: torch.device, root: Path = QUANT_DIR) -> Path:
    target = "cpu" if device.type == "cpu" else "gpu"
    return Path(root) / f"{checkpoint_fingerprint(ckpt)}-{kind}-{target}"


class QuantizedCopy:
    def __init__(self, path: Path, manifest: dict, experts: dict[ExpertKey, QuantSpans]) -> None:
        self.path, self.manifest, self.experts = path, manifest, experts

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.experts.values())

    @classmethod
    def write(cls, ckpt: MoECheckpoint, kind: str, device: torch.device, out: Path,
              log: Callable[[str], None] | None = None) -> QuantizedCopy:
        """Quantize every routed expert, one at a time, into sharded safetensors at `out` (atomically)."""
        if kind not in EXPERT_DTYPES[1:]:
            raise ValueError(f"unknown expert dtype {kind!r}: choose one of {', '.join(EXPERT_DTYPES[1:])}")
        tmp = out.with_name(f"{out.name}.partial-{os.getpid()}")  # two processes may quantize at once
        for left in out.parent.glob(f"{out.name}.partial-*"):  # a killed writer's gigabytes
            if left == tmp or not _alive(left.name.rsplit("-", 1)[-1]):
                shutil.rmtree(left, ignore_errors=True)
        tmp.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        shard: dict[str, torch.Tensor] = {}
        shard_bytes, shards, meta = 0, 0, {}

        def flush() -> None:
            nonlocal shard, shard_bytes, shards
            if shard:
                path = tmp / f"experts-{shards:05d}.safetensors"
                save_file(shard, str(path))
                fsync_and_drop(path)  # the benchmark's reads must come from disk, not from this write's pages
                shards += 1
                shard, shard_bytes = {}, 0

        keys = sorted(ckpt.experts, key=lambda k: (k.layer, k.expert))
        said = t0
        for i, key in enumerate(keys):
            for part, w in zip(PARTS, ckpt.expert_tensors(key)):
                q = quantize(w, kind, device)
                meta[part] = {"kind": q.kind, "shape": list(q.shape), "group": q.group, "layout": q.layout}
                for name, t in (("data", q.data), ("scales", q.scales)):
                    shard[f"layers.{key.layer}.experts.{key.expert}.{part}.{name}"] = t
                    shard_bytes += t.numel() * t.element_size()
            if shard_bytes >= SHARD_BYTES:
                flush()
            if log is not None and time.perf_counter() - said > 10:
                said = time.perf_counter()
                log(f"quantized {i + 1}/{len(keys)} experts to {kind} ({time.perf_counter() - t0:.0f} s)")
        flush()
        manifest = {"format": FORMAT, "kind": kind, "target": device.type, "checkpoint": str(ckpt.root),
                    "fingerprint": checkpoint_fingerprint(ckpt), "projections": meta, "shards": shards,
                    "probe": packing_probe(), "torch": torch.__version__}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
        if (out / MANIFEST).is_file():  # another process finished the same copy first: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
            return cls.open(out)
        shutil.rmtree(out, ignore_errors=True)  # a copy without a manifest is an interrupted one
        os.replace(tmp, out)
        return cls.open(out)

    @classmethod
    def open(cls, path: Path) -> QuantizedCopy:
        try:
            manifest = json.loads((path / MANIFEST).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise CheckpointError(f"{path}: no readable {MANIFEST} ({exc}); delete the folder to quantize again") \
                from None
        if manifest.get("format") != FORMAT:
            raise CheckpointError(f"{path} was written by another release (format {manifest.get('format')}); "
                                  "delete it to quantize again")
        spans: dict[str, TensorSpan] = {}
        for shard in sorted(path.glob("experts-*.safetensors")):
            spans.update(header_index(shard))
        experts: dict[ExpertKey, dict[str, dict[str, TensorSpan]]] = {}
        for name, span in spans.items():
            _, layer, _, expert, part, what = name.split(".")
            experts.setdefault(ExpertKey(int(layer), int(expert)), {}).setdefault(part, {})[what] = span
        meta = manifest["projections"]
        out = {key: QuantSpans({p: (parts[p]["data"], parts[p]["scales"]) for p in PARTS}, meta)
               for key, parts in experts.items()}
        return cls(path, manifest, out)


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def open_quantized(ckpt: MoECheckpoint, kind: str, device: torch.device | str = "cpu", root: Path = QUANT_DIR,
                   log: Callable[[str], None] | None = None) -> QuantizedCopy:
    """The checkpoint's experts quantized to `kind` for `device`: the cached copy, else written now."""
    device = torch.device(device)
    path = copy_dir(ckpt, kind, device, root)
    if (path / MANIFEST).is_file():
        copy = QuantizedCopy.open(path)
        layouts = {m["layout"] for m in copy.manifest["projections"].values()}
        if "tinygemm-cpu" in layouts and copy.manifest.get("probe") != packing_probe():
            raise CheckpointError(f"{path} was packed by a PyTorch build whose int4 layout differs from this one's "
                                  f"({copy.manifest.get('torch')}); delete the folder to quantize again")
        if set(copy.experts) != set(ckpt.experts):
            raise CheckpointError(f"{path} lacks experts of {ckpt.root}; delete the folder to quantize again")
        return copy
    if log is not None:
        log(f"quantizing {len(ckpt.experts)} experts of {ckpt.root.name} to {kind} for {device.type} "
            f"(once; kept in {path})")
    return QuantizedCopy.write(ckpt, kind, device, path, log)
