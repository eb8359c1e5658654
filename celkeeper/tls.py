"""TLS for the webhook: development certificates, and a server context that follows rotated files.

    write_certificates(out_dir, dns_names=["localhost"], ips=["127.0.0.1"])
        -> CertificateFiles(ca_cert, ca_key, cert, key)   # reuses ca.crt/ca.key found in out_dir
    tls = ServerTLS(cert_file, key_file)                   # raises TLSConfigError if unusable
    tls.context()                                          # the current ssl.SSLContext (TLS 1.2+);
                                                           # rebuilt when either file changes

Keys are ECDSA P-256: quick to generate, cheap handshakes, accepted by Go's TLS stack (kube-apiserver).
"""

from __future__ import annotations

import datetime
import logging
import os
import ssl
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from celkeeper.errors import Location
from celkeeper.localfiles import Stamp, stamp_of, write_atomic
from celkeeper.pki import (
    CA_CERT,
    CA_KEY,
    SERVING_CERT,
    SERVING_KEY,
    TLSConfigError,
    certificate_builder,
    new_ca,
    new_serving_certificate,
    pem_key,
)

log = logging.getLogger("celkeeper.tls")

__all__ = [
    "CertificateFiles",
    "ServerTLS",
    "TLSConfigError",
    "build_server_context",
    "certificate_builder",
    "new_ca",
    "new_serving_certificate",
    "write_certificates",
]


@dataclass(frozen=True)
class CertificateFiles:
    ca_cert: Path
    ca_key: Path
    cert: Path
    key: Path
    ca_reused: bool


# ---------------------------------------------------------------------------------------------
# development certificates


def _load_ca(cert_path: Path, key_path: Path) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError) as err:
        raise TLSConfigError(f"cannot reuse the CA: {err}", Location(file=str(cert_path))) from err
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise TLSConfigError("the CA key is not an ECDSA key", Location(file=str(key_path)))
    cert_key = cert.public_key()
    if not isinstance(cert_key, ec.EllipticCurvePublicKey) or (
        key.public_key().public_numbers() != cert_key.public_numbers()
    ):
        raise TLSConfigError(f"the CA key does not belong to {cert_path}", Location(file=str(key_path)))
    return key, cert


def write_certificates(
    out_dir: Path,
    dns_names: Sequence[str],
    ips: Sequence[str],
    days: int = 365,
    now: datetime.datetime | None = None,
) -> CertificateFiles:
    """Write ca.crt/ca.key (kept if both exist) and a new tls.crt/tls.key signed by that CA.

    Each file is replaced atomically: a server watching tls.crt/tls.key sees either pair (it keeps
    its current context while they do not match).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    ca_cert_path, ca_key_path = out_dir / CA_CERT, out_dir / CA_KEY
    reused = ca_cert_path.is_file() and ca_key_path.is_file()
    if reused:
        ca_key, ca_cert = _load_ca(ca_cert_path, ca_key_path)
    else:
        ca_key, ca_cert = new_ca(now=now)
        write_atomic(ca_key_path, pem_key(ca_key), 0o600)
        write_atomic(ca_cert_path, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    key, cert = new_serving_certificate(ca_key, ca_cert, dns_names, ips, days=days, now=now)
    cert_path, key_path = out_dir / SERVING_CERT, out_dir / SERVING_KEY
    write_atomic(key_path, pem_key(key), 0o600)
    write_atomic(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return CertificateFiles(ca_cert_path, ca_key_path, cert_path, key_path, reused)


# ---------------------------------------------------------------------------------------------
# serving


def build_server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A server context: TLS 1.2 or newer, HTTP/1.1 over ALPN, no client certificates."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    ctx.set_alpn_protocols(["http/1.1"])
    try:
        ctx.load_cert_chain(cert_file, key_file)
    except FileNotFoundError as err:
        raise TLSConfigError(f"no such file: {err.filename}") from err
    except ssl.SSLError as err:  # (a subclass of OSError)
        raise TLSConfigError(
            f"certificate and key {key_file} do not load as a pair ({err.reason or err})",
            Location(file=cert_file),
        ) from err
    except OSError as err:
        raise TLSConfigError(
            f"cannot read the certificate or key: {err.strerror or err}", Location(file=cert_file)
        ) from err
    return ctx


class ServerTLS:
    """The serving context for one certificate/key pair, rebuilt when the files change.

    `context()` is called for every new connection: it compares the files' inode, mtime and size
    (two stat calls) and rebuilds the context when they changed. A pair that does not load (e.g. the
    certificate was replaced and the key not yet) is logged once; the previous context stays in
    use until the files change again. Thread-safe.
    """

    def __init__(self, cert_file: str | os.PathLike[str], key_file: str | os.PathLike[str]) -> None:
        self.cert_file = os.fspath(cert_file)
        self.key_file = os.fspath(key_file)
        self._lock = threading.Lock()
        self._stamp = self._current_stamp()
        self._context = build_server_context(self.cert_file, self.key_file)
        self._failed_stamp: object = None
        self.reloads = 0

    def _current_stamp(self) -> tuple[Stamp, Stamp] | None:
        try:
            return (stamp_of(os.stat(self.cert_file)), stamp_of(os.stat(self.key_file)))
        except OSError:
            return None

    def context(self) -> ssl.SSLContext:
        stamp = self._current_stamp()
        if stamp is None or stamp in (self._stamp, self._failed_stamp):
            return self._context
        with self._lock:
            if stamp == self._stamp:
                return self._context
            try:
                ctx = build_server_context(self.cert_file, self.key_file)
            except TLSConfigError as err:
                self._failed_stamp = stamp
                log.warning("TLS files changed but cannot be used yet, keeping the current ones: %s", err)
                return self._context
            self._context, self._stamp, self._failed_stamp = ctx, stamp, None
            self.reloads += 1
            log.info("TLS certificate reloaded from %s", self.cert_file)
            return ctx
