"""Certificates: making a CA and serving certificates, and deciding when a stored set must be rotated.

    key, cert = new_ca(common_name, days, now)
    key, cert = new_serving_certificate(ca_key, ca_cert, dns_names, ips, days=..., now=...)
    plan = plan_rotation(data, now, RotationPolicy(dns_names=[...]))   # None: nothing to change

`plan_rotation` is what every celkeeper pod runs on the webhook's certificate Secret
(celkeeper.incluster.certrotator): it reads the Secret's data (PEM bytes by key) and returns the
data it should hold now, with the reason, or None when the stored data is good. No I/O and no clock:
`now` is passed in; only new keys are random. Every pod computes the same verdict from the same
data, so leaderless writers agree on *whether* to write; the API's resourceVersion settles *who* writes.

Rotation is made so that no request fails on the way:
- a serving certificate is renewed from the same CA well before it expires (`lookahead`): both the old
  and the new certificate verify against the CA bundle the API server already has;
- a CA is renewed in two steps: first a new CA is *staged* (added to the trusted bundle, `next-ca.*`,
  with the time it was staged) while the old CA keeps signing; once it has been in the bundle for
  `ca_overlap` and every webhook configuration carries it (`next_ca_published`), it is *promoted*: it
  signs a new serving certificate, and the old CA stays in the bundle until it expires. The bundle's
  bytes do not change at the promotion (its order is stable), so the API servers keep their webhook
  clients and connections through it.

Keys are ECDSA P-256 (quick to generate, cheap handshakes, accepted by Go's TLS stack).
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from celkeeper.errors import CelkeeperError

_BACKDATE = datetime.timedelta(minutes=5)  # tolerate clocks a little behind ours

# the keys of the certificate Secret (the first four are Gatekeeper's and cert-manager's names)
CA_CERT, CA_KEY, SERVING_CERT, SERVING_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
CA_BUNDLE = "ca-bundle.crt"  # every CA the webhook configurations trust (what goes into caBundle)
NEXT_CA_CERT, NEXT_CA_KEY, NEXT_CA_SINCE = "next-ca.crt", "next-ca.key", "next-ca.since"


class TLSConfigError(CelkeeperError):
    """A certificate or key that cannot be used (missing, unreadable, not a matching pair)."""


# ---------------------------------------------------------------------------------------------
# making certificates


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def certificate_builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    *,
    ca: bool,
    days: int,
    now: datetime.datetime,
) -> x509.CertificateBuilder:
    """What every certificate here has: a random serial, validity from a little before `now` for `days`,
    and the basic constraints and key usage of a CA (signs leaf certificates: path length 0) or of a
    leaf (signs TLS handshakes). Callers add their own extensions and sign."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )


def new_ca(
    common_name: str = "celkeeper development CA", days: int = 3650, now: datetime.datetime | None = None
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    now = now or datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    name = _name(common_name)
    cert = (
        certificate_builder(name, name, key.public_key(), ca=True, days=days, now=now)
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def new_serving_certificate(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    dns_names: Sequence[str],
    ips: Sequence[str],
    *,
    days: int = 365,
    now: datetime.datetime | None = None,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    if not dns_names and not ips:
        raise TLSConfigError("a serving certificate needs at least one DNS name or IP address")
    alt_names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    for ip in ips:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(ip)))
        except ValueError as err:
            raise TLSConfigError(f"not an IP address: {ip!r}") from err
    now = now or datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    subject = _name(dns_names[0] if dns_names else ips[0])
    cert = (
        certificate_builder(subject, ca_cert.subject, key.public_key(), ca=False, days=days, now=now)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


# ---------------------------------------------------------------------------------------------
# reading what is stored


@dataclass(frozen=True)
class KeyPair:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    cert_pem: bytes
    key_pem: bytes


def load_pair(cert_pem: bytes | None, key_pem: bytes | None) -> KeyPair | None:
    """A certificate and its ECDSA key, None when either is missing, unreadable or they do not match."""
    if not cert_pem or not key_pem:
        return None
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):
        return None
    public = cert.public_key()
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(public, ec.EllipticCurvePublicKey):
        return None
    if key.public_key().public_numbers() != public.public_numbers():
        return None
    return KeyPair(cert, key, cert_pem, key_pem)


def load_bundle(pem: bytes | None) -> list[x509.Certificate]:
    if not pem:
        return []
    try:
        return list(x509.load_pem_x509_certificates(pem))
    except ValueError:
        return []


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _dns_names(cert: x509.Certificate) -> set[str]:
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return set(names.get_values_for_type(x509.DNSName))


def _since(raw: bytes | None) -> datetime.datetime | None:
    try:
        value = datetime.datetime.fromisoformat(raw.decode()) if raw else None
    except (ValueError, UnicodeDecodeError):
        return None
    if value is not None and value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return value


# ---------------------------------------------------------------------------------------------
# rotation


@dataclass(frozen=True)
class RotationPolicy:
    dns_names: tuple[str, ...]
    ca_name: str = "celkeeper webhook CA"
    ca_days: int = 3650
    cert_days: int = 365
    lookahead: datetime.timedelta = datetime.timedelta(days=90)  # renew when less than this is left
    ca_overlap: datetime.timedelta = datetime.timedelta(seconds=60)  # a staged CA is trusted this long first

    def __post_init__(self) -> None:
        if not self.dns_names:
            raise TLSConfigError("the serving certificate needs at least one DNS name")
        for days, what in ((self.cert_days, "serving certificate"), (self.ca_days, "CA")):
            if datetime.timedelta(days=days) <= 2 * self.lookahead:
                raise TLSConfigError(
                    f"the {what} must be valid for more than twice the renewal lookahead "
                    f"({days} days; lookahead {self.lookahead.days} days)"
                )


@dataclass(frozen=True)
class Rotation:
    data: dict[str, bytes]
    reason: str
    promotes_ca: bool = False


@dataclass
class _State:
    data: dict[str, bytes]
    reasons: list[str] = field(default_factory=list)
    promotes_ca: bool = False


def plan_rotation(
    data: Mapping[str, bytes],
    now: datetime.datetime,
    policy: RotationPolicy,
    *,
    next_ca_published: bool = True,
) -> Rotation | None:
    """What the certificate Secret must hold now, or None when `data` is good as it is.

    Keys other than celkeeper's are kept. `next_ca_published`: whether every webhook configuration
    already trusts the staged CA (a staged CA is promoted only then)."""
    state = _State(dict(data))
    ca = load_pair(data.get(CA_CERT), data.get(CA_KEY))
    if ca is None or not _is_ca(ca.cert) or ca.cert.not_valid_after_utc <= now:
        why = "no usable CA" if ca is None or not _is_ca(ca.cert) else "the CA has expired"
        ca = _new_ca_pair(policy, now)
        _set_ca(state, ca)
        for key in (NEXT_CA_CERT, NEXT_CA_KEY, NEXT_CA_SINCE, CA_BUNDLE):
            state.data.pop(key, None)
        state.reasons.append(f"{why}: made a new CA")
    elif ca.cert.not_valid_after_utc - now < policy.lookahead:
        ca = _rotate_ca(state, ca, now, policy, next_ca_published)
    else:
        for key in (NEXT_CA_CERT, NEXT_CA_KEY, NEXT_CA_SINCE):  # a stale stage of a rotation not needed
            if key in state.data:
                state.data.pop(key)
                state.reasons.append(f"dropped {key}: the CA is not due for renewal")
    _check_serving(state, ca, now, policy)
    _check_bundle(state, ca, now)
    if state.data == dict(data):
        return None
    return Rotation(state.data, "; ".join(state.reasons) or "rewrote the CA bundle", state.promotes_ca)


def _new_ca_pair(policy: RotationPolicy, now: datetime.datetime) -> KeyPair:
    key, cert = new_ca(policy.ca_name, policy.ca_days, now)
    return KeyPair(cert, key, pem_cert(cert), pem_key(key))


def _set_ca(state: _State, ca: KeyPair) -> None:
    state.data[CA_CERT] = ca.cert_pem
    state.data[CA_KEY] = ca.key_pem


def _rotate_ca(
    state: _State, ca: KeyPair, now: datetime.datetime, policy: RotationPolicy, published: bool
) -> KeyPair:
    """The CA is due: stage a new one, or promote the staged one once it has been trusted long enough."""
    staged = load_pair(state.data.get(NEXT_CA_CERT), state.data.get(NEXT_CA_KEY))
    since = _since(state.data.get(NEXT_CA_SINCE))
    usable = (
        staged is not None
        and _is_ca(staged.cert)
        and since is not None
        and staged.cert.not_valid_after_utc - now >= policy.lookahead
    )
    if not usable:
        staged = _new_ca_pair(policy, now)
        state.data[NEXT_CA_CERT] = staged.cert_pem
        state.data[NEXT_CA_KEY] = staged.key_pem
        state.data[NEXT_CA_SINCE] = now.isoformat().encode()
        state.reasons.append(
            f"the CA expires {ca.cert.not_valid_after_utc:%Y-%m-%d %H:%M}: staged a new CA in the bundle"
        )
        return ca
    assert staged is not None and since is not None
    if now - since < policy.ca_overlap or not published:
        return ca  # wait until the staged CA is trusted everywhere
    state.data[CA_BUNDLE] = state.data.get(CA_BUNDLE, b"") + ca.cert_pem  # the old CA stays trusted
    _set_ca(state, staged)
    for key in (NEXT_CA_CERT, NEXT_CA_KEY, NEXT_CA_SINCE, SERVING_CERT, SERVING_KEY):
        state.data.pop(key, None)
    state.promotes_ca = True
    state.reasons.append("promoted the staged CA (the old one stays trusted until it expires)")
    return staged


def _check_serving(state: _State, ca: KeyPair, now: datetime.datetime, policy: RotationPolicy) -> None:
    serving = load_pair(state.data.get(SERVING_CERT), state.data.get(SERVING_KEY))
    why = None
    if serving is None:
        why = "no usable serving certificate"
    elif not _signed_by(serving.cert, ca.cert):
        why = "the serving certificate is not signed by the CA"
    elif not set(policy.dns_names) <= _dns_names(serving.cert):
        why = f"the serving certificate does not name {', '.join(policy.dns_names)}"
    elif serving.cert.not_valid_after_utc - now < policy.lookahead:
        why = f"the serving certificate expires {serving.cert.not_valid_after_utc:%Y-%m-%d %H:%M}"
    elif serving.cert.not_valid_before_utc > now:
        why = "the serving certificate is not valid yet"
    if why is None:
        return
    key, cert = new_serving_certificate(ca.key, ca.cert, policy.dns_names, (), days=policy.cert_days, now=now)
    state.data[SERVING_CERT] = pem_cert(cert)
    state.data[SERVING_KEY] = pem_key(key)
    if not state.promotes_ca:
        state.reasons.append(f"{why}: issued a new one")


def _check_bundle(state: _State, ca: KeyPair, now: datetime.datetime) -> None:
    """The trusted bundle, in a stable order: the CAs it held that have not expired, then the signing CA
    and a staged CA when it lacked them. Its bytes go into the webhook configurations' caBundle, and
    every change of those makes each API server build a new webhook client, whose first calls open new
    connections to every pod; so a rotation changes them only when a CA comes in (staged) or leaves
    (expired), never when the staged CA is promoted."""
    wanted: list[x509.Certificate] = []
    staged = load_pair(state.data.get(NEXT_CA_CERT), state.data.get(NEXT_CA_KEY))
    kept = [c for c in load_bundle(state.data.get(CA_BUNDLE)) if _is_ca(c) and c.not_valid_after_utc > now]
    for cert in [*kept, ca.cert, *([staged.cert] if staged is not None else [])]:
        if cert not in wanted:
            wanted.append(cert)
    state.data[CA_BUNDLE] = b"".join(pem_cert(cert) for cert in wanted)


def trusted_bundle(data: Mapping[str, bytes]) -> bytes:
    """What goes into the webhook configurations' caBundle: the Secret's bundle, else its CA."""
    return data.get(CA_BUNDLE) or data.get(CA_CERT) or b""


def bundle_trusts(bundle_pem: bytes, ca_pem: bytes) -> bool:
    """Whether a caBundle holds the CA certificate `ca_pem`."""
    wanted = load_bundle(ca_pem)
    return bool(wanted) and wanted[0] in load_bundle(bundle_pem)
