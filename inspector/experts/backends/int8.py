"""INT8 for ONNX Runtime: static post-training quantisation of a checked fp32 export (QDQ, weights per channel).

Activation ranges are calibrated on crops like the ones the expert serves (`Weights.calibration`), and the
quantised model is trusted only where it agrees with the fp32 one: the decoded verdicts on those crops must be
the same for at least `AGREEMENT` of them, else the expert is served in fp32 and the backend says why. The agreement and
the largest output difference go in the file's note, so what INT8 costs each expert can be read back; a refusal
goes in the note too, kept until the weights change.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..base import Architecture
from .base import BackendUnavailable
from .export import Exported, Refused, derived

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
              session_of: Callable[[bytes | str], Any]) -> Exported:
    """The INT8 model beside `made` (`<stem>.int8.onnx`), made and checked now when missing, damaged or stale."""

    def quantise() -> tuple[bytes, dict[str, Any]]:
        given = calibration() if calibration is not None else None
        if given is None or len(given) == 0:  # not a refusal to keep: a rule set with this expert may come
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
        reference = np.asarray(session_of(str(made.path)).run(None, {"images": crops})[0])
        got = np.asarray(session_of(data).run(None, {"images": crops})[0])
        same = [(a.label, a.passed) == (b.label, b.passed) for a, b in
                zip(arch.decode(torch.from_numpy(reference)), arch.decode(torch.from_numpy(got)))]
        figures = {"agreement": sum(same) / max(1, len(same)), "crops": len(same)}
        if figures["agreement"] < AGREEMENT:
            raise Refused(f"{made.path.stem}: INT8 agrees with fp32 on {figures['agreement']:.1%} of {len(same)} "
                          f"calibration crops (at least {AGREEMENT:.0%} needed); it is served in fp32 only", figures)
        return data, {**figures, "max_abs_diff": float(np.abs(got - reference).max())}

    done = derived(made.path.with_name(f"{made.path.stem}.int8.onnx"), made, "int8", quantise)
    return Exported(done.path, done.note["sha256"], float(done.note["max_abs_diff"]), done.made)
