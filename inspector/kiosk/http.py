"""The kiosk's endpoints: /metrics (Prometheus), /health, /status and /rules to read; POSTs to change; the
line's stored results under /results/ (behind a token: they hold the plant's product images).

A small HTTP server from the standard library: a handful of routes do not justify a web framework on the
line box. It binds 127.0.0.1 by default; off loopback it serves TLS only (access/tls.py), so no token crosses
the plant network in clear. Every connection gets a socket timeout and is served from a bounded pool (the TLS
handshake too, on the pool's thread); when the pool is busy the connection is answered 503 at once, so a flood
of slow clients cannot take threads or memory from the line. A client that reads again soon (a dashboard's
poll, a scrape) keeps its connection, and so its TLS session, for up to KEEPALIVE_S between requests, while
at least half the pool is free; otherwise, and after any refused or unread body, the connection is closed.

Reading the line's state is open; every POST names the permission it needs and the gate (access/gate.py)
turns `Authorization: Bearer <token>` into an Identity that must hold it: a person's token, or the box's
service token for the machine routes. The handler gets the Identity and the client's stated reason
(`X-Change-Reason`, percent-encoded) with the body, so every change is recorded by who made it. POST
/auth/sign-in is the one route without a token: a name and password for a session token (the dashboard's).

A body is read whole before its handler runs, up to its route's limit, except a streamed route's (a board package:
megabytes of weights), whose handler reads it to disk itself. An OSError the handler raises is the kiosk's own (a
full disk, a read-only folder) and is answered naming the file (`served`); only one in reading the request or
writing the answer is taken for the client gone.
"""
from __future__ import annotations

import errno
import io
import json
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, BinaryIO, TypeVar

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from ..access.gate import Gate
from ..access.identity import Forbidden, Identity, Unauthenticated
from ..access.roles import Permission
from ..access.tls import require_tls_off_loopback
from ..endpoint import parse_listen

SOCKET_TIMEOUT_S = 5.0
WORKERS = 8
KEEPALIVE_S = 2.0  # a kept connection idle this long is closed (its worker goes back to the pool)
KEEPALIVE_REQUESTS = 200  # and after this many requests
MAX_BODY = 1 << 20  # a rule file is kilobytes; anything near a megabyte is not one


STORAGE = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG}  # the disk cannot take it: 507
T = TypeVar("T")


class HttpError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def kiosk_fault(exc: OSError, changing: bool) -> HttpError:
    """What to answer for an OSError of the kiosk's own (its disk full, a folder it may not write, the line not
    answering in time), naming the file and what to do. A POST handler that raises one has changed nothing: each
    route writes before it applies, or undoes what it applied (kiosk/routes.py)."""
    then = "; nothing changed" if changing else ""
    again = " and send it again" if changing else ""
    if isinstance(exc, TimeoutError):
        return HttpError(503, f"{exc or 'the line did not answer in time'}{then}; try again")
    what = exc.filename or "its files"
    why = exc.strerror or str(exc)
    if exc.errno in STORAGE:
        return HttpError(507, f"the kiosk cannot store {what} ({why}){then}: free space on the kiosk's disk (or make "
                              f"its folder writable){again}")
    if isinstance(exc, PermissionError):
        return HttpError(500, f"the kiosk's service user may not use {what} ({why}){then}: give it access there"
                              f"{again}")
    return HttpError(500, f"the kiosk could not use {what} ({why}){then}")


def served(answer: Callable[[], T], changing: bool = False) -> T:
    """The application's answer. An OSError it raises is the kiosk's own and is answered (kiosk_fault); only
    reading the request or writing the answer means the client went away. A PermissionError without an errno is a
    refusal (a role that may not), answered 403."""
    try:
        return answer()
    except PermissionError as exc:
        if exc.errno is None:
            raise
        raise kiosk_fault(exc, changing) from exc
    except OSError as exc:
        raise kiosk_fault(exc, changing) from exc


def json_object(body: bytes, shape: str = "a JSON object") -> dict[str, Any]:
    """A POST body as a JSON object; ValueError (422) naming what to send when it is not one."""
    try:
        doc = json.loads(body or b"{}")
    except json.JSONDecodeError as e:
        raise ValueError(f"the body is not JSON ({e.msg}); send {shape}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"send {shape}")
    return doc


@dataclass(frozen=True)
class Call:
    """One POST as its handler sees it: the body, who sent it (checked), and why (their words, or None)."""

    body: bytes
    who: Identity
    reason: str | None = None
    address: str = ""  # the client's IP address
    stream: BinaryIO | None = None  # a streamed route's body, unread (`body` is empty then): `length` bytes
    length: int = 0
    query: str = ""  # the URL's query string


Post = Callable[[Call], dict[str, Any]]  # a call -> JSON answer; raises ValueError (422) when refused
Route = tuple[Permission | None, Post]  # the permission a POST needs (None: none, the sign-in) and its handler
# (path below the prefix, query string) -> JSON, or (content type, bytes); behind the token
Guarded = Callable[[str, str], dict[str, Any] | tuple[str, bytes]]


class _Bounded(io.RawIOBase):
    """A request's body read by its handler: at most its Content-Length, then end of file."""

    def __init__(self, raw: BinaryIO, length: int) -> None:
        super().__init__()
        self.raw, self.left = raw, length

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        size = self.left if size is None or size < 0 else min(size, self.left)
        data = self.raw.read(size) if size else b""
        self.left -= len(data)
        return data


class _BoundedServer(HTTPServer):
    """One request at a time per worker, at most WORKERS at once; a busy server answers 503 at once."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 tls: ssl.SSLContext | None = None) -> None:
        super().__init__(address, handler)
        self.tls = tls
        self.pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="kiosk-http")
        self.slots = threading.BoundedSemaphore(WORKERS)
        self.busy = 0  # connections being served (kept ones included)
        self._count = threading.Lock()

    def may_keep(self) -> bool:
        """Keep a connection open for its next request only while at least half the workers are free."""
        with self._count:
            return self.busy <= WORKERS // 2

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        if self.tls is not None:  # the handshake runs on the pool's thread, under the socket timeout
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def process_request(self, request: socket.socket, client_address: Any) -> None:  # noqa: ANN401
        if not self.slots.acquire(blocking=False):
            try:
                request.settimeout(1.0)
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\nConnection: close\r\n"
                                b"Retry-After: 1\r\n\r\nbusy\n")
            except OSError:
                pass
            self.shutdown_request(request)
            return
        self.pool.submit(self._serve, request, client_address)

    def _serve(self, request: socket.socket, client_address: Any) -> None:  # noqa: ANN401
        with self._count:
            self.busy += 1
        try:
            if isinstance(request, ssl.SSLSocket):
                request.settimeout(SOCKET_TIMEOUT_S)
                request.do_handshake()
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 - a broken client is its own problem
            pass
        finally:
            with self._count:
                self.busy -= 1
            self.shutdown_request(request)
            self.slots.release()

    def server_close(self) -> None:
        super().server_close()
        self.pool.shutdown(wait=False, cancel_futures=True)


class Endpoints:
    def __init__(self, listen: str, registry: CollectorRegistry, status: Callable[[], dict[str, Any]],
                 health: Callable[[], dict[str, Any]], reads: dict[str, Callable[[], dict[str, Any]]] | None = None,
                 posts: dict[str, Route] | None = None, gate: Gate | None = None,
                 guarded: dict[str, Guarded] | None = None, tls: ssl.SSLContext | None = None,
                 limits: dict[str, int] | None = None, streams: set[str] | None = None) -> None:
        host, port = parse_listen(listen)
        require_tls_off_loopback(host, tls is not None)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            timeout = SOCKET_TIMEOUT_S  # a client that stalls mid-request loses its connection, not a thread
            protocol_version = "HTTP/1.1"
            # headers and body go out as written: on a kept connection Nagle's wait for the client's delayed
            # ACK cost 40 ms a response (measured: `inspector tls bench`)
            disable_nagle_algorithm = True
            wbufsize = 1 << 16  # ... and in one write (one TLS record), flushed after each request

            served = 0  # requests on this connection
            body_read = False  # this request's body was read whole (a POST's): the connection can be kept

            def do_GET(self) -> None:  # noqa: N802 - the standard library's name
                self.connection.settimeout(SOCKET_TIMEOUT_S)  # the kept connection's idle timeout is over
                self.body_read = True
                outer._handle(self, outer._get)

            def do_POST(self) -> None:  # noqa: N802
                self.connection.settimeout(SOCKET_TIMEOUT_S)
                self.body_read = False
                outer._handle(self, outer._post)

            def log_message(self, *_args: Any) -> None:  # probes every few seconds would flood the journal
                pass

        self.registry, self.status, self.health = registry, status, health
        self.reads, self.posts, self.gate = dict(reads or {}), dict(posts or {}), gate or Gate(None)
        self.guarded = dict(guarded or {})  # path prefix (ending in /) -> reader (needs Permission.VIEW)
        self.limits = dict(limits or {})  # POST path -> its body's limit, where over MAX_BODY
        self.streams = set(streams or ())  # POST paths whose handler reads the body itself (a board package)
        try:
            self.server = _BoundedServer((host, port), Handler, tls)
        except OSError as exc:
            raise RuntimeError(f"cannot listen on {host}:{port} ({exc.strerror}); pick another --listen port") from None
        self._thread = threading.Thread(target=self.server.serve_forever, name="kiosk-http", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{'https' if self.server.tls is not None else 'http'}://{host}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- routing ------------------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler, route: Callable[[BaseHTTPRequestHandler, str], None]) -> None:
        try:
            route(h, h.path.split("?", 1)[0])
        except Unauthenticated as exc:
            self._json(h, 401, {"error": str(exc)})
        except (Forbidden, PermissionError) as exc:
            self._json(h, 403, {"error": str(exc)})
        except HttpError as exc:
            self._json(h, exc.code, {"error": str(exc)})
        except ValueError as exc:  # refused by validation: nothing changed
            self._json(h, 422, {"error": str(exc)})
        except OSError:  # reading the request or writing the answer (the application's own are answered: served)
            pass  # the client went away
        except Exception as exc:  # noqa: BLE001 - a caller gets a 500, the kiosk keeps running
            self._json(h, 500, {"error": f"{type(exc).__name__}: {exc}"})

    def _get(self, h: BaseHTTPRequestHandler, path: str) -> None:
        if path == "/metrics":
            self._send(h, 200, CONTENT_TYPE_LATEST, served(lambda: generate_latest(self.registry)))
        elif path == "/health":
            body = served(self.health)
            self._json(h, 200 if body["status"] in ("ok", "degraded") else 503, body)
        elif path == "/status":
            self._json(h, 200, served(self.status))
        elif path in self.reads:
            self._json(h, 200, served(self.reads[path]))
        elif prefix := next((p for p in self.guarded if path.startswith(p)), None):
            self._identify(h, Permission.VIEW)
            answer = served(lambda: self.guarded[prefix](path[len(prefix):], h.path.partition("?")[2]))
            if isinstance(answer, tuple):
                self._send(h, 200, *answer)
            else:
                self._json(h, 200, answer)
        else:
            routes = " ".join(["/metrics", "/health", "/status", *self.reads, *(p + "..." for p in self.guarded)])
            self._send(h, 404, "text/plain; charset=utf-8", f"routes: {routes}\n".encode())

    def _post(self, h: BaseHTTPRequestHandler, path: str) -> None:
        if path not in self.posts:
            raise HttpError(404, f"no POST route {path}; POST routes: {' '.join(self.posts) or 'none'}")
        permission, handler = self.posts[path]
        who = self._identify(h, permission)
        length = h.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise HttpError(411, "send a Content-Length")
        most = self.limits.get(path, MAX_BODY)
        if int(length) > most:
            raise HttpError(413, f"body of {length} bytes is over the limit of {most}")
        reason = urllib.parse.unquote(h.headers.get("X-Change-Reason", "")).strip() or None
        query = h.path.partition("?")[2]
        if path in self.streams:
            stream = _Bounded(h.rfile, int(length))
            call = Call(b"", who, reason, h.client_address[0], stream, int(length), query)
            answer = served(lambda: handler(call), changing=True)
            h.body_read = stream.left == 0  # type: ignore[attr-defined]
        else:
            body = h.rfile.read(int(length))
            h.body_read = len(body) == int(length)  # type: ignore[attr-defined]
            call = Call(body, who, reason, h.client_address[0], query=query)
            answer = served(lambda: handler(call), changing=True)
        self._json(h, 200, answer)

    def _identify(self, h: BaseHTTPRequestHandler, permission: Permission | None) -> Identity:
        origin = f"{h.client_address[0]} via the kiosk API"
        if permission is None:
            return Identity("-", "-", origin)
        return self.gate.check(h.headers.get("Authorization"), origin, permission)

    def _json(self, h: BaseHTTPRequestHandler, code: int, body: dict[str, Any]) -> None:
        self._send(h, code, "application/json", json.dumps(body, default=str).encode())

    def _send(self, h: BaseHTTPRequestHandler, code: int, ctype: str, body: bytes) -> None:
        h.served += 1  # type: ignore[attr-defined]
        keep = (not h.close_connection and h.body_read and code < 500  # type: ignore[attr-defined]
                and h.served < KEEPALIVE_REQUESTS and self.server.may_keep())  # type: ignore[attr-defined]
        h.send_response(code)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Connection", "keep-alive" if keep else "close")
        if keep:
            h.send_header("Keep-Alive", f"timeout={KEEPALIVE_S:g}, max={KEEPALIVE_REQUESTS}")
        h.end_headers()
        h.wfile.write(body)
        h.close_connection = not keep
        if keep:
            h.connection.settimeout(KEEPALIVE_S)  # idle until the next request: short, then the worker is free
