"""The kiosk's endpoints on localhost: /metrics (Prometheus), /health and /status (JSON).

A small threading HTTP server from the standard library: three read-only
routes do not justify a web framework on the line box. Bound to 127.0.0.1 by
default; a plant that scrapes from another host sets --listen explicitly.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry


def parse_listen(spec: str) -> tuple[str, int]:
    host, _, port = spec.rpartition(":")
    try:
        return host or "127.0.0.1", int(port)
    except ValueError:
        raise ValueError(f"--listen {spec!r}: use HOST:PORT, for example 127.0.0.1:9108") from None


class Endpoints:
    def __init__(self, listen: str, registry: CollectorRegistry, status: Callable[[], dict[str, Any]],
                 health: Callable[[], dict[str, Any]]) -> None:
        host, port = parse_listen(listen)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the standard library's name
                try:
                    outer._route(self)
                except Exception as exc:  # noqa: BLE001 - a probe gets a 500, the kiosk keeps running
                    outer._send(self, 500, "text/plain; charset=utf-8", f"error: {exc}\n".encode())

            def log_message(self, *_args: Any) -> None:  # probes every few seconds would flood the journal
                pass

        self.registry, self.status, self.health = registry, status, health
        try:
            self.server = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            raise RuntimeError(f"cannot listen on {host}:{port} ({exc.strerror}); pick another --listen port") from None
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, name="kiosk-http", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _route(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(h, 200, CONTENT_TYPE_LATEST, generate_latest(self.registry))
        elif path == "/health":
            body = self.health()
            code = 200 if body["status"] in ("ok", "degraded") else 503
            self._send(h, code, "application/json", json.dumps(body).encode())
        elif path == "/status":
            self._send(h, 200, "application/json", json.dumps(self.status(), default=str).encode())
        else:
            self._send(h, 404, "text/plain; charset=utf-8", b"routes: /metrics /health /status\n")

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, code: int, ctype: str, body: bytes) -> None:
        h.send_response(code)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
