"""INT8 for ONNX Runtime: static post-training quantisation of a checked fp32 export (QDQ, weights per channel).

Activation ranges are calibrated on crops like the ones the expert serves (`Weights.calibration`), and the
quantised model is trusted only where it agrees with the fp32 one: the decoded verdicts on those crops must be
the same for at least `AGREEMENT` of them, else the expert is served in fp32 and the backend says why. The agreement and
the largest output difference go in the file's note, so what INT8 costs each expert can be read back; a refusal
goes in the note too, kept until the weights change.
"""
from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...runtime.diskio import write_atomically
from ..base import Architecture
from .base import BackendUnavailable
from .export import Exported, verified_sha256

AGREEMENT = 0.99  # verdicts equal to fp32's on the calibration crops, or the expert is not served in INT8
MOST_CROPS = 64  # calibration crops used (MinMax over more moves the ranges little and costs time)


class _Reader:
    """onnxruntime.quantization's calibration data reader over a tensor of preprocessed crops, 8 at a time."""

    def __init__(self, crops: np.ndarray) -> None:
        self.batches = iter([crops[i:i + 8] for i in range(0, len(crops), 8)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        batch = next(self.batches, None)
        return None if batch is None else {"images": batch}

    def rewind(self) -> None:  # pragma: no cover - the calibrator reads once
        pass


def quantised(arch: Architecture, made: Exported, calibration: Callable[[], torch.Tensor] | None,
              session_of: Callable[[str], Any]) -> Exported:
    """The INT8 model beside `made` (`<stem>.int8.onnx`), made and checked now when missing, damaged or stale."""
    path = made.path.with_name(f"{made.path.stem}.int8.onnx")
    note = path.with_suffix(".json")
    try:
        meta = json.loads(note.read_text(encoding="utf-8"))
        if meta.get("from_onnx_sha256") == made.sha256 and meta.get("refused"):
            raise BackendUnavailable(meta["refused"])  # refused for these weights before: until they change
        if meta.get("from_onnx_sha256") == made.sha256 and meta.get("sha256") == verified_sha256(path):
            return Exported(path, meta["sha256"], float(meta["max_abs_diff"]), False)
    except (OSError, ValueError, KeyError):
        pass  # missing or damaged: made again below
    given = calibration() if calibration is not None else None
    if given is None or len(given) == 0:
        raise BackendUnavailable(f"{made.path.stem}: INT8 needs calibration crops (the line's rule set or the "
                                 "workload gives them; this expert is in neither); it is served in fp32")
    crops = np.ascontiguousarray(given[:MOST_CROPS].numpy(), dtype=np.float32)
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with tempfile.TemporaryDirectory() as tmp:
        pre, out = Path(tmp) / "pre.onnx", Path(tmp) / "int8.onnx"
        quant_pre_process(str(made.path), str(pre), skip_symbolic_shape=True)
        quantize_static(str(pre), str(out), _Reader(crops), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod.MinMax)
        data = out.read_bytes()
    reference = session_of(str(made.path)).run(None, {"images": crops})[0]
    write_atomically(path, data)
    got = session_of(str(path)).run(None, {"images": crops})[0]
    same = [(a.label, a.passed) == (b.label, b.passed) for a, b in
            zip(arch.decode(torch.from_numpy(np.asarray(reference))), arch.decode(torch.from_numpy(np.asarray(got))))]
    agreement = sum(same) / max(1, len(same))
    diff = float(np.abs(np.asarray(got) - np.asarray(reference)).max())
    sha = hashlib.sha256(data).hexdigest()
    if agreement < AGREEMENT:
        path.unlink(missing_ok=True)
        reason = (f"{made.path.stem}: INT8 agrees with fp32 on {agreement:.1%} of {len(same)} calibration crops (at "
                  f"least {AGREEMENT:.0%} needed); it is served in fp32 only")
        # the refusal is kept with the weights it was made for, so every process serving them knows why (and no
        # start quantises it again); new weights, or deleting the note, try again
        write_atomically(note, json.dumps({"from_onnx_sha256": made.sha256, "refused": reason,
                                           "agreement": agreement, "crops": len(same)}).encode())
        raise BackendUnavailable(reason)
    write_atomically(note, json.dumps({"from_onnx_sha256": made.sha256, "sha256": sha, "max_abs_diff": diff,
                                       "agreement": agreement, "crops": len(same)}).encode())
    return Exported(path, sha, diff, True)
