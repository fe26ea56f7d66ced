"""YOLO detectors (ultralytics) from a model yaml or a local .pt, never a download."""
from __future__ import annotations

import logging

import torch
from torch import nn

from .base import Architecture, Prediction
from .spec import MODES, UnknownArchitecture, check_choice, check_detector_model

VERIFY_THRESHOLD = 0.25  # a verifier's box confidence unless one was chosen for it (the demo's, always)


class YoloDetector(Architecture):
    """A detector shared by many component types.

    Its verdict is the best detection over the crop: the class, the confidence
    and the box (x, y, w, h in input pixels). `mode` verify (the demo's: it
    checks alignment and polarity): the part passes when the best class is 0
    (in place) and its confidence reaches `threshold`. `mode` find (a detector
    taught from labelled defects, every class a defect): the part passes when
    no detection reaches `threshold`. `reference`: it reads the crop beside the
    golden board's (ingest/golden.py), as a golden-comparison classifier does.
    """

    role = "detector"

    def __init__(self, model: str, input_size: int = 64, classes: int = 4, threshold: float = VERIFY_THRESHOLD,
                 mode: str = "verify", fit: str = "squash", reference: str | None = None) -> None:
        check_choice("detector mode", mode, MODES)
        if input_size % 32:
            raise ValueError(f"YOLO input size must be a multiple of 32, got {input_size}")
        check_detector_model(model)
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"a detector's threshold is a box confidence from 0 to 1, got {threshold}")
        super().__init__(input_size, classes, fit, reference)
        self.model = model
        self.threshold = threshold
        self.mode = mode

    @property
    def name(self) -> str:
        return self.model

    @property
    def good_class(self) -> int | None:
        """The class a part passes by when it verifies (0), None when it finds (every class a defect)."""
        return 0 if self.mode == "verify" else None

    def spec(self) -> dict:
        spec = super().spec()
        if self.mode != "verify":  # the demo detectors' specs stay as they were
            spec.update(mode=self.mode, threshold=self.threshold)
        elif self.threshold != VERIFY_THRESHOLD:  # a taught verifier's, chosen on its held-out images
            spec["threshold"] = self.threshold
        return spec

    def build(self) -> nn.Module:
        if self.model.endswith(".pt"):
            from ultralytics.nn.tasks import load_checkpoint

            module, _ = load_checkpoint(self.model, device="cpu")
            return module.float()
        from ultralytics.nn.tasks import DetectionModel
        from ultralytics.utils import LOGGER

        LOGGER.setLevel(logging.WARNING)  # "Overriding model.yaml nc=..." on every build
        try:
            return DetectionModel(self.model, nc=self.classes, verbose=False)
        except FileNotFoundError as exc:
            raise UnknownArchitecture(f"YOLO model yaml {self.model!r} not found: {exc}") from None

    def forward(self, module: nn.Module, batch: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            out = module(batch)
            return (out[0] if isinstance(out, (list, tuple)) else out).float()

    def export_module(self, module: nn.Module) -> nn.Module:
        return _FirstOutput(module)

    def decode(self, raw: torch.Tensor) -> list[Prediction]:
        preds = raw.float().cpu()
        # preds: N x (4 + classes) x anchors; boxes are xywh in input pixels.
        boxes, scores = preds[:, :4, :], preds[:, 4:, :]
        best_cls_score, best_cls = scores.max(dim=1)  # N x anchors
        score, anchor = best_cls_score.max(dim=1)  # N
        results = []
        for i in range(preds.shape[0]):
            a = int(anchor[i])
            box = tuple(float(v) for v in boxes[i, :, a].tolist())
            s, label = float(score[i]), int(best_cls[i, a])
            passed = s < self.threshold if self.mode == "find" else s >= self.threshold and label == 0
            results.append(Prediction(label=label, score=s, passed=passed, box=box))
        return results


class _FirstOutput(nn.Module):
    """The detection head's decoded predictions only (N x (4 + classes) x anchors): what an exported runtime
    model returns, so every backend decodes the same tensor."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.model(x)
        return out[0] if isinstance(out, (list, tuple)) else out
