"""TLS for the kiosk's API and the model server, and clients that check who answers.

A server takes a certificate and key from files (a plant's own, or the pair the installer makes with
`inspector tls make` when none is given), optionally a CA whose client certificates it demands. A client trusts
a CA file (the self-signed certificate is its own CA) or a pinned fingerprint (sha256 of the certificate, as the
installer prints it); a server that shows anything else is refused before a byte of the request, or its token,
is sent. Plain HTTP stays for loopback only (`require_tls_off_loopback`).
"""
from __future__ import annotations

import hashlib
import ipaddress
import os
import socket
import ssl
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path


class TlsError(ValueError):
    pass


def server_context(cert: str | Path, key: str | Path, client_ca: str | Path | None = None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(f"cannot load the TLS certificate {cert} and key {key} ({exc}); give a PEM pair, or make "
                       f"one with `inspector tls make --out DIR`") from None
    if client_ca is not None:
        try:
            ctx.load_verify_locations(str(client_ca))
        except (OSError, ssl.SSLError) as exc:
            raise TlsError(f"cannot load the client CA {client_ca} ({exc})") from None
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def fingerprint_of_der(der: bytes) -> str:
    digest = hashlib.sha256(der).hexdigest().upper()
    return "SHA256:" + ":".join(digest[i:i + 2] for i in range(0, 64, 2))


def fingerprint(cert: str | Path) -> str:
    """The certificate's sha256 fingerprint, as a client pins it (SHA256:AB:CD:...)."""
    pem = Path(cert).read_text(encoding="ascii")
    return fingerprint_of_der(ssl.PEM_cert_to_DER_cert(pem))


def _normal_pin(pin: str) -> str:
    hexes = pin.upper().removeprefix("SHA256:").replace(":", "")
    if len(hexes) != 64 or any(c not in "0123456789ABCDEF" for c in hexes):
        raise TlsError(f"pinned fingerprint {pin!r}: give the certificate's sha256 as the installer prints it "
                       "(SHA256:AB:CD:... or 64 hex digits)")
    return "SHA256:" + ":".join(hexes[i:i + 2] for i in range(0, 64, 2))


class PinnedContext(ssl.SSLContext):
    """Trusts exactly one certificate, by its sha256 (no CA, no host name: the pin is the identity)."""

    pin: str = ""

    def wrap_socket(self, sock: socket.socket, *args, **kwargs) -> ssl.SSLSocket:  # noqa: ANN002, ANN003
        wrapped = super().wrap_socket(sock, *args, **kwargs)
        der = wrapped.getpeercert(binary_form=True)
        if der is None or fingerprint_of_der(der) != self.pin:
            seen = fingerprint_of_der(der) if der else "none"
            wrapped.close()
            raise ssl.SSLCertVerificationError(f"the server's certificate {seen} is not the pinned {self.pin}")
        return wrapped


@dataclass(frozen=True)
class ClientTrust:
    """How a client checks a server (and shows itself, when the server asks for a client certificate)."""

    ca: str | None = None
    pin: str | None = None
    cert: str | None = None
    key: str | None = None

    def context(self) -> ssl.SSLContext:
        if self.pin:
            ctx = PinnedContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE  # the pin checks instead, after the handshake, before any data
            ctx.pin = _normal_pin(self.pin)
        else:
            try:
                ctx = ssl.create_default_context(cafile=self.ca)
            except (OSError, ssl.SSLError) as exc:
                raise TlsError(f"cannot load the CA file {self.ca} ({exc})") from None
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.cert:
            ctx.load_cert_chain(self.cert, self.key)
        return ctx


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_tls_off_loopback(host: str, tls: bool, flag: str = "--listen") -> None:
    if not tls and not is_loopback(host):
        raise TlsError(f"{flag} {host}: plain HTTP is served on loopback only (a token would cross the plant "
                       "network in clear); give --tls-cert and --tls-key (the installer makes a pair: `inspector "
                       "tls make`), or listen on 127.0.0.1")


def make_self_signed(out: str | Path, hosts: list[str], days: int = 825) -> tuple[Path, Path, str]:
    """A P-256 key and a certificate for `hosts` (names or addresses; localhost and 127.0.0.1 always), written
    as cert.pem and key.pem (mode 600) in `out`; returns both paths and the certificate's fingerprint."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    names = list(dict.fromkeys([*hosts, "localhost", "127.0.0.1"]))
    alt: list[x509.GeneralName] = []
    for h in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            alt.append(x509.DNSName(h))
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0]),
                         x509.NameAttribute(NameOID.ORGANIZATION_NAME, "inspector line box")])
    now = datetime.now(timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = out / "cert.pem", out / "key.pem"
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path, fingerprint(cert_path)
