"""The one interface every expert architecture offers the engine.

Loading must be cheap: each architecture keeps one skeleton on the meta
device and a switch deep-copies it (no allocation, no init) and then assigns
the fetched tensors (`assign.py`: what `load_state_dict(..., assign=True)`
does, without its per-tensor Python walk), so a load costs the read, not
construction plus a copy. Deep-copying a module is itself slow
in Python (40 ms for a ResNet-10, 340 ms for a YOLOv8n on this project's
2-core box, against 3 ms for the assignment), so the shell of an evicted
expert is kept (its tensors dropped to meta) and the next load of the same
architecture on that device reuses it.
"""
from __future__ import annotations

import copy
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .assign import assign
from .invariance import fixed_shape
from .spec import FITS, REFERENCES, check_choice

StateDict = dict[str, torch.Tensor]
SPARE_SHELLS = 8  # per architecture and device: enough for the evictions of a burst of switches

LETTERBOX_GREY = 128.0 / 255.0  # a letterboxed crop's padding (spec.py FITS)


class BadInput(ValueError):
    """A request's image cannot be fed to its expert (wrong shape or type)."""


@dataclass(frozen=True)
class Prediction:
    """What one expert said about one crop.

    `passed` is the route's gate: a classifier passes a part when it predicts
    class 0 ("ok"); a detector passes it when its best detection is class 0
    ("in place") and reaches the confidence threshold.
    """

    label: int
    score: float
    passed: bool
    box: tuple[float, float, float, float] | None = None
    # a classifier with an operating point (a taught one): its log-odds of class 0 and its likeliest other class,
    # whatever it called: what ranks its calls on a precision-recall curve
    good_logodds: float | None = None
    likeliest_defect: int | None = None


class Architecture(ABC):
    """An expert's architecture: building, loading, preprocessing, running, sizing."""

    role: str = ""

    def __init__(self, input_size: int, classes: int, fit: str = "squash", reference: str | None = None) -> None:
        if input_size <= 0 or classes <= 0:
            raise ValueError(f"input_size and classes must be positive, got {input_size}, {classes}")
        check_choice("resize policy fit", fit, FITS)
        if reference is not None:
            check_choice("reference", reference, REFERENCES, " or none")
        self.input_size = input_size
        self.classes = classes
        self.fit = fit
        self.reference = reference
        self._skeleton: nn.Module | None = None
        self._meta_state: StateDict | None = None
        self._shells: dict[str, list[nn.Module]] = {}  # device -> spare shells, their tensors on meta
        self._lock = threading.Lock()
        self._act_per_sample: int | None = None

    # -- identity -------------------------------------------------------------------------
    @property
    @abstractmethod
    def name(self) -> str:
        """Architecture name as written in configs (resnet18, yolov8n.yaml, ...)."""

    @property
    def key(self) -> str:
        """Profiles are kept per key: experts sharing it cost the same to run and load."""
        return f"{self.name}@{self.input_size}/c{self.classes}"

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"arch": self.name, "input_size": self.input_size, "classes": self.classes}
        if self.fit != "squash":  # the demo experts' specs (and so their build keys) stay as they were
            spec["fit"] = self.fit
        if self.reference is not None:
            spec["reference"] = self.reference
        return spec

    # -- building and loading ---------------------------------------------------------------
    @abstractmethod
    def build(self) -> nn.Module:
        """A real, randomly initialised module on the CPU (for zoo building and profiling)."""

    def skeleton(self) -> nn.Module:
        """The meta-device template every load copies; built once per architecture."""
        with self._lock:
            if self._skeleton is None:
                module = self.build().eval()
                # Module._apply, not .to(): some models (ultralytics) override _apply to also
                # move plain tensor attributes (strides) that must stay real.
                nn.Module._apply(module, lambda t: t.to("meta"))
                self._skeleton = module
            return self._skeleton

    def materialize(self, state: StateDict, device: torch.device) -> nn.Module:
        """A runnable module whose parameters *are* the given tensors (no copy): a spare shell or a new one."""
        with self._lock:
            spare = self._shells.get(str(device))
            module = spare.pop() if spare else None
        if module is None:
            module = copy.deepcopy(self.skeleton()).eval()
        assign(module, state)
        if device.type != "cpu":
            _move_real(module, device)  # parameters already there; moves non-parameter tensors
        return module

    def keep_shells(self, device: torch.device, count: int) -> None:
        """Build spare shells up to `count` for `device` now (before serving), so no switch pays the copy."""
        count = min(count, SPARE_SHELLS)
        while True:
            with self._lock:
                if len(self._shells.get(str(device), ())) >= count:
                    return
            shell = copy.deepcopy(self.skeleton())
            if device.type != "cpu":
                _move_real(shell, device)  # non-parameter tensors (strides) live where the module runs
            with self._lock:
                self._shells.setdefault(str(device), []).append(shell)

    def retire(self, module: nn.Module, device: torch.device) -> None:
        """An evicted expert's module: drop its tensors (to meta) and keep the shell for the next load here.

        Only modules this architecture materialized, no longer in use; at most
        SPARE_SHELLS are kept per device, the rest are left to the collector.
        """
        with self._lock:
            if len(self._shells.get(str(device), ())) >= SPARE_SHELLS:
                return
            meta = self._meta_state
        if meta is None:  # skeleton() takes the lock itself
            meta = self._meta_state = dict(self.skeleton().state_dict())
        assign(module, meta)
        with self._lock:
            self._shells.setdefault(str(device), []).append(module)

    def random_state(self, seed: int) -> StateDict:
        torch.manual_seed(seed)
        module = self.build().eval()
        return {k: v.detach().contiguous() for k, v in module.state_dict().items()}

    def weight_bytes(self) -> int:
        sk = self.skeleton()
        tensors = list(sk.parameters()) + list(sk.buffers())
        return sum(t.numel() * t.element_size() for t in tensors)

    # -- running --------------------------------------------------------------------------
    def check(self, image: torch.Tensor) -> None:
        """Raise BadInput unless `image` is a 3xHxW crop (cheap: shapes only)."""
        if not isinstance(image, torch.Tensor):
            raise BadInput(f"image must be a torch.Tensor, got {type(image).__name__}")
        if image.dim() != 3 or image.shape[0] != 3 or image.shape[1] < 8 or image.shape[2] < 8:
            raise BadInput(
                f"image must be 3xHxW with H, W >= 8 (RGB, channels first); got shape "
                f"{tuple(image.shape)}"
            )

    def preprocess(self, image: torch.Tensor) -> torch.Tensor:
        """Validate a 3xHxW crop (uint8 or float) and resize it to this architecture's input."""
        self.check(image)
        return self.preprocess_batch(image.unsqueeze(0)).squeeze(0).contiguous()

    def preprocess_many(self, images: list[torch.Tensor]) -> torch.Tensor:
        """A batch of crops (each checked) as one N x 3 x S x S tensor: crops of one size and type are resized in
        one call (a board's parts of a type share a size), so the executor spends no Python loop per crop. Each
        output is the same as `preprocess` alone gives: interpolation and scaling work pixel by pixel."""
        groups: dict[tuple[tuple[int, ...], torch.dtype], list[int]] = {}
        for i, image in enumerate(images):
            self.check(image)
            groups.setdefault((tuple(image.shape), image.dtype), []).append(i)
        if len(groups) == 1:
            return self.preprocess_batch(torch.stack(images))
        done = [(idx, self.preprocess_batch(torch.stack([images[i] for i in idx]))) for idx in groups.values()]
        out = torch.empty((len(images), *done[0][1].shape[1:]), dtype=done[0][1].dtype)
        for idx, part in done:
            out[idx] = part
        return out

    def preprocess_batch(self, images: torch.Tensor) -> torch.Tensor:
        """`preprocess` for N crops of one size at once (training): the same arithmetic, one call."""
        if not images.is_floating_point():
            images = images.float() / 255.0
        h, w = images.shape[2:]
        if self.fit == "letterbox" and h != w:
            side = max(h, w)
            left, top = (side - w) // 2, (side - h) // 2
            images = F.pad(images, (left, side - w - left, top, side - h - top), value=LETTERBOX_GREY)
        if images.shape[2:] != (self.input_size, self.input_size):
            images = F.interpolate(images, size=(self.input_size, self.input_size), mode="bilinear",
                                   align_corners=False)
        return images.contiguous()

    def unfit(self, size: tuple[int, int]) -> tuple[float, float, float, float]:
        """(scale x, scale y, offset x, offset y) taking the input's pixels back to a crop of `size` (w, h): the
        inverse of `preprocess_batch`'s fitting, so a box is read where it lies in the crop under either fit."""
        w, h = size
        s = self.input_size
        if self.fit == "letterbox" and w != h:
            side = max(w, h)
            return side / s, side / s, -float((side - w) // 2), -float((side - h) // 2)
        return w / s, h / s, 0.0, 0.0

    def run(self, module: nn.Module, batch: torch.Tensor) -> list[Prediction]:
        """Predictions for a preprocessed batch (N x 3 x S x S) on the module's device.

        On a GPU at one fixed batch shape (invariance.py), so a crop's verdict
        does not depend on its batch-mates.
        """
        if batch.is_cuda:
            return self.decode(fixed_shape(lambda part: self.forward(module, part), batch))
        return self.decode(self.forward(module, batch))

    @abstractmethod
    def forward(self, module: nn.Module, batch: torch.Tensor) -> torch.Tensor:
        """The module's raw output for a batch: the one tensor an exported runtime model returns too."""

    @abstractmethod
    def decode(self, raw: torch.Tensor) -> list[Prediction]:
        """Predictions from the raw output (whichever backend computed it)."""

    def export_module(self, module: nn.Module) -> nn.Module:
        """The module as a runtime exports it: one input, the raw output tensor (`forward`'s)."""
        return module

    # -- sizing ----------------------------------------------------------------------------
    def activation_bytes(self, batch: int) -> int:
        """Estimated peak intermediate memory of one forward pass at this batch size.

        Measured once per architecture with forward hooks on a real module: the
        largest (input + output) of any leaf layer, plus the largest output again
        for skip connections that keep a tensor alive. A CUDA profile replaces
        this estimate with max_memory_allocated.
        """
        if self._act_per_sample is None:
            self._act_per_sample = _hooked_peak_bytes(self.build().eval(), self.input_size)
        return batch * self._act_per_sample


def _hooked_peak_bytes(module: nn.Module, size: int) -> int:
    peak_pair = 0
    largest_out = 0

    def nbytes(obj: Any) -> int:
        if isinstance(obj, torch.Tensor):
            return obj.numel() * obj.element_size()
        if isinstance(obj, (list, tuple)):
            return sum(nbytes(o) for o in obj)
        if isinstance(obj, dict):
            return sum(nbytes(o) for o in obj.values())
        return 0

    def hook(_mod: nn.Module, inputs: Any, output: Any) -> None:
        nonlocal peak_pair, largest_out
        out = nbytes(output)
        peak_pair = max(peak_pair, nbytes(inputs) + out)
        largest_out = max(largest_out, out)

    handles = [m.register_forward_hook(hook) for m in module.modules() if not list(m.children())]
    try:
        with torch.inference_mode():
            module(torch.zeros(1, 3, size, size))
    finally:
        for h in handles:
            h.remove()
    return peak_pair + largest_out


def _move_real(module: nn.Module, device: torch.device) -> None:
    """`module.to(device)` for a shell whose weights may still be on meta: moves only the real tensors.

    Through the module's own `_apply`, so ultralytics' override also moves the
    detection head's plain tensor attributes (strides, anchors).
    """
    module._apply(lambda t: t if t.is_meta else t.to(device))
