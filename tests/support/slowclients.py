"""Idle and slow clients, as an attacker or a broken client would hold them, and the latency real
clients see meanwhile. Used by tests/webhook/test_worker_slow_clients.py and bench/slowclients.py.

    crowd = SlowCrowd("127.0.0.1", port, client_context, phase="partial-headers", count=500)
    crowd.open(timeout=20)       # how many are held (each stalled in `phase`)
    crowd.trickle()              # slow phases: one more byte on every connection (call every second)
    crowd.closed_by_server()     # how many the server has closed
    crowd.close()
    crowd.hold(stop)             # in a thread: keep `count` held (reopen what the server closes) until stop

Phases: "tcp" (connected, nothing sent), "client-hello" (6 bytes of a real ClientHello), "handshake"
(TLS complete, nothing sent), "partial-headers" (a request line and part of a header, then a byte
now and then), "slow-body" (complete headers announcing 4 KB, then a byte now and then).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

PHASES = ("tcp", "client-hello", "handshake", "partial-headers", "slow-body")

_HEAD = b"POST /v1/admit HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"


def client_hello(context: ssl.SSLContext, server_hostname: str) -> bytes:
    """The bytes of a real ClientHello this context would send."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=server_hostname)
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


class SlowCrowd:
    def __init__(
        self,
        host: str,
        port: int,
        context: ssl.SSLContext,
        phase: str,
        count: int,
        hostname: str = "localhost",
    ) -> None:
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}; one of {', '.join(PHASES)}")
        self.host, self.port, self.context, self.phase, self.count = host, port, context, phase, count
        self.hostname = hostname
        self.socks: list[socket.socket] = []
        self.hello = client_hello(context, hostname)[:6]
        self.opened = 0  # connections opened in all
        self.reaped = 0  # connections found closed by the server (and dropped) in all
        self.held: list[int] = []  # how many were held, sampled about every second by hold()

    def _one(self, timeout: float) -> socket.socket:
        raw = socket.create_connection((self.host, self.port), timeout=timeout)
        if self.phase == "tcp":
            return raw
        if self.phase == "client-hello":
            raw.sendall(self.hello)
            return raw
        tls = self.context.wrap_socket(raw, server_hostname=self.hostname)
        if self.phase == "partial-headers":
            tls.sendall(_HEAD + b"X-Slow: ")
        elif self.phase == "slow-body":
            tls.sendall(_HEAD + b"Content-Length: 4096\r\n\r\n{")
        return tls

    def open(self, timeout: float = 30.0) -> int:
        """Open the connections (each stalled in the phase); how many are open when done."""
        deadline = time.monotonic() + timeout
        while len(self.socks) < self.count and time.monotonic() < deadline:
            try:
                self.socks.append(self._one(max(0.1, min(5.0, deadline - time.monotonic()))))
                self.opened += 1
            except OSError:
                time.sleep(0.01)  # refused or timed out (a server that stalls): try again until the deadline
        return len(self.socks)

    def trickle(self) -> None:
        """One more byte on each slow connection (a slowloris keeps its connections just alive)."""
        if self.phase not in ("partial-headers", "slow-body"):
            return
        for sock in self.socks:
            with contextlib.suppress(OSError, ValueError):
                sock.setblocking(False)
                sock.send(b"a" if self.phase == "partial-headers" else b" ")

    def closed_by_server(self) -> int:
        """How many of the connections the server has closed (EOF or reset seen)."""
        return sum(1 for sock in self.socks if self._closed(sock))

    @staticmethod
    def _closed(sock: socket.socket) -> bool:
        try:
            sock.setblocking(False)
            return sock.recv(65536) == b""  # (no select(): descriptors above 1024 are common here)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
            return False  # nothing to read (or a TLS record without data, a session ticket): open
        except (OSError, ValueError):
            return True

    def reap(self) -> int:
        """Drop the connections the server has closed; how many."""
        keep = []
        for sock in self.socks:
            if self._closed(sock):
                with contextlib.suppress(OSError):
                    sock.close()
            else:
                keep.append(sock)
        gone = len(self.socks) - len(keep)
        self.socks = keep
        self.reaped += gone
        return gone

    def hold(self, stop: threading.Event) -> None:
        """Until `stop`: keep `count` connections stalled (reopening those the server closes, a few
        at a time), trickle a byte every second on slow ones, sample how many are held."""
        next_tick = time.monotonic()
        while not stop.is_set():
            if len(self.socks) < self.count:
                with contextlib.suppress(OSError):
                    self.socks.append(self._one(2.0))
                    self.opened += 1
                    continue
            now = time.monotonic()
            if now >= next_tick:
                next_tick = now + 1.0
                self.trickle()
                self.reap()
                self.held.append(len(self.socks))
            stop.wait(0.05)

    def close(self) -> None:
        for sock in self.socks:
            with contextlib.suppress(OSError):
                sock.close()
        self.socks.clear()


@dataclass
class Latencies:
    seconds: list[float]  # of the requests answered correctly
    failures: list[str]  # what went wrong with the others

    def percentile(self, p: float) -> float:
        if not self.seconds:
            return float("inf")
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def measure(
    host: str,
    port: int,
    context: ssl.SSLContext,
    body: bytes,
    check: Callable[[int, bytes], bool],
    count: int,
    *,
    new_connections: bool,
    timeout: float = 5.0,
    budget: float = 30.0,
    between: Callable[[], None] | None = None,
    path: str = "/v1/admit",
) -> Latencies:
    """`count` POSTs of `body` to `path` (/v1/admit by default), one after the other, each on a new
    connection (TLS handshake included) or all on one kept-alive connection; the latency of each answer
    that passes `check(status, body)`. Stops after `budget` seconds; `between()` is called between
    requests."""
    result = Latencies([], [])
    conn: http.client.HTTPSConnection | None = None
    stop = time.monotonic() + budget
    headers = {"Content-Type": "application/json"}
    for _ in range(count):
        if time.monotonic() > stop:
            result.failures.append(f"not sent: the {budget} s budget ran out")
            break
        if between is not None:
            between()
        start = time.perf_counter()
        try:
            if conn is None:
                conn = http.client.HTTPSConnection(host, port, context=context, timeout=timeout)
            conn.request("POST", path, body, headers)
            resp = conn.getresponse()
            data = resp.read()
            elapsed = time.perf_counter() - start
            if check(resp.status, data):
                result.seconds.append(elapsed)
            else:
                result.failures.append(f"unexpected answer {resp.status}: {data[:120]!r}")
        except (OSError, http.client.HTTPException) as err:
            result.failures.append(f"{type(err).__name__}: {err} after {time.perf_counter() - start:.1f} s")
            if conn is not None:
                conn.close()
            conn = None
            continue
        if new_connections:
            conn.close()
            conn = None
    if conn is not None:
        conn.close()
    return result
