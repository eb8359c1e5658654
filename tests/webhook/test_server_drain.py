"""SIGTERM drains before the server stops, so that a pod stopping in a rolling update never fails an
admission call on a kept-alive connection (docs/known-issues.md had it: Gunicorn reset them, and with
failurePolicy Ignore those calls were admitted unchecked). On a real `celkeeper serve` over TLS.

As Kubernetes stops a pod, only the master gets SIGTERM. Meanwhile clients keep sending reviews on
kept-alive connections, as the API server does, until the Service stops sending to the pod (modelled:
STOP_SENDING after the signal, within the drain): none may fail - no refused or reset connection, no
written request without an answer - every answer after the signal says `Connection: close`, a request
half-sent when the signal came is answered, a connection left idle is closed with a FIN (no reset),
and the server takes the drain before leaving, and no longer than drain + graceful timeout.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import ssl
import time
from pathlib import Path

import pytest

from tests.support.keepalive import KeptAliveFleet, post, read_answer
from tests.support.serve import POLICIES, PROCESS_MODELS, ServeProcess, pod, review

pytestmark = pytest.mark.server

DRAIN = 3.0
GRACEFUL = 10
STOP_SENDING = 2.0  # seconds after SIGTERM the clients stop (the endpoints were updated)
DENIED = json.dumps(review(pod(labels={}))).encode()  # tests/support/policies require labels


def _denied(body: bytes) -> bool:
    return (json.loads(body).get("response") or {}).get("allowed") is False


def _connect(server: ServeProcess) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return server.client_context().wrap_socket(raw, server_hostname="localhost")


def _wait_exit(server: ServeProcess, timeout: float) -> None:
    assert server.process is not None
    deadline = time.monotonic() + timeout
    while server.process.running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not server.process.running(), f"still running {timeout} s later:\n{server.log(60)}"


@pytest.mark.parametrize("model", PROCESS_MODELS)
def test_sigterm_drains_kept_alive_connections_without_failing_a_call(tmp_path: Path, model: str) -> None:
    args = ["--drain-seconds", str(DRAIN), "--graceful-timeout", str(GRACEFUL)]
    workers, threads = PROCESS_MODELS[model]
    server = ServeProcess(tmp_path / "srv", POLICIES, workers=workers, threads=threads, args=args).start()
    assert server.process is not None
    sockets = contextlib.ExitStack()  # the test's own connections, closed at the end
    try:
        idle = sockets.enter_context(_connect(server))  # kept alive, then left idle throughout
        status, body, close = post(idle, DENIED)
        assert status == 200 and _denied(body) and not close
        later = sockets.enter_context(_connect(server))  # kept alive, used again during the drain
        assert post(later, DENIED)[2] is False
        half = sockets.enter_context(_connect(server))  # in flight at the signal: half its body sent
        half.sendall(
            b"POST /v1/admit HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(DENIED)}\r\n\r\n".encode()
            + DENIED[: len(DENIED) // 2]
        )
        fleet = KeptAliveFleet("127.0.0.1", server.port, server.client_context(), DENIED, clients=6)
        fleet.start()
        time.sleep(1.0)
        before = fleet.tally.answered

        signalled = time.monotonic()
        fleet.mark = signalled + 0.2  # the master sets the drain flag at once
        os.kill(server.process.pid, signal.SIGTERM)
        time.sleep(0.5)
        half.sendall(DENIED[len(DENIED) // 2 :])
        half_answer = read_answer(half)
        time.sleep(1.0)
        later_answer = post(later, DENIED)
        time.sleep(max(0.0, signalled + STOP_SENDING - time.monotonic()))
        tally = fleet.stop_sending()

        idle.settimeout(DRAIN + GRACEFUL + 5)
        try:
            idle_end: bytes | str = idle.recv(1)
        except OSError as err:
            idle_end = f"{type(err).__name__}: {err}"
        _wait_exit(server, DRAIN + GRACEFUL + 10)
        stopped = time.monotonic() - signalled
        log = server.log(100_000)

        assert not tally.failures, (tally.failures[:5], log[-2000:])
        assert tally.answered - before >= 10, "reviews were sent during the drain"
        assert tally.kept_after == 0, f"{tally.kept_after} answers during the drain kept their connection"
        assert half_answer[0] == 200 and _denied(half_answer[1]) and half_answer[2], half_answer
        assert later_answer[0] == 200 and _denied(later_answer[1]) and later_answer[2], later_answer
        assert idle_end == b"", f"the idle connection ended with {idle_end!r}, not a FIN"
        assert "Draining for 3.0 s" in log
        assert DRAIN <= stopped < DRAIN + GRACEFUL, f"stopped {stopped:.1f} s after SIGTERM"
        assert server.process.returncode() == 0, log[-2000:]
        print(
            f"{tally.answered - before} reviews during the drain, none failed; "
            f"{tally.closing} closing answers; stopped {stopped:.1f} s after SIGTERM"
        )
    finally:
        sockets.close()
        server.stop()


def test_sigint_stops_without_a_drain(tmp_path: Path) -> None:
    server = ServeProcess(tmp_path / "srv", POLICIES, workers=1, args=["--drain-seconds", "30"]).start()
    assert server.process is not None
    try:
        signalled = time.monotonic()
        os.kill(server.process.pid, signal.SIGINT)
        _wait_exit(server, 20)
        assert time.monotonic() - signalled < 15
        assert "Draining" not in server.log(200)
    finally:
        server.stop()
