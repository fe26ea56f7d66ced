"""Disk reads that stay honest: a file read for a switch does not come from, or stay in, the page cache.

Without this, the second "disk" load of an expert is a memory copy and a
benchmark of switches measures nothing. Reads are O_DIRECT where the
filesystem allows (the page cache is bypassed, and the CPU copies little);
elsewhere posix_fadvise(DONTNEED) drops the file's clean pages after each
read. `drop_cache=False` turns both off.
"""
from __future__ import annotations

import ctypes
import errno
import glob
import mmap
import os
import tempfile
import threading
import time
from pathlib import Path

DIRECT_CHUNK = 8 * 2**20  # one O_DIRECT request: large enough that the per-request cost vanishes
DIRECT_ALIGN = 4096  # buffer address, offset and length: covers logical blocks up to 4 KiB
IN_PLACE_CHUNK = 64 * 2**20  # one request straight into a destination (no bounce buffer bounds it)
COALESCE_GAP = 64 * 2**10  # ranges this close share one request: reading the gap costs less than a request
_NO_DIRECT: set[int] = set()  # filesystems (st_dev) that refused O_DIRECT once (tmpfs, some overlays)


def round_up(nbytes: int, to: int = DIRECT_ALIGN) -> int:
    return -(-nbytes // to) * to


def _direct_wanted(drop_cache: bool, st_dev: int) -> bool:
    """Whether to try O_DIRECT: a disk read asked for, on a filesystem that has not refused it."""
    return drop_cache and hasattr(os, "O_DIRECT") and st_dev not in _NO_DIRECT


def file_stamp(path: Path | str) -> tuple[int, int, int]:
    """(size, mtime ns, inode) of a file, (-1, -1, -1) when it cannot be read: what a hash checked once is keyed
    on, so that a file replaced or rewritten is hashed again."""
    try:
        st = os.stat(path)
        return st.st_size, st.st_mtime_ns, st.st_ino
    except OSError:
        return -1, -1, -1


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
    """Read each (offset, destination) of one file into its destination.

    With drop_cache the reads are O_DIRECT where the filesystem allows: the
    aligned blocks around each range land in this thread's bounce buffer (the
    ranges of a checkpoint shard sit at any offset) and the range is copied
    out, which costs a quarter of the CPU of a page-cache read and its
    dropping, and a third of the time here. Neighbouring ranges share one
    request (`_runs`): an expert's three projections are one read, not three.
    Otherwise buffered reads straight into each destination, their pages
    dropped afterwards when asked.
    """
    if _direct_wanted(drop_cache, os.stat(path).st_dev) and _read_ranges_direct(path, ranges):
        return
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


_BOUNCE = threading.local()  # each reading thread's aligned buffer for O_DIRECT reads of unaligned ranges


def _bounce() -> memoryview:
    view = getattr(_BOUNCE, "view", None)
    if view is None or len(view) < DIRECT_CHUNK + 2 * DIRECT_ALIGN:
        view = _BOUNCE.view = memoryview(mmap.mmap(-1, DIRECT_CHUNK + 2 * DIRECT_ALIGN))
    return view


def _runs(ranges: list[tuple[int, memoryview]]) -> list[list[tuple[int, memoryview]]]:
    """The ranges grouped into runs that one O_DIRECT request covers: neighbours (an expert's three projections
    lie side by side in a shard) whose gaps are at most COALESCE_GAP and whose aligned cover fits the bounce
    buffer. One request for a run costs one seek and one completion instead of one per range."""
    runs: list[list[tuple[int, memoryview]]] = []
    start = stop = 0
    for offset, dest in sorted(ranges, key=lambda r: r[0]):
        end = offset + len(dest)
        if (runs and offset - stop <= COALESCE_GAP
                and round_up(max(stop, end) - (start - start % DIRECT_ALIGN)) <= DIRECT_CHUNK):
            runs[-1].append((offset, dest))
            stop = max(stop, end)
            continue
        runs.append([(offset, dest)])
        start, stop = offset, end
    return runs


def _read_ranges_direct(path: Path | str, ranges: list[tuple[int, memoryview]]) -> bool:
    """O_DIRECT reads of unaligned ranges through the bounce buffer; False (remembered) where unsupported."""
    fd = _open_direct(path)
    if fd is None:
        return False
    bounce = _bounce()
    try:
        first = True
        for run in _runs(ranges):
            offset, dest = run[0]
            if len(run) > 1 or round_up(offset % DIRECT_ALIGN + len(dest)) <= DIRECT_CHUNK:  # one request covers it
                if not _read_run(fd, path, run, bounce, first):
                    return False
                first = False
                continue
            if (_address(dest) - offset) % DIRECT_ALIGN == 0:  # its buffer lines up with the file: no bounce
                if not _read_in_place(fd, path, offset, dest, bounce, first):
                    return False
                first = False
                continue
            # a range larger than the bounce buffer: request by request
            got, length = 0, len(dest)
            while got < length:
                start = offset + got
                lead = start % DIRECT_ALIGN
                want = min(length - got, DIRECT_CHUNK)
                n = _pread_direct(fd, bounce[: round_up(lead + want)], start - lead, first)
                if n is None:
                    return False
                first = False
                have = min(n - lead, want)
                if have <= 0:
                    raise EOFError(f"{path}: wanted {length} bytes at {offset}, the file ends after {got}")
                dest[got : got + have] = bounce[lead : lead + have]
                got += have
        return True
    finally:
        os.close(fd)


def _read_in_place(fd: int, path: Path | str, offset: int, dest: memoryview, bounce: memoryview,
                   first: bool) -> bool:
    """A large range whose destination address matches its file offset modulo the alignment (buffers.py makes
    them so): the aligned middle is read by the disk straight into `dest` in large requests; only the partial
    blocks at either end pass through the bounce buffer. A bounce copy serialised with each request halves a
    large read's speed here (a 336 MiB expert: 800 MiB/s through the bounce, the disk gives 1.5 GB/s)."""
    length = len(dest)
    head = min(length, (-offset) % DIRECT_ALIGN)
    body = (length - head) // DIRECT_ALIGN * DIRECT_ALIGN
    ends = [(offset, dest[:head])] if head else []
    if length - head - body:
        ends.append((offset + head + body, dest[head + body:]))
    for end_offset, end_dest in ends:  # each end lies within one aligned block
        if not _read_run(fd, path, [(end_offset, end_dest)], bounce, first):
            return False
        first = False
    got = 0
    while got < body:
        want = min(body - got, IN_PLACE_CHUNK)
        n = _pread_direct(fd, dest[head + got : head + got + want], offset + head + got, first and got == 0)
        if n is None:
            return False
        if n <= 0 or n % DIRECT_ALIGN:  # a short, unaligned read ends at the file's end
            raise EOFError(f"{path}: wanted {length} bytes at {offset}, the file ends after {head + got + max(0, n)}")
        got += n
    return True


def _read_run(fd: int, path: Path | str, run: list[tuple[int, memoryview]], bounce: memoryview,
              first: bool) -> bool:
    """One O_DIRECT request for the aligned blocks that cover a run of ranges, each range copied out of it."""
    base = run[0][0] - run[0][0] % DIRECT_ALIGN
    want = round_up(max(offset + len(dest) for offset, dest in run) - base)
    got = 0
    while got < want:  # a regular file answers in one request, save at its end
        n = _pread_direct(fd, bounce[got:want], base + got, first and got == 0)
        if n is None:
            return False
        got += n
        if not n or n % DIRECT_ALIGN:  # the file ended (a short read ends at the file's end)
            break
    for offset, dest in run:
        lead = offset - base
        if lead + len(dest) > got:
            raise EOFError(f"{path}: wanted {len(dest)} bytes at {offset}, the file ends after "
                           f"{max(0, got - lead)}")
        dest[:] = bounce[lead : lead + len(dest)]
    return True


def read_into(path: Path | str, dest: memoryview, drop_cache: bool = True) -> int:
    """Read a whole file into `dest` (a writable buffer at least the file's size); the file's size.

    With drop_cache, a buffer aligned to DIRECT_ALIGN and room for the size
    rounded up to it, the read is O_DIRECT: the disk's DMA fills `dest`, the
    page cache is bypassed (the read is honestly a disk read) and the CPU
    copies nothing, which leaves the cores to the executors. Otherwise, or
    where the filesystem refuses O_DIRECT, a buffered read in 1 MiB steps
    straight into `dest`, its pages dropped afterwards when asked.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        size = st.st_size
        if len(dest) < size:
            raise ValueError(f"{path}: {size} bytes do not fit a {len(dest)}-byte buffer")
        rounded = round_up(size)
        if (_direct_wanted(drop_cache, st.st_dev) and len(dest) >= rounded and _address(dest) % DIRECT_ALIGN == 0
                and _read_direct(path, dest[:rounded], size)):
            return size
        _read_buffered(fd, path, dest, size)
        if drop_cache and hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return size
    finally:
        os.close(fd)


def _open_direct(path: Path | str) -> int | None:
    """The file opened for O_DIRECT, or None (remembered for its filesystem) where that is refused."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
        _NO_DIRECT.add(os.stat(path).st_dev)
        return None


def _pread_direct(fd: int, view: memoryview, offset: int, first: bool) -> int | None:
    """One O_DIRECT read; None (remembered for the filesystem) when its very first read is refused."""
    try:
        return os.preadv(fd, [view], offset)
    except OSError as exc:
        if exc.errno != errno.EINVAL or not first:
            raise
        _NO_DIRECT.add(os.fstat(fd).st_dev)
        return None


def _address(buf: memoryview) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(buf))


def _read_direct(path: Path | str, dest: memoryview, size: int) -> bool:
    """O_DIRECT into an aligned `dest`; False (and remembered per filesystem) where it is not supported."""
    fd = _open_direct(path)
    if fd is None:
        return False
    try:
        got = 0
        while got < size:
            n = _pread_direct(fd, dest[got : got + DIRECT_CHUNK], got, got == 0)
            if n is None:
                return False
            if not n:
                raise EOFError(f"{path}: the file ended after {got} of its {size} bytes while being read")
            got += n
        return True
    finally:
        os.close(fd)


def _read_buffered(fd: int, path: Path | str, dest: memoryview, size: int) -> None:
    got = 0
    while got < size:
        n = os.preadv(fd, [dest[got : min(size, got + 2**20)]], got)
        if not n:
            raise EOFError(f"{path}: the file ended after {got} of its {size} bytes while being read")
        got += n


def write_atomically(path: Path | str, data: bytes) -> None:
    """Replace `path` whole or not at all: written beside it, fsynced, renamed over it, the directory fsynced (a
    power cut leaves the old file or the new one, never half of one).

    The file beside it has a name of its own per call: two processes making the same file (a bench and the kiosk
    preparing one zoo) each rename a whole file of theirs, where one shared name let them write into one file and
    rename it half written, or rename it from under each other."""
    path = Path(path)
    scratch = scratch_beside(path)
    try:
        with open(scratch, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(scratch, 0o666 & ~_UMASK)  # as open() would have made it: mkstemp makes files 0600
        os.replace(scratch, path)
    except OSError as exc:  # named as the file it was to replace, not the scratch file beside it
        scratch.unlink(missing_ok=True)
        if exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    except BaseException:
        scratch.unlink(missing_ok=True)
        raise
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


STALE_S = 3600.0  # a temporary file this old was left by a writer killed between writing and renaming


_SWEPT: set[tuple[Path, str]] = set()  # files whose leftovers this process has swept: once each, not every write


def scratch_beside(path: Path | str, suffix: str = ".tmp") -> Path:
    """A new empty file of this call's own beside `path`, for a writer that must be given a file name (ONNX
    Runtime saving an optimised model: its suffix says the format) and then reads or renames it; the caller removes
    it. What a killed caller left under the same pattern is swept as `write_atomically`'s leftovers are."""
    path = Path(path)
    _drop_stale(path, suffix)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    os.close(fd)
    return Path(name)


def _drop_stale(path: Path, suffix: str = ".tmp") -> None:
    """Remove what killed writers of `path` left beside it (a write takes seconds, so one untouched for STALE_S is no
    other writer's at work); a file that goes meanwhile is another writer's cleaning. Once per file and process: a
    file replaced often (the outbox's position, on every acknowledgement) does not list its folder each time."""
    key = (path.parent, path.name + suffix)
    if key in _SWEPT:
        return
    _SWEPT.add(key)
    cutoff = time.time() - STALE_S
    for left in path.parent.glob(f".{glob.escape(path.name)}.*{glob.escape(suffix)}"):
        try:
            if left.stat().st_mtime < cutoff:
                left.unlink()
        except FileNotFoundError:
            pass


def _read_umask() -> int:
    """The process's umask, read once at import: reading it sets it, which no thread should see happen later."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()
