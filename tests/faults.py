"""The fault-injection suite's parts: the real kiosk as a child process, boards as files, and the fault table.

Each fault test counts what it injected and what the database holds afterwards, and adds one row to
`FAULT_TABLE`; conftest prints the table at the end of the session (and writes it to $FAULT_TABLE_JSON).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import cv2
import numpy as np

from inspector.ingest.sources import IMAGE_SUFFIXES
from inspector.ingest.synthetic import render_board
from inspector.results.store import ResultStore

from .conftest import DEMO_RULES
from .services import free_port

FAULT_TABLE: list[FaultRow] = []


@dataclass
class FaultRow:
    fault: str
    injected: int
    expected: int
    stored: int
    duplicated: int
    lost: int


def record(fault: str, injected: int, expected: list[str], store: ResultStore) -> FaultRow:
    """Compare the serials expected with the boards stored: how many are stored, twice or more, missing."""
    got = Counter(i.board_serial for i in store.inspections())
    row = FaultRow(fault, injected, len(expected), sum(1 for s in expected if got[s]),
                   sum(n - 1 for n in got.values() if n > 1), sum(1 for s in expected if not got[s]))
    FAULT_TABLE.append(row)
    return row


def format_table(rows: list[FaultRow]) -> str:
    head = f"{'fault':<56}{'injected':>9}{'expected':>10}{'stored':>8}{'duplicated':>12}{'lost':>6}"
    lines = [head, "-" * len(head)]
    lines += [f"{r.fault:<56}{r.injected:>9}{r.expected:>10}{r.stored:>8}{r.duplicated:>12}{r.lost:>6}" for r in rows]
    return "\n".join(lines)


def save_table() -> None:
    path = os.environ.get("FAULT_TABLE_JSON")
    if path and FAULT_TABLE:
        Path(path).write_text(json.dumps([asdict(r) for r in FAULT_TABLE], indent=1), encoding="utf-8")


def drop(folder: Path, names: list[str], seed: int) -> None:
    """Boards as a scanner drops them: written aside, then renamed into the folder."""
    rng = np.random.default_rng(seed)
    for name in names:
        image = render_board(DEMO_RULES, name, rng).image
        tmp = folder / f".{name}.tmp.png"
        cv2.imwrite(str(tmp), image)
        tmp.rename(folder / f"{name}.png")


def http(url: str, data: bytes | None = None, token: str | None = None, timeout: float = 5.0) -> tuple[int, dict]:
    """One request; an https URL is checked against this process's trust ($INSPECTOR_TLS_CA / _PIN)."""
    from inspector.endpoint import urlopen

    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as exc:
        body = exc.read()
        try:
            return exc.code, json.loads(body)
        except ValueError:
            return exc.code, {"raw": body.decode(errors="replace")}


class KioskProcess:
    """`inspector kiosk` on a watched folder, as systemd runs it, that the test may kill -9."""

    def __init__(self, root: Path, zoo_root: Path, rules: Path, inbox: Path, data: Path, *extra: str,
                 env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"{'https' if '--tls-cert' in extra else 'http'}://127.0.0.1:{self.port}"
        self.cmd = [sys.executable, "-m", "inspector.cli", "--models", str(root / "models"), "kiosk",
                    "--rules", str(rules), "--zoo", str(zoo_root), "--source", f"watch:{inbox}", "--data", str(data),
                    "--device-mb", "40", "--listen", f"127.0.0.1:{self.port}", "--log-every", "1", *extra]
        self.env = {**os.environ, "YOLO_OFFLINE": "1", **(env or {})}
        self.env.pop("NOTIFY_SOCKET", None)
        self.proc: subprocess.Popen | None = None
        self.log = data.parent / f"kiosk-{self.port}.log"

    def start(self, timeout: float = 180.0) -> None:
        """Start and wait until its endpoints answer (the line is running then)."""
        self.proc = subprocess.Popen(self.cmd, env=self.env, stdout=subprocess.DEVNULL,
                                     stderr=self.log.open("ab"), start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the kiosk exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                code, body = http(self.url + "/status", timeout=1)
                if code == 200 and body.get("state") == "running":
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the kiosk did not come up in {timeout:.0f} s:\n{self.tail()}")

    def status(self) -> dict:
        return http(self.url + "/status")[1]

    def health(self) -> tuple[int, dict]:
        return http(self.url + "/health")

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self, timeout: float = 120.0) -> int:
        """SIGTERM: drain, flush, exit."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(1)
            self.proc.kill()
            raise RuntimeError(f"the kiosk did not stop on SIGTERM:\n{self.tail()}") from None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def tail(self, n: int = 6000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def wait_until(check, timeout: float = 60.0, every: float = 0.1):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(every)
    return check()


def inbox_empty(inbox: Path) -> bool:
    """No image left to inspect (every one was moved to inspected/ once its result was safe)."""
    return not any(p.suffix.lower() in IMAGE_SUFFIXES for p in inbox.iterdir()
                   if p.is_file() and not p.name.startswith("."))
