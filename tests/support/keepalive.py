"""Clients that keep admission connections alive the way the API server does (Go's HTTP transport),
to see what a stopping server does to them. Used by tests/webhook/test_server_drain.py and bench/drain.py.

    fleet = KeptAliveFleet("127.0.0.1", port, context, body, clients=6)
    fleet.start()                 # each client sends reviews back to back on its kept-alive connection
    ...                           # stop the server
    fleet.stop_sending()          # the Service no longer sends here (its endpoints were updated)
    fleet.tally()                 # answered, closing answers, failures (what a webhook call would lose)

A client reuses its connection until an answer says `Connection: close` or the server closed it
while idle (seen before writing, as Go's transport sees the FIN of an idle connection: nothing is lost,
a new connection is opened). Everything else is a failed webhook call: a refused or reset connection,
a TLS handshake that fails, a written request without a whole answer (Go's transport does not resend
a POST it has written).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Tally:
    answered: int = 0  # whole answers with the expected status
    closing: int = 0  # of those, how many said `Connection: close`
    kept_after: int = 0  # answers to requests written after `mark` that kept the connection open
    idle_closed: int = 0  # connections the server closed while idle (seen before writing)
    failures: list[str] = field(default_factory=list)


def closed_while_idle(sock: ssl.SSLSocket) -> bool:
    """The server closed this idle connection (FIN or reset seen), as Go's transport notices it."""
    try:
        sock.setblocking(False)
        data = sock.recv(1)
    except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
        return False  # nothing there (or a TLS record without data, a session ticket): open
    except (OSError, ValueError):
        return True
    finally:
        with contextlib.suppress(OSError):
            sock.setblocking(True)
    return data == b""


def post(sock: ssl.SSLSocket, body: bytes, timeout: float = 10.0) -> tuple[int, bytes, bool]:
    """One review on the connection: (status, body, the answer said `Connection: close`)."""
    sock.settimeout(timeout)
    head = (
        f"POST /v1/admit HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock.sendall(head + body)
    return read_answer(sock, timeout)


def read_answer(sock: ssl.SSLSocket, timeout: float = 10.0) -> tuple[int, bytes, bool]:
    """The answer to a request written on the connection: (status, body, it said `Connection: close`)."""
    sock.settimeout(timeout)
    resp = http.client.HTTPResponse(sock)  # type: ignore[arg-type]
    resp.begin()
    data = resp.read()
    return resp.status, data, (resp.getheader("Connection") or "").lower() == "close"


class KeptAliveFleet:
    def __init__(
        self,
        host: str,
        port: int,
        context: ssl.SSLContext,
        body: bytes,
        clients: int = 6,
        status: int = 200,
    ) -> None:
        self.host, self.port, self.context, self.body = host, port, context, body
        self.status = status
        self.tally = Tally()
        self.mark = float("inf")  # requests written after this (monotonic) must get closing answers
        self._lock = threading.Lock()
        self._sending = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(clients)]

    def start(self) -> None:
        self._sending.set()
        for thread in self._threads:
            thread.start()

    def stop_sending(self, timeout: float = 30.0) -> Tally:
        self._sending.clear()
        for thread in self._threads:
            thread.join(timeout)
        return self.tally

    def _fail(self, what: str) -> None:
        with self._lock:
            self.tally.failures.append(f"{what} (at {time.monotonic() - self.mark:+.2f} s)")

    def _connect(self) -> ssl.SSLSocket | None:
        try:
            raw = socket.create_connection((self.host, self.port), timeout=10)
        except OSError as err:
            self._fail(f"connect: {type(err).__name__}: {err}")
            return None
        try:
            return self.context.wrap_socket(raw, server_hostname="localhost")
        except OSError as err:
            raw.close()
            self._fail(f"TLS handshake: {type(err).__name__}: {err}")
            return None

    def _run(self) -> None:
        sock: ssl.SSLSocket | None = None
        while self._sending.is_set():
            if sock is not None and closed_while_idle(sock):
                with self._lock:
                    self.tally.idle_closed += 1
                sock.close()
                sock = None
            if sock is None:
                sock = self._connect()
                if sock is None:
                    time.sleep(0.05)
                    continue
            written = time.monotonic()
            try:
                status, data, close = post(sock, self.body)
            except (OSError, http.client.HTTPException) as err:
                self._fail(f"written, no answer: {type(err).__name__}: {err}")
                sock.close()
                sock = None
                continue
            with self._lock:
                if status == self.status:
                    self.tally.answered += 1
                    self.tally.closing += close
                    self.tally.kept_after += not close and written > self.mark
                else:
                    self.tally.failures.append(f"status {status}: {data[:120]!r}")
            if close:
                sock.close()
                sock = None
        if sock is not None:
            sock.close()
