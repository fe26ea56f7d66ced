"""The results spool: board records on disk while the database cannot take them, read back incrementally.

An append-only file of JSON lines and a small position file: the byte offset of the first board not yet
stored. Appends are fsynced; the position is replaced atomically after each stored chunk, so a crash at any
moment leaves either the old position (the chunk is replayed: the store skips boards it already has, by
inspection id) or the new one. A torn tail (a power cut mid-append) is closed with a newline before anything
is appended behind it, and a line that does not parse goes to the dead-letter file with its reason instead of
stopping the line. When everything is stored, both files are removed.
"""
from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..runtime.diskio import write_atomically
from .records import BoardRecord


@dataclass
class SpoolEntry:
    board: BoardRecord | None  # None: the line could not be read back (see `reason`)
    raw: bytes
    end: int  # byte offset just past this line
    reason: str | None = None


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class Spool:
    def __init__(self, path: str | Path, dead_letters: str | Path | None = None) -> None:
        self.path = Path(path)
        self.pos_path = self.path.with_name(self.path.name + ".pos")
        self.dead_path = Path(dead_letters) if dead_letters else self.path.with_name("dead-letter.jsonl")
        self.dead = self._count_lines(self.dead_path, 0)
        self._pos = self._read_pos()
        self._close_torn_tail()
        self.count = self._count_lines(self.path, self._pos)

    # -- state --------------------------------------------------------------------------------------
    def _read_pos(self) -> int:
        try:
            pos = int(self.pos_path.read_text(encoding="ascii").strip() or 0)
        except (OSError, ValueError):
            return 0  # no position (or a damaged one): from the start; the store skips what it has
        size = self.path.stat().st_size if self.path.exists() else 0
        return pos if 0 <= pos <= size else 0

    @staticmethod
    def _count_lines(path: Path, start: int) -> int:
        if not path.is_file():
            return 0
        n = 0
        with path.open("rb") as f:
            f.seek(start)
            for line in f:
                n += bool(line.strip())
        return n

    def _close_torn_tail(self) -> None:
        """A crash mid-append leaves a line without its newline; end it so the next append starts clean."""
        if not self.path.is_file() or self.path.stat().st_size == 0:
            return
        with self.path.open("rb+") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                f.write(b"\n")
                f.flush()
                os.fsync(f.fileno())

    def __len__(self) -> int:
        return self.count

    # -- writing ------------------------------------------------------------------------------------
    def append(self, boards: list[BoardRecord]) -> None:
        """Append and fsync; on any OSError (a full disk) the file is cut back to where it was and the
        error raised, so a partial append never leaves half a board behind."""
        data = b"".join(json.dumps(b.to_json()).encode() + b"\n" for b in boards)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
        try:
            size = os.fstat(fd).st_size
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except OSError:
                try:
                    os.ftruncate(fd, size)
                    os.fsync(fd)
                except OSError:
                    pass  # the torn tail is closed and dead-lettered on the next open
                raise
        finally:
            os.close(fd)
        if new:
            _fsync_dir(self.path.parent)
        self.count += len(boards)

    # -- reading back -------------------------------------------------------------------------------
    def peek(self, n: int) -> list[SpoolEntry]:
        """Up to `n` boards from the position on, without consuming them."""
        out: list[SpoolEntry] = []
        if not self.path.is_file():
            return out
        with self.path.open("rb") as f:
            f.seek(self._pos)
            offset = self._pos
            while len(out) < n:
                raw = f.readline()
                if not raw:
                    break
                offset += len(raw)
                if not raw.endswith(b"\n"):
                    break  # being appended by nobody (one writer): a torn tail, closed at the next open
                if not raw.strip():
                    continue
                out.append(self._parse(raw, offset))
        return out

    @staticmethod
    def _parse(raw: bytes, end: int) -> SpoolEntry:
        try:
            return SpoolEntry(BoardRecord.from_json(json.loads(raw)), raw, end)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            return SpoolEntry(None, raw, end, f"unreadable spool line ({type(exc).__name__}: {exc})")

    def consume(self, entries: list[SpoolEntry]) -> None:
        """Mark these (the first of `peek`) stored or set aside; removes both files when nothing is left."""
        if not entries:
            return
        self._pos = entries[-1].end
        self.count = max(0, self.count - len(entries))
        size = self.path.stat().st_size if self.path.exists() else 0
        if self._pos >= size:
            self.path.unlink(missing_ok=True)
            self.pos_path.unlink(missing_ok=True)
            self._pos, self.count = 0, 0
            return
        write_atomically(self.pos_path, str(self._pos).encode("ascii"))

    # -- dead letters -------------------------------------------------------------------------------
    def dead_letter(self, raw: bytes, reason: str) -> bool:
        """Keep what could not be stored, with why, one JSON line each; False when even that failed."""
        try:
            text = raw.decode("utf-8")
            payload = {"raw": text.rstrip("\n")}
        except UnicodeDecodeError:
            payload = {"raw_base64": base64.b64encode(raw).decode()}
        line = json.dumps({"at": datetime.now(timezone.utc).isoformat(), "reason": reason, **payload}) + "\n"
        try:
            with self.dead_path.open("a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            return False
        self.dead += 1
        return True
