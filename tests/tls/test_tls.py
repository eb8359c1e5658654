"""celkeeper.tls: development certificates and the serving context that follows rotated files."""

from __future__ import annotations

import os
import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509

from celkeeper.tls import ServerTLS, TLSConfigError, write_certificates


def _handshake(server_ctx: ssl.SSLContext, ca: Path, hostname: str = "localhost") -> x509.Certificate:
    """Run one TLS handshake over a socket pair; return the certificate the client was shown."""
    left, right = socket.socketpair()
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            with server_ctx.wrap_socket(right, server_side=True) as conn:
                conn.recv(1)
        except (OSError, ssl.SSLError) as err:
            errors.append(err)

    thread = threading.Thread(target=serve)
    thread.start()
    client = ssl.create_default_context(cafile=str(ca))
    with client.wrap_socket(left, server_hostname=hostname) as conn:
        der = conn.getpeercert(binary_form=True)
        conn.sendall(b"x")
    thread.join(5)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def test_certificates_are_trusted_for_their_names_and_ips(tmp_path: Path) -> None:
    files = write_certificates(tmp_path, ["localhost", "celkeeper.system.svc"], ["127.0.0.1"])
    assert not files.ca_reused
    assert oct(files.key.stat().st_mode & 0o777) == "0o600"
    assert oct(files.ca_key.stat().st_mode & 0o777) == "0o600"
    tls = ServerTLS(files.cert, files.key)
    for name in ("localhost", "celkeeper.system.svc", "127.0.0.1"):
        cert = _handshake(tls.context(), files.ca_cert, name)
        assert cert.issuer == x509.load_pem_x509_certificate(files.ca_cert.read_bytes()).subject
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(tls.context(), files.ca_cert, "other.example.com")


def test_running_again_keeps_the_ca_and_rotates_the_serving_certificate(tmp_path: Path) -> None:
    first = write_certificates(tmp_path, ["localhost"], [])
    ca_before = first.ca_cert.read_bytes()
    cert_before = first.cert.read_bytes()
    second = write_certificates(tmp_path, ["localhost"], [])
    assert second.ca_reused
    assert second.ca_cert.read_bytes() == ca_before
    assert second.cert.read_bytes() != cert_before


def test_server_context_is_tls12_or_newer(tmp_path: Path) -> None:
    files = write_certificates(tmp_path, ["localhost"], [])
    ctx = ServerTLS(files.cert, files.key).context()
    assert ctx.minimum_version >= ssl.TLSVersion.TLSv1_2


def test_rotated_files_are_served_without_a_restart(tmp_path: Path) -> None:
    files = write_certificates(tmp_path, ["localhost"], [])
    tls = ServerTLS(files.cert, files.key)
    before = _handshake(tls.context(), files.ca_cert)
    write_certificates(tmp_path, ["localhost"], [])
    after = _handshake(tls.context(), files.ca_cert)
    assert after.serial_number != before.serial_number
    assert tls.reloads == 1


def test_a_mismatched_pair_keeps_the_previous_context(tmp_path: Path) -> None:
    files = write_certificates(tmp_path, ["localhost"], [])
    tls = ServerTLS(files.cert, files.key)
    before = _handshake(tls.context(), files.ca_cert)
    other = write_certificates(tmp_path / "other", ["localhost"], [])
    os.replace(other.cert, files.cert)  # a certificate whose key is not (yet) in place
    assert _handshake(tls.context(), files.ca_cert).serial_number == before.serial_number
    assert tls.reloads == 0


def test_unusable_files_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TLSConfigError, match="no such file"):
        ServerTLS(tmp_path / "missing.crt", tmp_path / "missing.key")
    files = write_certificates(tmp_path, ["localhost"], [])
    other = write_certificates(tmp_path / "other", ["localhost"], [])
    with pytest.raises(TLSConfigError, match="do not load as a pair"):
        ServerTLS(files.cert, other.key)


def test_a_certificate_needs_a_name_and_valid_ips(tmp_path: Path) -> None:
    with pytest.raises(TLSConfigError, match="at least one"):
        write_certificates(tmp_path, [], [])
    with pytest.raises(TLSConfigError, match="not an IP address"):
        write_certificates(tmp_path, [], ["300.1.1.1"])
