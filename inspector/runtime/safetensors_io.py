"""Zero-copy safetensors parsing over bytes just read from disk.

`safetensors.torch.load` copies every tensor out of the buffer; for a switch
that is a second pass over the weights. Here tensors are views of the read
buffer (kept alive by the tensors), after checking that the header is sane
so that a truncated or corrupt file is reported as such, not misread.
"""
from __future__ import annotations

import json
import struct
import warnings

import torch

DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool,
}


class CorruptWeights(ValueError):
    pass


def parse(buf: bytes) -> dict[str, torch.Tensor]:
    if len(buf) < 8:
        raise CorruptWeights(f"file is {len(buf)} bytes, too short for a safetensors header")
    (hlen,) = struct.unpack_from("<Q", buf, 0)
    if hlen > len(buf) - 8 or hlen > 100 * 2**20:
        raise CorruptWeights(f"header length {hlen} exceeds the file ({len(buf)} bytes)")
    try:
        header = json.loads(bytes(buf[8 : 8 + hlen]))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptWeights(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise CorruptWeights("header is not a mapping")
    base = 8 + hlen
    out: dict[str, torch.Tensor] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # read-only buffer: weights are never written
        for name, info in header.items():
            if name == "__metadata__":
                continue
            try:
                dtype = DTYPES[info["dtype"]]
                start, end = info["data_offsets"]
                shape = list(info["shape"])
            except (KeyError, TypeError, ValueError):
                raise CorruptWeights(f"tensor {name!r} has a malformed header entry") from None
            itemsize = torch.empty((), dtype=dtype).element_size()
            count = 1
            for dim in shape:
                count *= dim
            if not (0 <= start <= end <= len(buf) - base) or end - start != count * itemsize:
                raise CorruptWeights(f"tensor {name!r} lies outside the file or has the wrong size")
            if count == 0:
                out[name] = torch.empty(shape, dtype=dtype)
            else:
                out[name] = torch.frombuffer(buf, dtype=dtype, count=count, offset=base + start).view(shape)
    return out
