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


def _exchange(server: ServeProcess, request: bytes) -> tuple[str, dict[str, str], bytes, bool]:
    """One request on a new connection: the status line, the headers (lower-case names), the body, and
    whether the server closed the connection after it."""
    with _tls(server) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        while len(body) < int(headers["content-length"]):
            body += sock.recv(65536)
        sock.settimeout(2)
        try:
            closed = sock.recv(1) == b""
        except TimeoutError:
            closed = False
    return lines[0], headers, body, closed


def _post(path: str, body: bytes, extra: str = "", version: str = "HTTP/1.1") -> bytes:
    return (
        f"POST {path} {version}\r\nHost: localhost\r\nContent-Type: application/json\r\n{extra}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


@pytest.mark.parametrize(
    ("version", "extra", "closes"),
    [
        ("HTTP/1.1", "", False),
        ("HTTP/1.1", "Connection: close\r\n", True),
        ("HTTP/1.0", "", True),
        ("HTTP/1.0", "Connection: keep-alive\r\n", False),
    ],
)
def test_the_worker_answers_admit_itself_as_gunicorn_would(
    server: ServeProcess, version: str, extra: str, closes: bool
) -> None:
    """POST /v1/admit is answered by the worker's own route (no Gunicorn parser or WSGI); a
    request carrying a header field the route leaves to Gunicorn (here X-Trace) goes the other way. Both
    answers must be the same: status line, framing, connection handling, JSON."""
    review_body = json.dumps(review(pod(labels={}), uid="uid-route")).encode()
    routed = _exchange(server, _post("/v1/admit?timeout=10s", review_body, extra, version))
    gunicorn = _exchange(
        server, _post("/v1/admit?timeout=10s", review_body, extra + "X-Trace: 1\r\n", version)
    )
    for status, headers, body, closed in (routed, gunicorn):
        assert status == f"{version} 200 OK"
        assert headers["content-type"] == "application/json"
        assert headers["connection"] == ("close" if closes else "keep-alive")
        assert headers["server"] and headers["date"]
        assert closed is closes
        assert json.loads(body)["response"]["uid"] == "uid-route"
    assert json.loads(routed[2]) == json.loads(gunicorn[2])
    assert routed[1].keys() == gunicorn[1].keys()


def test_an_oversized_review_is_refused_alike_on_both_paths(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    proc = ServeProcess(tmp_path / "srv", policies, workers=1, args=["--max-request-bytes", "2000"]).start()
    try:
        big = json.dumps(review(pod(labels={"owner": "x" * 3000}), uid="uid-big")).encode()
        answers = [_exchange(proc, _post("/v1/admit", big, extra)) for extra in ("", "X-Trace: 1\r\n")]
        for status, _headers, body, closed in answers:
            assert status.startswith("HTTP/1.1 413") and closed
            assert json.loads(body)["code"] == 413
        assert answers[0][2] == answers[1][2]
    finally:
        proc.stop()
