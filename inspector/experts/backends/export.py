"""An expert exported for a runtime: ONNX from its torch module, checked against torch before it is trusted.

The file lives beside the zoo's weights (`runtime/<expert>-<weights sha12>.onnx`) with a JSON note of its own
sha256, the weights it was made from and how closely it agreed with torch; a file whose hash no longer matches
is made again. The check runs the same seeded batch through torch and the runtime: the raw outputs must agree to
`TOLERANCE` (relative to their scale) and every decoded verdict must be the same, else the export is refused.
A file is hashed once per process while its size and times stay (`verified`): a switch reads it, not hashes it.
"""
from __future__ import annotations

import hashlib
import io
import json
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...runtime.diskio import file_stamp, write_atomically
from ..base import Architecture, StateDict
from .base import BackendUnavailable

OPSET = 17
CHECK_BATCH = 16
TOLERANCE = 1e-3


@dataclass(frozen=True)
class Exported:
    path: Path
    sha256: str
    max_abs_diff: float  # runtime against torch on the check batch
    made: bool  # made now (False: the file from an earlier export)


def runtime_path(home: Path, expert: str, weights_sha256: str | None) -> Path:
    return home / f"{expert}-{(weights_sha256 or 'unversioned')[:12]}.onnx"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


_VERIFIED: dict[str, tuple[tuple[int, int, int], str]] = {}  # path -> (its stamp, sha256) when we hashed it
_VERIFIED_LOCK = threading.Lock()


def verified_sha256(path: Path) -> str:
    """The file's sha256, hashed again only when its size, time or inode changed since this process hashed it."""
    stamp = file_stamp(path)
    with _VERIFIED_LOCK:
        seen = _VERIFIED.get(str(path))
    if seen is not None and seen[0] == stamp:
        return seen[1]
    sha = file_sha256(path)
    with _VERIFIED_LOCK:
        _VERIFIED[str(path)] = (stamp, sha)
    return sha


def exported(arch: Architecture, expert: str, weights_sha256: str | None, state_of: Callable[[], StateDict],
             home: Path, session_of) -> Exported:  # noqa: ANN001 - session_of(bytes or path) -> a runtime session
    """The expert's ONNX file, made and checked now when missing or damaged (only then are the weights read)."""
    path = runtime_path(home, expert, weights_sha256)
    note = path.with_suffix(".json")
    if path.is_file() and note.is_file():
        try:
            meta = json.loads(note.read_text(encoding="utf-8"))
            if meta.get("onnx_sha256") == verified_sha256(path) and meta.get("weights_sha256") == weights_sha256:
                return Exported(path, meta["onnx_sha256"], float(meta["max_abs_diff"]), False)
        except (OSError, ValueError, KeyError):
            pass  # a damaged note: export again
    data, diff = export_checked(arch, expert, state_of(), session_of)
    home.mkdir(parents=True, exist_ok=True)
    write_atomically(path, data)
    sha = hashlib.sha256(data).hexdigest()
    write_atomically(note, json.dumps({"expert": expert, "weights_sha256": weights_sha256, "onnx_sha256": sha,
                                       "opset": OPSET, "max_abs_diff": diff, "checked_on": CHECK_BATCH}).encode())
    return Exported(path, sha, diff, True)


def export_checked(arch: Architecture, expert: str, state: StateDict, session_of) -> tuple[bytes, float]:  # noqa: ANN001
    """(ONNX bytes, max |runtime - torch|) or BackendUnavailable naming the disagreement."""
    module = arch.build().eval()
    module.load_state_dict(state)
    wrapped = arch.export_module(module).eval()
    x = check_batch(arch)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on the detection head's constant shapes
        torch.onnx.export(wrapped, (x,), buf, input_names=["images"], output_names=["raw"],
                          dynamic_axes={"images": {0: "batch"}, "raw": {0: "batch"}}, opset_version=OPSET,
                          dynamo=False)
    data = buf.getvalue()
    reference = arch.forward(module, x)
    session = session_of(data)
    got = torch.from_numpy(np.asarray(session.run(None, {"images": x.numpy()})[0]))
    diff, why = agreement(arch, reference, got)
    if why:
        raise BackendUnavailable(f"{expert}: the ONNX export disagrees with torch ({why}); it is not served on the "
                                 "runtime")
    return data, diff


def check_batch(arch: Architecture) -> torch.Tensor:
    """The seeded batch every export and every file derived from it is checked on."""
    size = arch.input_size
    return torch.rand(CHECK_BATCH, 3, size, size, generator=torch.Generator().manual_seed(1234))


def agreement(arch: Architecture, reference: torch.Tensor, got: torch.Tensor) -> tuple[float, str]:
    """(max |got - reference|, how they disagree or ""): they agree within `TOLERANCE` of the outputs' scale with
    every decoded verdict the same."""
    diff = float((got - reference).abs().max())
    scale = max(1.0, float(reference.abs().max()))
    same = [(a.label, a.passed) for a in arch.decode(reference)] == [(b.label, b.passed) for b in arch.decode(got)]
    if diff > TOLERANCE * scale:
        return diff, f"max difference {diff:.2e}, over {TOLERANCE:g} of the outputs' scale"
    return diff, "" if same else f"verdicts differ (max difference {diff:.2e})"


class Refused(BackendUnavailable):
    """A derived file its maker made but would not trust: the reason, and figures for the note."""

    def __init__(self, reason: str, notes: dict[str, Any]) -> None:
        super().__init__(reason)
        self.notes = notes


@dataclass(frozen=True)
class Derived:
    path: Path
    note: dict[str, Any]  # what its note says (its sha256, and the figures its maker added)
    made: bool  # made now


def derived(path: Path, made: Exported, tag: str, make: Callable[[], bytes | tuple[bytes, dict[str, Any]]]) -> Derived:
    """A file a runtime derives from the checked export (a pre-optimised, pre-compiled or quantised model), at `path`
    with a JSON note of its own sha256, the export it came from and any figures `make` returns with its bytes;
    made again when missing, damaged or stale. A `Refused` file is not written, and its reason is kept in the note
    with the export it was refused for, so every process knows why and none makes it again until the export
    changes."""
    note = path.with_suffix(".json")
    try:
        meta = json.loads(note.read_text(encoding="utf-8"))
        if meta.get("from_onnx_sha256") == made.sha256:
            if meta.get("refused"):
                raise BackendUnavailable(meta["refused"])
            if meta.get("sha256") == verified_sha256(path):
                return Derived(path, meta, False)
    except (OSError, ValueError):
        pass  # missing or damaged: made again below
    head = {"from": made.path.name, "from_onnx_sha256": made.sha256, "tag": tag}
    try:
        out = make()
    except Refused as exc:
        path.unlink(missing_ok=True)
        write_atomically(note, json.dumps({**head, "refused": str(exc), **exc.notes}).encode())
        raise
    data, notes = out if isinstance(out, tuple) else (out, {})
    write_atomically(path, data)
    meta = {**head, "sha256": hashlib.sha256(data).hexdigest(), **notes}
    write_atomically(note, json.dumps(meta).encode())
    return Derived(path, meta, True)
