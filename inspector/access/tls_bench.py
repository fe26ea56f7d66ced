"""`inspector tls bench`: one endpoint's latency over plain HTTP and over TLS, side by side, in one run.

The same route on two listeners of the same kind (a kiosk on loopback without TLS and one with it, or two model
servers), asked in alternation so that whatever else the box does falls on both alike. Every request opens its
own connection, as the kiosk's clients do (it answers each with Connection: close), so the TLS column pays a full
handshake every time: the worst case, not a kept-alive one.
"""
from __future__ import annotations

import json
import statistics
import time
import urllib.request
from dataclasses import dataclass

from ..endpoint import urlopen


@dataclass(frozen=True)
class Latency:
    label: str
    url: str
    samples_ms: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def p95(self) -> float:
        ordered = sorted(self.samples_ms)
        return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def _once(url: str, token: str | None, body: bytes | None, timeout: float) -> float:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    start = time.perf_counter()
    with urlopen(req, timeout=timeout) as r:
        r.read()
    return (time.perf_counter() - start) * 1000


def compare(plain: str, tls: str, path: str, requests: int, token: str | None = None, body: dict | None = None,
            warmup: int = 5, timeout: float = 60.0) -> tuple[Latency, Latency]:
    data = None if body is None else json.dumps(body).encode()
    for _ in range(warmup):
        _once(plain + path, token, data, timeout)
        _once(tls + path, token, data, timeout)
    a: list[float] = []
    b: list[float] = []
    for i in range(requests):  # alternate, and alternate who goes first
        first, second = ((plain, a), (tls, b)) if i % 2 == 0 else ((tls, b), (plain, a))
        for url, out in (first, second):
            out.append(_once(url + path, token, data, timeout))
    return Latency("plain HTTP", plain + path, tuple(a)), Latency("TLS", tls + path, tuple(b))


def table(what: str, plain: Latency, tls: Latency) -> str:
    ratio = tls.median / plain.median
    lines = [f"{what}: {len(plain.samples_ms)} requests each, a new connection per request, alternating",
             f"| {'listener':<10} | median ms | p95 ms |", "| --- | --- | --- |"]
    for row in (plain, tls):
        lines.append(f"| {row.label:<10} | {row.median:9.2f} | {row.p95:6.2f} |")
    lines.append(f"TLS / plain (median): {ratio:.3f} ({(ratio - 1) * 100:+.1f}%)")
    return "\n".join(lines)
