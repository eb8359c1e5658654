"""The webhook worker (celkeeper.webhook.worker) on a real server: pipelined requests answered in
order, a silent connection holding nothing."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.serve import POLICIES, ServeProcess, pod, review

ALLOWED = pod(labels={"owner": "a", "team": "b", "cost-center": "c"})


@pytest.fixture
def server(tmp_path: Path) -> Any:
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    proc = ServeProcess(tmp_path / "srv", policies, workers=1).start()
    yield proc
    proc.stop()


def _tls(server: ServeProcess) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(server.certs.ca_cert))
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return ctx.wrap_socket(raw, server_hostname="localhost")


def _read_responses(sock: ssl.SSLSocket, count: int) -> list[dict[str, Any]]:
    """`count` HTTP responses with Content-Length bodies, read off one connection."""
    data = b""
    answers: list[dict[str, Any]] = []
    while len(answers) < count:
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0:
            head = data[:head_end].decode("latin-1")
            length = int(
                next(h.split(":", 1)[1] for h in head.split("\r\n") if h.lower().startswith("content-length"))
            )
            if len(data) >= head_end + 4 + length:
                assert head.startswith("HTTP/1.1 200"), head
                answers.append(json.loads(data[head_end + 4 : head_end + 4 + length]))
                data = data[head_end + 4 + length :]
                continue
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk
    return answers


def _request(uid: str) -> bytes:
    body = json.dumps(review(ALLOWED, uid=uid)).encode()
    return (
        b"POST /v1/admit HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


def test_pipelined_requests_are_all_answered_in_order(server: ServeProcess) -> None:
    with _tls(server) as sock:
        sock.sendall(b"".join(_request(f"uid-{i}") for i in range(3)))  # one write: read ahead
        answers = _read_responses(sock, 3)
    assert [a["response"]["uid"] for a in answers] == ["uid-0", "uid-1", "uid-2"]
    assert all(a["response"]["allowed"] for a in answers)


def test_a_silent_connection_does_not_hold_the_worker(server: ServeProcess) -> None:
    # a client that connects and sends nothing waits in the poller, not in the worker's only thread
    silent = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    try:
        time.sleep(0.2)
        started = time.monotonic()
        with _tls(server) as sock:
            sock.sendall(_request("uid-after-silent"))
            (answer,) = _read_responses(sock, 1)
        assert answer["response"]["uid"] == "uid-after-silent"
        assert time.monotonic() - started < 3  # gthread's wait for the first bytes is 5 s
    finally:
        silent.close()


def test_a_long_pipeline_is_answered_whole_and_in_order(server: ServeProcess) -> None:
    # one request after the other from the same connection, each already waiting when the previous
    # answer is written: handled one per loop round (neither recursion nor starving the others)
    count = 1200
    with _tls(server) as sock:
        sock.settimeout(60)
        sock.sendall(b"".join(_request(f"uid-{i}") for i in range(count)))
        answers = _read_responses(sock, count)
    assert [a["response"]["uid"] for a in answers] == [f"uid-{i}" for i in range(count)]
    assert "RecursionError" not in server.log(2000)
