"""systemd's notify protocol (sd_notify(3)): datagrams of KEY=VALUE lines to $NOTIFY_SOCKET.

Outside systemd (no NOTIFY_SOCKET) every call is a no-op, so the kiosk runs
the same from a terminal. The watchdog interval comes from $WATCHDOG_USEC,
and applies only to the process named by $WATCHDOG_PID when that is set.
"""
from __future__ import annotations

import os
import socket
import threading
import time


class Notifier:
    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        address = env.get("NOTIFY_SOCKET", "")
        if address.startswith("@"):
            address = "\0" + address[1:]  # abstract namespace
        self.address = address or None
        usec = env.get("WATCHDOG_USEC")
        pid = env.get("WATCHDOG_PID")
        for_us = pid is None or pid == str(os.getpid())
        self.watchdog_s = int(usec) / 1e6 if usec and usec.isdigit() and for_us else None
        self.sent: list[str] = []  # what was sent, newest last (for status pages and tests)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def notify(self, **fields: str | int) -> bool:
        """Send e.g. notify(READY=1, STATUS="inspecting"); False when there is no socket or the send failed."""
        if self.address is None:
            return False
        message = "\n".join(f"{k}={v}" for k, v in fields.items())
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
                s.setblocking(False)  # a manager that does not read must never stall the line
                s.sendto(message.encode(), self.address)
        except OSError:
            return False
        self.sent = (self.sent + [message])[-50:]
        return True

    def ready(self, status: str) -> bool:
        return self.notify(READY=1, STATUS=status)

    def status(self, status: str) -> bool:
        return self.notify(STATUS=status)

    def watchdog(self) -> bool:
        return self.notify(WATCHDOG=1)

    def stopping(self, status: str) -> bool:
        return self.notify(STOPPING=1, STATUS=status)

    def reloading(self, status: str) -> bool:
        """RELOADING=1 with the monotonic time (sd_notify(3)); READY=1 ends the reload."""
        now_us = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        return self.notify(RELOADING=1, STATUS=status, MONOTONIC_USEC=now_us)

    def extend_start(self, seconds: float, status: str) -> bool:
        """Ask for `seconds` more before the start times out (EXTEND_TIMEOUT_USEC), saying what takes so long."""
        return self.notify(EXTEND_TIMEOUT_USEC=int(seconds * 1e6), STATUS=status)


class StartupKeeper:
    """While a long start (training the zoo, profiling) makes progress, keep systemd's start timeout away.

    Every `every_s` it asks for `extend_s` more, with the latest progress line as STATUS, but only while
    a progress line came within `stale_s`: a start that stops making progress is left to time out, so a
    hung start is seen, not hidden behind a half-hour TimeoutStartSec.
    """

    def __init__(self, notifier: Notifier, every_s: float = 30.0, extend_s: float = 120.0,
                 stale_s: float = 900.0) -> None:
        self.notifier, self.every_s, self.extend_s, self.stale_s = notifier, every_s, extend_s, stale_s
        self.line = "starting"
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.extensions = 0

    def progress(self, line: str) -> None:
        """A progress line from the start (a `say` callback): it becomes the STATUS and proves the start alive."""
        self.line, self._last = line, time.monotonic()
        self.notifier.status(line[:200])

    def __enter__(self) -> StartupKeeper:
        if self.notifier.enabled:
            self._thread = threading.Thread(target=self._loop, name="startup-keeper", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            if time.monotonic() - self._last <= self.stale_s:
                self.notifier.extend_start(self.extend_s, self.line[:200])
                self.extensions += 1
