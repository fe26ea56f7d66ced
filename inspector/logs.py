"""Logging for a line box: levels that journald understands, and progress a person at a terminal can watch.

Every room reports through `logging` (or a `say` callback that ends in it). Under systemd, stderr is the
journal; each line then starts with its syslog priority (`<3>` error ... `<7>` debug), which journald turns
into the entry's PRIORITY, so `journalctl -u inspector-kiosk -p err` shows the errors. At a terminal, long
jobs draw tqdm bars; in a pipe or a log file they print a plain line now and then instead.

A leaf module: it imports nothing of ours, so any room may use it.
"""
from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

LEVELS = ("debug", "info", "warning", "error", "critical")
_PRIORITY = {logging.CRITICAL: 2, logging.ERROR: 3, logging.WARNING: 4, logging.INFO: 6, logging.DEBUG: 7}
_TAGGED = (("error:", logging.ERROR), ("warning:", logging.WARNING), ("note:", logging.INFO))

Say = Callable[[str], None]


def under_journal(stream: TextIO | None = None) -> bool:
    """True when `stream` (stderr) is connected to journald: systemd says so in $JOURNAL_STREAM (device:inode)."""
    stream = stream or sys.stderr
    want = os.environ.get("JOURNAL_STREAM", "")
    if not want:
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return want == f"{st.st_dev}:{st.st_ino}"


class JournalFormatter(logging.Formatter):
    """`<priority>message`: journald's stream protocol (SyslogLevelPrefix=, on by default)."""

    def format(self, record: logging.LogRecord) -> str:
        priority = _PRIORITY.get(record.levelno, 6 if record.levelno < logging.WARNING else 3)
        text = super().format(record)
        return "\n".join(f"<{priority}>{line}" for line in text.splitlines() or [""])


def parse_level(name: str) -> int:
    if name.lower() not in LEVELS:
        raise ValueError(f"log level {name!r}: use one of {', '.join(LEVELS)}")
    return getattr(logging, name.upper())


def setup(level: str = "info", stream: TextIO | None = None) -> None:
    """Route the `inspector` loggers to stderr at `level`: journald priorities under systemd, plain lines else."""
    stream = stream or sys.stderr
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JournalFormatter("%(message)s") if under_journal(stream) else logging.Formatter("%(message)s"))
    root = logging.getLogger("inspector")
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(parse_level(level))
    root.propagate = False


def say_for(logger: logging.Logger) -> Say:
    """A `say` callback over `logger`: a line tagged `error:` or `warning:` keeps that level, the rest is info."""

    def say(message: str) -> None:
        low = message.lstrip().lower()
        level = next((lvl for tag, lvl in _TAGGED if low.startswith(tag)), logging.INFO)
        logger.log(level, message)

    return say


def bars_wanted(stream: TextIO | None = None) -> bool:
    """Progress bars only for a person: stderr is a terminal, not the journal, and the level shows info."""
    stream = stream or sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty and not under_journal(stream) and logging.getLogger("inspector").isEnabledFor(logging.INFO)


class Progress:
    """Steps of a long job: a tqdm bar at a terminal, else a plain line at most every `every_s` seconds."""

    def __init__(self, total: int, what: str, say: Say, every_s: float = 30.0, work: float | None = None) -> None:
        """`work`: the steps' summed sizes, when steps differ in size (then `step(size=...)` says each one's), so the
        time left is the work left at the pace so far, not the steps left."""
        self.total, self.what, self.say, self.every_s = total, what, say, every_s
        self.done = 0
        self.work, self.work_done = work, 0.0
        self._last = self.started = time.monotonic()
        self._bar = None
        if bars_wanted():
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=what, unit="step", leave=False, dynamic_ncols=True)

    def step(self, n: int = 1, note: str = "", size: float | None = None) -> None:
        self.done += n
        self.work_done += size if size is not None else n
        if self._bar is not None:
            self._bar.update(n)
            if note:
                self._bar.set_postfix_str(note, refresh=False)
            return
        now = time.monotonic()
        if now - self._last >= self.every_s or self.done >= self.total:
            self._last = now
            self.say(f"{self.what}: {self.done}/{self.total}" + (f" ({note})" if note else "") + self.left(now))

    def left(self, now: float | None = None) -> str:
        """`, about 4 min left`: the steps to go at this machine's pace so far (a tqdm bar shows its own)."""
        if not 0 < self.done < self.total:
            return ""
        done, total = (self.work_done, self.work) if self.work else (self.done, self.total)
        if not 0 < done < total:
            return ""
        seconds = ((now or time.monotonic()) - self.started) / done * (total - done)
        return f", about {seconds / 60:.0f} min left" if seconds >= 90 else f", about {seconds:.0f} s left"

    def write(self, message: str) -> None:
        """A line that should stay on the screen above the bar (or just a line)."""
        if self._bar is not None:
            self._bar.write(message, file=sys.stderr)
        else:
            self.say(message)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


@contextmanager
def progress(total: int, what: str, say: Say, every_s: float = 30.0, work: float | None = None) -> Iterator[Progress]:
    bar = Progress(total, what, say, every_s, work)
    try:
        yield bar
    finally:
        bar.close()
