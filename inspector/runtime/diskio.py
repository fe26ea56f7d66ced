"""Disk reads that stay honest: a file read for a switch leaves the page cache.

Without this, the second "disk" load of an expert is a memory copy and a
benchmark of switches measures nothing. posix_fadvise(DONTNEED) drops the
file's clean pages after each read; `drop_cache=False` turns it off.
"""
from __future__ import annotations

import os
from pathlib import Path


def read_bytes(path: Path | str, drop_cache: bool = True) -> bytes:
    """Read a whole file; with drop_cache its pages do not linger in RAM afterwards."""
    with open(path, "rb", buffering=0) as f:
        data = f.read()
        if drop_cache and hasattr(os, "posix_fadvise"):
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return data


def drop_pages(path: Path | str) -> None:
    """Drop a file's clean pages from the page cache, so that its next read is a disk read."""
    if not hasattr(os, "posix_fadvise"):
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def fsync_and_drop(path: Path | str) -> None:
    """After writing weights: flush them so that DONTNEED can really drop them."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read_range(path: Path | str, offset: int, length: int, drop_cache: bool = True) -> bytearray:
    """Read `length` bytes at `offset` (one tensor of a checkpoint shard); with drop_cache those pages leave RAM."""
    buf = bytearray(length)
    read_ranges_into(path, [(offset, memoryview(buf))], drop_cache)
    return buf


def read_ranges_into(path: Path | str, ranges: list[tuple[int, memoryview]], drop_cache: bool = True) -> None:
    """Read each (offset, destination) of one file straight into its destination: no intermediate buffer,
    no copy; with drop_cache the pages read leave RAM afterwards."""
    with open(path, "rb", buffering=0) as f:
        for offset, dest in ranges:
            f.seek(offset)
            got, length = 0, len(dest)
            while got < length:
                n = f.readinto(dest[got:])
                if not n:
                    raise EOFError(f"{path}: wanted {length} bytes at {offset}, the file ends after {got}")
                got += n
        if drop_cache and hasattr(os, "posix_fadvise"):
            for offset, dest in ranges:
                os.posix_fadvise(f.fileno(), offset, len(dest), os.POSIX_FADV_DONTNEED)


def write_atomically(path: Path | str, data: bytes) -> None:
    """Replace `path` whole or not at all: written beside it, fsynced, renamed over it, the directory fsynced (a
    power cut leaves the old file or the new one, never half of one)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
