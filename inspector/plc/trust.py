"""The OPC UA server's trust list: which clients' certificates (the PLC's, the MES's) may open a secure session.

OPC UA's own convention, in the server's certificate folder: `trusted/` holds the certificates let in, and a
certificate the server refused is kept in `rejected/`, so the plant's engineer can look at it and trust it on
purpose (`inspector tls trust FILE`, or the rejected one by its fingerprint). A client whose certificate is not in
the list is refused with BadCertificateUntrusted before its session; the server logs which one. Only secure
endpoints carry a client certificate; the unencrypted endpoint stays off unless configured.
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

from asyncua import ua
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Listed:
    fingerprint: str  # sha256 of the DER, hex
    subject: str
    not_after: str
    path: Path


def load_certificate(path: str | Path) -> x509.Certificate:
    """A certificate from a DER or PEM file; ValueError naming the file otherwise."""
    data = Path(path).read_bytes()
    for load in (x509.load_der_x509_certificate, x509.load_pem_x509_certificate):
        try:
            return load(data)
        except ValueError:
            continue
    raise ValueError(f"{path} is not an X.509 certificate (DER or PEM); an OPC UA client's certificate is usually "
                     "a .der file in its PKI folder (own/certs)")


def fingerprint_of(cert: x509.Certificate) -> str:
    return hashlib.sha256(cert.public_bytes(Encoding.DER)).hexdigest()


def _listed(cert: x509.Certificate, path: Path) -> Listed:
    return Listed(fingerprint_of(cert), cert.subject.rfc4514_string(), cert.not_valid_after_utc.isoformat(), path)


class TrustList:
    def __init__(self, cert_dir: str | Path) -> None:
        self.trusted = Path(cert_dir) / "trusted"
        self.rejected = Path(cert_dir) / "rejected"

    def trust(self, source: str | Path) -> Listed:
        """Let the certificate in `source` in (a file, or the fingerprint of one the server rejected)."""
        path = Path(source)
        if not path.is_file():
            found = [p for p in self._files(self.rejected) if p.stem.startswith(str(source).lower().replace(":", ""))]
            if len(found) != 1:
                raise ValueError(f"{source}: no such certificate file, and {len(found)} rejected certificates start "
                                 "with that fingerprint (`inspector tls rejected` lists them)")
            path = found[0]
        cert = load_certificate(path)
        fp = fingerprint_of(cert)
        self.trusted.mkdir(parents=True, exist_ok=True)
        out = self.trusted / f"{fp}.der"
        out.write_bytes(cert.public_bytes(Encoding.DER))
        (self.rejected / f"{fp}.der").unlink(missing_ok=True)
        return _listed(cert, out)

    def untrust(self, fingerprint: str) -> Listed:
        fp = fingerprint.lower().replace(":", "")
        found = [p for p in self._files(self.trusted) if p.stem.startswith(fp)]
        if len(found) != 1:
            raise ValueError(f"{fingerprint}: {len(found)} trusted certificates start with that fingerprint")
        listed = _listed(load_certificate(found[0]), found[0])
        found[0].unlink()
        return listed

    def listing(self, rejected: bool = False) -> list[Listed]:
        out = []
        for path in self._files(self.rejected if rejected else self.trusted):
            try:
                out.append(_listed(load_certificate(path), path))
            except ValueError:
                log.warning("%s in the trust list is not a certificate; ignored", path)
        return out

    def is_trusted(self, cert: x509.Certificate) -> bool:
        return (self.trusted / f"{fingerprint_of(cert)}.der").is_file()

    @staticmethod
    def _files(folder: Path) -> list[Path]:
        return sorted(p for p in folder.glob("*") if p.is_file()) if folder.is_dir() else []

    async def __call__(self, cert: x509.Certificate, app: ua.ApplicationDescription) -> None:
        """asyncua's certificate validator: a client not in the list is refused, its certificate kept in
        `rejected/` for the engineer to look at."""
        if self.is_trusted(cert):
            return
        self.rejected.mkdir(parents=True, exist_ok=True)
        fp = fingerprint_of(cert)
        (self.rejected / f"{fp}.der").write_bytes(cert.public_bytes(Encoding.DER))
        log.warning("OPC UA client %s (%s, certificate %s) refused: not in the trust list; `inspector tls trust %s` "
                    "lets it in", app.ApplicationUri, cert.subject.rfc4514_string(), fp[:16], fp[:16])
        raise ua.UaStatusCodeError(ua.StatusCodes.BadCertificateUntrusted)
