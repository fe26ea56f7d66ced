"""systemd's notify protocol (sd_notify(3)): datagrams of KEY=VALUE lines to $NOTIFY_SOCKET.

Outside systemd (no NOTIFY_SOCKET) every call is a no-op, so the kiosk runs
the same from a terminal. The watchdog interval comes from $WATCHDOG_USEC,
and applies only to the process named by $WATCHDOG_PID when that is set.
"""
from __future__ import annotations

import os
import socket


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
