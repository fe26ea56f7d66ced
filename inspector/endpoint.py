"""A local HTTP endpoint's address and bearer token: shared by the kiosk's API and the language model's server.

Both bind loopback unless told otherwise (off loopback they serve HTTPS only), and both guard what they must
with a token. Their clients (the model's lease, the dashboard, `plant status`, `zoo rollout`, `llm beside-line`)
speak JSON to them through `open_url`, which checks an HTTPS server against the process's trust: a CA file or a
pinned certificate fingerprint ($INSPECTOR_TLS_CA / $INSPECTOR_TLS_PIN, set by the global --tls-ca / --tls-pin;
access/tls.py), else the system's CAs.
"""
from __future__ import annotations

import http.client
import json
import os
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from functools import cache
from http.client import HTTPResponse
from pathlib import Path
from typing import Any

from .access.tls import ClientTrust
from .access.tls import is_loopback as is_loopback  # re-exported: where the callers have always found it

TRUST_ENV = {"ca": "INSPECTOR_TLS_CA", "pin": "INSPECTOR_TLS_PIN", "cert": "INSPECTOR_TLS_CLIENT_CERT",
             "key": "INSPECTOR_TLS_CLIENT_KEY"}


def parse_listen(spec: str, flag: str = "--listen", example: str = "127.0.0.1:9108") -> tuple[str, int]:
    host, _, port = spec.rpartition(":")
    try:
        return host or "127.0.0.1", int(port)
    except ValueError:
        raise ValueError(f"{flag} {spec!r}: use HOST:PORT, for example {example}") from None


def read_token(path: str | Path | None) -> str | None:
    """The API token from its file; refuses a file others may read (the token guards changes)."""
    if path is None:
        return None
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"API token file {p} does not exist; create it (installer/install.sh does) or leave "
                                "--token-file out")
    if p.stat().st_mode & 0o077:
        raise ValueError(f"API token file {p} is readable by others (mode {p.stat().st_mode & 0o777:o}); "
                         f"run: chmod 600 {p}")
    token = p.read_text(encoding="utf-8").strip()
    if len(token) < 16:
        raise ValueError(f"API token in {p} is shorter than 16 characters; write a long random one")
    return token


def client_trust() -> ClientTrust:
    """How this process checks HTTPS servers (the environment, which the global flags set)."""
    return ClientTrust(**{k: os.environ.get(v) or None for k, v in TRUST_ENV.items()})


@cache
def _context(trust: ClientTrust) -> ssl.SSLContext:
    return trust.context()


def tls_context() -> ssl.SSLContext:
    return _context(client_trust())


def urlopen(request: urllib.request.Request | str, timeout: float) -> HTTPResponse:
    """urllib's urlopen, with this process's trust for an https URL."""
    url = request if isinstance(request, str) else request.full_url
    context = tls_context() if url.startswith("https:") else None
    return urllib.request.urlopen(request, timeout=timeout, context=context)


class EndpointError(ConnectionError):
    """A local endpoint refused a request (`status`, its own message) or did not answer (`status` None)."""

    def __init__(self, url: str, status: int | None, message: str) -> None:
        super().__init__(f"{url}: {status} {message}" if status is not None else f"{url}: {message}")
        self.url, self.status, self.message = url, status, message


def post_file(url: str, path: Path, token: str | None = None, timeout: float = 600.0, reason: str | None = None,
              content_type: str = "application/x-tar") -> dict[str, Any]:
    """POST a file as the body, streamed from disk (a board package: its zoo's weights), the JSON answer. Raises
    EndpointError with the endpoint's own message, also where the endpoint answered before taking the whole body
    (a refusal, a full disk) and closed: its answer is read after the failed send."""
    parts = urllib.parse.urlsplit(url)
    conn = (http.client.HTTPSConnection(parts.netloc, timeout=timeout, context=tls_context())
            if parts.scheme == "https" else http.client.HTTPConnection(parts.netloc, timeout=timeout))
    headers = {"Content-Type": content_type, "Content-Length": str(Path(path).stat().st_size)}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if reason:
        headers["X-Change-Reason"] = urllib.parse.quote(reason)
    try:
        conn.putrequest("POST", parts.path + (f"?{parts.query}" if parts.query else ""), skip_accept_encoding=True)
        for key, value in headers.items():
            conn.putheader(key, value)
        conn.endheaders()
        sent: OSError | None = None
        with open(path, "rb") as f:
            try:
                while chunk := f.read(1 << 20):
                    conn.send(chunk)
            except (BrokenPipeError, ConnectionResetError) as exc:  # it answered before the whole body came
                sent = exc
        try:
            r = conn.getresponse()
            data = r.read()
        except OSError:
            raise sent or EndpointError(url, None, "the connection closed before an answer") from None
        if r.status >= 400:
            raise EndpointError(url, r.status, _error_message(data) or f"HTTP {r.status}")
        return json.loads(data)
    except EndpointError:
        raise
    except (OSError, http.client.HTTPException) as exc:
        raise EndpointError(url, None, str(exc)) from None
    finally:
        conn.close()


def open_url(url: str, body: dict[str, Any] | bytes | None = None, token: str | None = None,
             timeout: float = 10.0, reason: str | None = None) -> HTTPResponse:
    """GET (no body) or POST a JSON body (or bytes as they are), with the bearer token when given (and the change's
    reason); the open response (for streaming). Raises EndpointError with the endpoint's own error message (OpenAI's
    `error.message` or the kiosk's `error`)."""
    data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=None if body is None else "POST",
                                 headers={"Content-Type": "application/json"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if reason:
        req.add_header("X-Change-Reason", urllib.parse.quote(reason))
    try:
        return urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as e:
        raise EndpointError(url, e.code, _error_message(e.read()) or str(e.reason)) from None
    except OSError as e:
        raise EndpointError(url, None, str(e)) from None


class KeptConnections:
    """One kept-alive connection per server and thread, for reads a client repeats (a dashboard's poll, the
    history tab's pages): the TLS handshake is paid once, not per read. A connection the server has closed in the
    meantime is opened again, once; only GETs go this way (a POST that met a closed connection could not tell
    whether the server acted on it)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def _connection(self, parts: urllib.parse.SplitResult, timeout: float) -> http.client.HTTPConnection:
        conns = self._local.__dict__.setdefault("conns", {})
        key = (parts.scheme, parts.netloc)
        conn = conns.get(key)
        if conn is None:
            conn = (http.client.HTTPSConnection(parts.netloc, timeout=timeout, context=tls_context())
                    if parts.scheme == "https" else http.client.HTTPConnection(parts.netloc, timeout=timeout))
            conns[key] = conn
        conn.timeout = timeout
        return conn

    def _drop(self, parts: urllib.parse.SplitResult) -> None:
        conn = self._local.__dict__.get("conns", {}).pop((parts.scheme, parts.netloc), None)
        if conn is not None:
            conn.close()

    def get(self, url: str, token: str | None, timeout: float) -> tuple[int, bytes]:
        parts = urllib.parse.urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        for attempt in (0, 1):
            conn = self._connection(parts, timeout)
            try:
                conn.request("GET", path or "/", headers=headers)
                r = conn.getresponse()
                data = r.read()
                if r.will_close:
                    self._drop(parts)
                return r.status, data
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                    http.client.CannotSendRequest, http.client.ResponseNotReady) as exc:
                self._drop(parts)
                if attempt:
                    raise EndpointError(url, None, str(exc)) from None
            except OSError as exc:
                self._drop(parts)
                raise EndpointError(url, None, str(exc)) from None
        raise AssertionError("unreachable")


KEPT = KeptConnections()


def request_json(url: str, body: dict[str, Any] | bytes | None = None, token: str | None = None,
                 timeout: float = 10.0, reason: str | None = None) -> dict[str, Any]:
    if body is None:  # a read: on this thread's kept connection to that server
        status, data = KEPT.get(url, token, timeout)
        if status >= 400:
            raise EndpointError(url, status, _error_message(data) or f"HTTP {status}")
        return json.loads(data)
    with open_url(url, body, token, timeout, reason) as r:
        return json.loads(r.read())


def _error_message(raw: bytes) -> str:
    try:
        err = json.loads(raw).get("error", "")
    except (ValueError, AttributeError):
        return ""
    return str(err.get("message", "")) if isinstance(err, dict) else str(err)
