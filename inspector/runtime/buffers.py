"""Read buffers that line up with the file they are read from, so an O_DIRECT read lands in them directly.

O_DIRECT wants the file offset and the memory address both aligned. A tensor in a checkpoint sits at any
offset, so a plain buffer receives it through a bounce buffer, one copy per request, serialised with the
reads. A buffer whose address has the same remainder (modulo the alignment) as the tensor's file offset
takes the aligned middle of the read in place (diskio._read_in_place): only its partial first and last
blocks are copied. It costs one alignment's worth of bytes per buffer.
"""
from __future__ import annotations

import math

import torch

from .diskio import DIRECT_ALIGN


def empty_for_read(shape: tuple[int, ...] | torch.Size, dtype: torch.dtype, file_offset: int,
                   keep: int = 0) -> torch.Tensor:
    """An uninitialised tensor whose first byte's address is congruent to `file_offset` modulo the alignment.

    `keep`: the address alignment a kernel needs (PyTorch's packed int4/int8 kernels load 64-byte vectors and
    crash on less); when lining up would break it, or the element size, a plain tensor is returned instead."""
    keep = max(keep, dtype.itemsize)
    if file_offset % keep:
        return torch.empty(shape, dtype=dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    raw = torch.empty(nbytes + DIRECT_ALIGN, dtype=torch.uint8)
    shift = (file_offset - raw.data_ptr()) % DIRECT_ALIGN
    if (raw.data_ptr() + shift) % keep:
        return torch.empty(shape, dtype=dtype)
    return raw[shift:shift + nbytes].view(dtype).view(shape)
