"""A throw-away certificate authority for test control planes and webhooks (envtest style).

One `CertificateAuthority` signs the API server's serving certificate, the client certificates of its
users (the admin is in `system:masters`) and, for end-to-end tests, the webhook's serving certificate.
Keys are ECDSA P-256: quick to generate and accepted by Go's TLS stack and by Kubernetes.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from celkeeper.tls import certificate_builder

_DAYS = 2  # validity of every certificate


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, both PEM."""

    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path, name: str) -> tuple[Path, Path]:
        """Write `<name>.crt` and `<name>.key` (mode 0600) into `directory`; return both paths."""
        directory.mkdir(parents=True, exist_ok=True)
        cert_path = directory / f"{name}.crt"
        key_path = directory / f"{name}.key"
        cert_path.write_bytes(self.cert_pem)
        key_path.touch(mode=0o600)
        key_path.write_bytes(self.key_pem)
        return cert_path, key_path


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str, organizations: Sequence[str] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _san(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


class CertificateAuthority:
    """A self-signed CA that issues serving and client certificates."""

    def __init__(self, common_name: str = "celkeeper-test-ca") -> None:
        self._key = _new_key()
        name = _name(common_name)
        self._cert = (
            certificate_builder(name, name, self._key.public_key(), ca=True, days=_DAYS, now=_now())
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.cert_pem: bytes = self._cert.public_bytes(serialization.Encoding.PEM)

    def _issue(
        self,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        hosts: Sequence[str] = (),
    ) -> KeyPair:
        key = _new_key()
        issuer = self._cert.subject
        builder = (
            certificate_builder(subject, issuer, key.public_key(), ca=False, days=_DAYS, now=_now())
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False
            )
        )
        if hosts:
            builder = builder.add_extension(_san(hosts), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    def serving_cert(self, hosts: Sequence[str], common_name: str | None = None) -> KeyPair:
        """A TLS server certificate for `hosts` (IP addresses and DNS names)."""
        if not hosts:
            raise ValueError("a serving certificate needs at least one host")
        return self._issue(_name(common_name or hosts[0]), ExtendedKeyUsageOID.SERVER_AUTH, hosts)

    def client_cert(self, user: str, groups: Sequence[str] = ()) -> KeyPair:
        """A client certificate Kubernetes maps to `user` (CN) in `groups` (O)."""
        return self._issue(_name(user, groups), ExtendedKeyUsageOID.CLIENT_AUTH)


def service_account_keys() -> KeyPair:
    """The key pair kube-apiserver signs and verifies service-account tokens with.

    `cert_pem` holds the PEM public key (not a certificate): that is what `--service-account-key-file`
    takes; `key_pem` goes to `--service-account-signing-key-file`.
    """
    key = _new_key()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return KeyPair(public, _key_pem(key))
