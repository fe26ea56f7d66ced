"""A local HTTP endpoint's address and bearer token: shared by the kiosk's API and the language model's server.

Both bind loopback unless told otherwise, and both guard what they must with a
token kept in a file only its owner may read.
"""
from __future__ import annotations

import ipaddress
from pathlib import Path


def parse_listen(spec: str) -> tuple[str, int]:
    host, _, port = spec.rpartition(":")
    try:
        return host or "127.0.0.1", int(port)
    except ValueError:
        raise ValueError(f"--listen {spec!r}: use HOST:PORT, for example 127.0.0.1:9108") from None


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


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
