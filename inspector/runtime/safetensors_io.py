"""Zero-copy safetensors parsing over bytes just read from disk.

`safetensors.torch.load` copies every tensor out of the buffer; for a switch
that is a second pass over the weights. Here tensors are views of the read
buffer (kept alive by the tensors), after checking that the header is sane
so that a truncated or corrupt file is reported as such, not misread.
"""
from __future__ import annotations

import json
import math
import os
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool, "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
}


class CorruptWeights(ValueError):
    pass


@dataclass(frozen=True)
class TensorSpan:
    """Where one tensor lies in a safetensors file, so it can be read alone."""

    path: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    offset: int  # from the start of the file
    nbytes: int

    def from_bytes(self, buf: bytes | bytearray) -> torch.Tensor:
        if len(buf) != self.nbytes:
            raise CorruptWeights(f"{self.path}: read {len(buf)} bytes of a {self.nbytes}-byte tensor")
        if self.nbytes == 0:
            return torch.empty(self.shape, dtype=self.dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return torch.frombuffer(buf, dtype=self.dtype).view(self.shape)


def header_index(path: str | Path) -> dict[str, TensorSpan]:
    """Every tensor's span in a safetensors file, from its header alone (the weights are not read)."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise CorruptWeights(f"{path}: too short for a safetensors header")
        (hlen,) = struct.unpack("<Q", head)
        size = os.fstat(f.fileno()).st_size
        raw = f.read(hlen) if hlen <= size - 8 else b""
    return _spans(raw, hlen, size, str(path))


def parse(buf: bytes | memoryview) -> dict[str, torch.Tensor]:
    """Every tensor of a whole safetensors file in memory, as views of `buf`."""
    if len(buf) < 8:
        raise CorruptWeights(f"file is {len(buf)} bytes, too short for a safetensors header")
    (hlen,) = struct.unpack_from("<Q", buf, 0)
    spans = _spans(bytes(buf[8 : 8 + hlen]) if hlen <= len(buf) - 8 else b"", hlen, len(buf), "")
    out: dict[str, torch.Tensor] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a read-only bytes buffer: weights are never written
        for name, span in spans.items():
            count = math.prod(span.shape)
            if count == 0:
                out[name] = torch.empty(span.shape, dtype=span.dtype)
            else:
                out[name] = torch.frombuffer(buf, dtype=span.dtype, count=count, offset=span.offset).view(span.shape)
    return out


def _spans(raw_header: bytes, hlen: int, size: int, path: str) -> dict[str, TensorSpan]:
    """The header's tensors, checked against the file size so a truncated or corrupt file is said to be one."""
    where = f"{path}: " if path else ""
    if hlen > size - 8 or hlen > 100 * 2**20:
        raise CorruptWeights(f"{where}header length {hlen} exceeds the file ({size} bytes)")
    try:
        header = json.loads(raw_header)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptWeights(f"{where}header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise CorruptWeights(f"{where}header is not a mapping")
    base = 8 + hlen
    out: dict[str, TensorSpan] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = DTYPES[info["dtype"]]
            start, end = info["data_offsets"]
            shape = tuple(int(d) for d in info["shape"])
        except (KeyError, TypeError, ValueError):
            raise CorruptWeights(f"{where}tensor {name!r} has a malformed header entry") from None
        itemsize = torch.empty((), dtype=dtype).element_size()
        if not (0 <= start <= end <= size - base) or end - start != math.prod(shape) * itemsize:
            raise CorruptWeights(f"{where}tensor {name!r} lies outside the file or has the wrong size")
        out[name] = TensorSpan(path, dtype, shape, base + start, end - start)
    return out
