"""`celkeeper serve` without the fast-http extra (gunicorn-h1c, which needs a C compiler to install): the
webhook's framing (webhook/http1.py) and Gunicorn read request heads with Gunicorn's Python parser, and
every answer is the one the server with the extra gives, byte for byte but for the Date header and, for a
head Gunicorn refuses, the words of its 400 (each of Gunicorn's parsers words what it found)."""

from __future__ import annotations

import json
import re
import shutil
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.serve import POLICIES, ServeProcess, pod, review

pytestmark = pytest.mark.server

LABELLED = {"owner": "alice", "team": "shop", "cost-center": "cc-1"}


def _servers(workdir: Path) -> Iterator[dict[str, ServeProcess]]:
    hidden = workdir / "hide-h1c"
    (hidden / "gunicorn_h1c").mkdir(parents=True)
    marker = workdir / "h1c-refused"
    # imported instead of the installed package: it notes that it was asked for, and is not there
    (hidden / "gunicorn_h1c" / "__init__.py").write_text(
        f"open({str(marker)!r}, 'a').close()\nraise ImportError('gunicorn_h1c is hidden by the test')\n"
    )
    servers = {}
    for name, env in (("fast", {}), ("python", {"PYTHONPATH": f"{hidden}:{Path.cwd()}"})):
        folder = workdir / name
        folder.mkdir()
        shutil.copytree(POLICIES, folder / "policies")
        servers[name] = ServeProcess(folder, folder / "policies", workers=1, env=env)
    try:
        for server in servers.values():
            server.start()
        assert marker.exists(), "the server without the extra did not look for gunicorn_h1c"
        yield servers
    finally:
        for server in servers.values():
            server.stop()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServeProcess]]:
    yield from _servers(tmp_path_factory.mktemp("parsers"))


def _exchange(server: ServeProcess, raw: bytes, pause_after_head: bool = False) -> bytes:
    """What the server answers `raw` on a new TLS connection, to the end (the request closes it)."""
    context = ssl.create_default_context(cafile=str(server.certs.ca_cert))
    with (
        socket.create_connection(("127.0.0.1", server.port), timeout=10) as plain,
        context.wrap_socket(plain, server_hostname="localhost") as tls,
    ):
        if pause_after_head:  # Expect: 100-continue: the body only after the interim answer
            head, body = raw.split(b"\r\n\r\n", 1)
            tls.sendall(head + b"\r\n\r\n")
            interim = tls.recv(4096)
            tls.sendall(body)
            return interim + _read_all(tls)
        tls.sendall(raw)
        return _read_all(tls)


def _read_all(tls: ssl.SSLSocket) -> bytes:
    chunks = []
    while True:
        try:
            data = tls.recv(65536)
        except (ConnectionResetError, ssl.SSLError):
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)


def _request(body: bytes, *fields: bytes) -> bytes:
    head = b"POST /v1/admit HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    head += b"Connection: close\r\n"
    return head + b"".join(f + b"\r\n" for f in fields) + b"\r\n" + body


def _same(answer: bytes) -> bytes:
    return re.sub(rb"(?m)^Date: .*\r\n", b"", answer)


def test_every_answer_is_the_fast_parsers(servers: dict[str, ServeProcess]) -> None:
    allowed = json.dumps(review(pod(labels=LABELLED), uid="0a6f1c1e-0000-4000-8000-000000000001")).encode()
    denied = json.dumps(review(pod(), uid="0a6f1c1e-0000-4000-8000-000000000002")).encode()
    chunked = (
        b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (denied[:100], denied[100:])) + b"0\r\n\r\n"
    )
    requests = {
        "allowed": (_request(allowed, b"Content-Length: %d" % len(allowed)), False),
        "denied, chunked": (_request(chunked, b"Transfer-Encoding: chunked"), False),
        "expect 100-continue": (
            _request(allowed, b"Content-Length: %d" % len(allowed), b"Expect: 100-continue"),
            True,
        ),
        "a header name with a space": (
            _request(allowed, b"Bad Name: x", b"Content-Length: %d" % len(allowed)),
            False,
        ),
        "content-length and chunked": (
            _request(chunked, b"Content-Length: 5", b"Transfer-Encoding: chunked"),
            False,
        ),
        "two content-lengths": (_request(b"{}", b"Content-Length: 2", b"Content-Length: 3"), False),
        "a bad chunk size": (_request(b"zz\r\nxx\r\n0\r\n\r\n", b"Transfer-Encoding: chunked"), False),
    }
    answers = {
        name: {which: _same(_exchange(server, raw, pause)) for which, server in servers.items()}
        for name, (raw, pause) in requests.items()
    }
    malformed = ("a header name with a space", "content-length and chunked", "two content-lengths")
    for name, by_parser in answers.items():
        if name in malformed:  # Gunicorn's 400: the reason is worded by the parser that found it
            assert (
                by_parser["python"].split(b"\r\n\r\n")[0].split(b"Content-Length")[0]
                == (by_parser["fast"].split(b"\r\n\r\n")[0].split(b"Content-Length")[0])
            ), (name, by_parser)
        else:
            assert by_parser["python"] == by_parser["fast"], (name, by_parser)
    status = {name: a["fast"].split(b"\r\n", 1)[0] for name, a in answers.items()}
    assert status["allowed"] == b"HTTP/1.1 200 OK" and b'"allowed":true' in answers["allowed"]["fast"]
    assert (
        status["denied, chunked"] == b"HTTP/1.1 200 OK"
        and b'"allowed":false' in answers["denied, chunked"]["fast"]
    )
    assert status["expect 100-continue"] == b"HTTP/1.1 100 Continue"
    for name in (
        "a header name with a space",
        "content-length and chunked",
        "two content-lengths",
        "a bad chunk size",
    ):
        assert status[name] == b"HTTP/1.1 400 Bad Request", (name, answers[name]["fast"][:200])
