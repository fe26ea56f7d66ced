"""`inspector tls bench`: one endpoint's latency over plain HTTP and over TLS, side by side, in one run.

The same route on two listeners of the same kind (a kiosk on loopback without TLS and one with it, or two model
servers), asked in alternation so that whatever else the box does falls on both alike, two ways: a new
connection for every request (what a one-off client pays: a full TLS handshake each time) and one kept-alive
connection per listener (what the dashboard's poll, the plant's scrape and the OpenAI client do: the handshake
once, then only the encryption).
"""
from __future__ import annotations

import http.client
import json
import statistics
import time
import urllib.parse
from dataclasses import dataclass

from ..endpoint import tls_context


@dataclass(frozen=True)
class Latency:
    label: str
    samples_ms: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def p95(self) -> float:
        ordered = sorted(self.samples_ms)
        return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


class _Client:
    """Requests to one listener, on a new connection each time or on one kept connection."""

    def __init__(self, base: str, path: str, token: str | None, body: bytes | None, keep: bool,
                 timeout: float) -> None:
        self.parts = urllib.parse.urlsplit(base)
        self.path, self.body, self.keep, self.timeout = path, body, keep, timeout
        self.headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
        if not keep:
            self.headers["Connection"] = "close"
        self.conn: http.client.HTTPConnection | None = None

    def _connect(self) -> http.client.HTTPConnection:
        if self.parts.scheme == "https":
            return http.client.HTTPSConnection(self.parts.netloc, timeout=self.timeout, context=tls_context())
        return http.client.HTTPConnection(self.parts.netloc, timeout=self.timeout)

    def once(self) -> float:
        start = time.perf_counter()
        if self.conn is None:
            self.conn = self._connect()
        self.conn.request("POST" if self.body is not None else "GET", self.path, self.body, self.headers)
        r = self.conn.getresponse()
        r.read()
        if r.status >= 400:
            raise RuntimeError(f"{self.parts.geturl()}{self.path} answered {r.status}")
        if not self.keep or r.will_close:
            self.conn.close()
            self.conn = None
        return (time.perf_counter() - start) * 1000


def compare(plain: str, tls: str, path: str, requests: int, token: str | None = None, body: dict | None = None,
            keep: bool = False, warmup: int = 5, timeout: float = 60.0) -> tuple[Latency, Latency]:
    data = None if body is None else json.dumps(body).encode()
    a_client, b_client = (_Client(u, path, token, data, keep, timeout) for u in (plain, tls))
    for _ in range(warmup):
        a_client.once()
        b_client.once()
    a: list[float] = []
    b: list[float] = []
    for i in range(requests):  # alternate, and alternate who goes first
        order = ((a_client, a), (b_client, b)) if i % 2 == 0 else ((b_client, b), (a_client, a))
        for client, out in order:
            out.append(client.once())
    return Latency("plain HTTP", tuple(a)), Latency("TLS", tuple(b))


def table(what: str, rows: list[tuple[str, Latency, Latency]]) -> str:
    lines = [f"{what}: requests alternating between the two listeners",
             "| connection | requests | plain median ms | TLS median ms | plain p95 ms | TLS p95 ms | TLS / plain |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for how, plain, tls in rows:
        ratio = tls.median / plain.median
        lines.append(f"| {how} | {len(plain.samples_ms)} | {plain.median:.2f} | {tls.median:.2f} | {plain.p95:.2f} | "
                     f"{tls.p95:.2f} | {ratio:.3f} ({(ratio - 1) * 100:+.1f}%) |")
    return "\n".join(lines)
