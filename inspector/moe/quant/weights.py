"""One weight-only quantized matrix [out, in] and its product with activations.

Three kinds, all round-to-nearest:
- bf16: the weight cast to bfloat16 (halves a float32 checkpoint; a bf16 checkpoint is served as it is instead);
- int8: symmetric, one scale per output row (per channel);
- int4: asymmetric, a scale and a zero per group of `group` inputs (128 where the width allows).

The product uses PyTorch's own CPU kernels where their shape rules hold: `_weight_int8pack_mm` (int8, inputs a
multiple of 16) and `_weight_int4pack_mm_for_cpu` (int4, outputs a multiple of 16, groups of 32-256), whose
packed layout ("tinygemm-cpu") is what the copy on disk holds, so a read needs no repacking. Elsewhere (a GPU,
or a matrix too small for the kernels) the weight is dequantized to bfloat16 and multiplied ("nibbles": two
4-bit values per byte, low nibble first). Activations go in as bfloat16 and the output returns in their dtype.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from . import EXPERT_DTYPES

GROUPS = (128, 64, 32)  # int4 group sizes tried, largest first; the CPU kernel takes 32..256
PACKED = "tinygemm-cpu"
NIBBLES = "nibbles"
DENSE = "dense"


@dataclass
class QWeight:
    kind: str  # bf16 | int8 | int4
    shape: tuple[int, int]  # [out, in] of the matrix it stands for
    data: torch.Tensor  # bf16 [N, K] | int8 [N, K] | uint8 [N, K/2]
    scales: torch.Tensor  # int8: bf16 [N]; int4: bf16 [K/group, N, 2] (scale, zero); bf16: empty
    group: int = 0
    layout: str = DENSE  # int4: tinygemm-cpu or nibbles

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.data, self.scales))

    @property
    def device(self) -> torch.device:
        return self.data.device

    def to(self, device: torch.device, non_blocking: bool = False) -> QWeight:
        return QWeight(self.kind, self.shape, self.data.to(device, non_blocking=non_blocking),
                       self.scales.to(device, non_blocking=non_blocking), self.group, self.layout)

    def pin_memory(self) -> QWeight:
        return QWeight(self.kind, self.shape, self.data.pin_memory(), self.scales.pin_memory(), self.group,
                       self.layout)

    def buffers(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The tensors a read fills, in the order the copy on disk stores them."""
        return self.data, self.scales

    def linear(self, x: torch.Tensor) -> torch.Tensor:
        """x [r, K] times this weight transposed: [r, N] in x's dtype."""
        xb = x.to(torch.bfloat16)
        if self.kind == "int8" and fast_int8(self.shape, self.device):
            out = torch.ops.aten._weight_int8pack_mm(xb, self.data, self.scales)
        elif self.kind == "int4" and self.layout == PACKED:
            out = torch.ops.aten._weight_int4pack_mm_for_cpu(xb, self.data, self.group, self.scales)
        else:
            out = F.linear(xb, self.dequantize())
        return out.to(x.dtype)

    def dequantize(self) -> torch.Tensor:
        """The bfloat16 weight [N, K] this stands for (not for the CPU-packed layout, whose order is the kernel's)."""
        if self.kind == "bf16":
            return self.data
        if self.kind == "int8":
            return (self.data.to(torch.bfloat16) * self.scales[:, None]).to(torch.bfloat16)
        if self.layout == PACKED:
            raise ValueError("a CPU-packed int4 weight is only multiplied by its kernel, never unpacked")
        n, k = self.shape
        q = torch.stack([self.data & 0xF, self.data >> 4], dim=-1).view(n, k).to(torch.bfloat16)
        scale = self.scales[..., 0].T.repeat_interleave(self.group, dim=1)
        zero = self.scales[..., 1].T.repeat_interleave(self.group, dim=1)
        return (q - 8) * scale + zero


@dataclass
class QPair:
    """Gate and up quantized apart (each its own scales), multiplied as transformers' fused gate_up is."""

    gate: QWeight
    up: QWeight

    @property
    def nbytes(self) -> int:
        return self.gate.nbytes + self.up.nbytes

    @property
    def device(self) -> torch.device:
        return self.gate.device

    def to(self, device: torch.device, non_blocking: bool = False) -> QPair:
        return QPair(self.gate.to(device, non_blocking), self.up.to(device, non_blocking))

    def pin_memory(self) -> QPair:
        return QPair(self.gate.pin_memory(), self.up.pin_memory())

    def linear(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.gate.linear(x), self.up.linear(x)], dim=-1)


def expert_linear(x: torch.Tensor, w: torch.Tensor | QWeight | QPair) -> torch.Tensor:
    """x times an expert's weight, whatever form it is held in."""
    return F.linear(x, w) if isinstance(w, torch.Tensor) else w.linear(x)


def fast_int8(shape: tuple[int, int], device: torch.device) -> bool:
    return device.type == "cpu" and shape[1] % 16 == 0


def int4_layout(shape: tuple[int, int], device: torch.device) -> tuple[int, str]:
    """(group, layout) for an int4 weight of this shape served on `device`."""
    n, k = shape
    group = next((g for g in GROUPS if k % g == 0), k)
    if device.type == "cpu" and group in GROUPS and n % 16 == 0:
        return group, PACKED
    return group, NIBBLES


def quantize(w: torch.Tensor, kind: str, device: torch.device | str = "cpu") -> QWeight:
    """Round-to-nearest quantization of a [N, K] weight for serving on `device` (its layout depends on it)."""
    device = torch.device(device)
    n, k = w.shape
    wf = w.detach().float()
    if kind == "bf16":
        return QWeight("bf16", (n, k), wf.to(torch.bfloat16).contiguous(), torch.empty(0, dtype=torch.bfloat16))
    if kind == "int8":
        scale = (wf.abs().amax(dim=1) / 127).clamp(min=1e-10)
        q = (wf / scale[:, None]).round().clamp(-127, 127).to(torch.int8)
        return QWeight("int8", (n, k), q.contiguous(), scale.to(torch.bfloat16))
    if kind != "int4":
        raise ValueError(f"unknown expert dtype {kind!r}: choose one of {', '.join(EXPERT_DTYPES)}")
    group, layout = int4_layout((n, k), device)
    grouped = wf.view(n, k // group, group)
    lo, hi = grouped.amin(dim=-1, keepdim=True), grouped.amax(dim=-1, keepdim=True)
    scale = ((hi - lo) / 15).clamp(min=1e-10)
    scale_b = scale.to(torch.bfloat16).float()  # the kernel reads bf16 scales: round with those
    q = ((grouped - lo) / scale_b).round().clamp(0, 15).to(torch.int32).view(n, k)
    zero = lo + 8 * scale_b  # the kernels' convention: w = (q - 8) * scale + zero
    scales = torch.stack([scale_b.squeeze(-1), zero.squeeze(-1)], dim=-1).transpose(0, 1).contiguous()
    if layout == PACKED:
        data = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
    else:
        data = (q[:, ::2] | (q[:, 1::2] << 4)).to(torch.uint8)
    return QWeight("int4", (n, k), data.contiguous(), scales.to(torch.bfloat16), group, layout)


def packing_probe() -> str:
    """A fingerprint of the CPU int4 packing this PyTorch build writes: a copy packed by another build whose
    layout differs is refused rather than misread."""
    gen = torch.Generator().manual_seed(7)
    q = torch.randint(0, 16, (32, 64), dtype=torch.int32, generator=gen)
    return hashlib.sha256(torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1).numpy().tobytes()).hexdigest()[:16]
