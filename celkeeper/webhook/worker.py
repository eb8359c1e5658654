"""The webhook's Gunicorn worker: gthread, with new connections spread over the workers.

All workers wait on the one listening socket and the kernel wakes them in the same order, so with
plain gthread one worker accepts nearly every connection, even while it is busy and a sibling is
idle; a keep-alive connection then stays with it for good (measured with bench/webhook.py: all 8 of
wrk's connections on one of two workers, half the server idle). Here a worker whose threads are all
busy with requests, and which already holds a connection, stops listening until a thread is free,
so an idle sibling accepts instead.

With one thread per worker (`--threads 1`, the default: a worker's requests share one GIL anyway),
requests are handled on the worker's main thread, in its event loop, rather than handed to a
one-thread pool and back: gthread's two thread hand-offs per request (futures, a wake-up pipe, GIL
transfers) cost ~130 us of CPU per review on bench/webhook.py, a third of the serving stack. A
connection is handled once its first bytes have arrived (a new one waits in the poller, as
gthread's deferred connections do, so a silent client holds nothing); a worker busy with a request,
or whose newest connection has not sent its first bytes yet (for AWAIT_GRACE at most), does not
accept, so an idle sibling does. A client that stalls in the middle of a request holds the worker
as it would hold gthread's only thread, except that the worker then stops reporting to the master,
which replaces it after --timeout (gthread's worker would stay stuck).

Requests are otherwise handled exactly as by gthread, except that a response's head and body leave
in one write: Gunicorn writes the head, then the body, each a TLS record and a send() of its own
(on loopback the second send costs as much as the first); here the head waits for the body
(`_Coalescing`).
"""

from __future__ import annotations

import time
from concurrent import futures
from typing import Any

from gunicorn.workers import gthread
from gunicorn.workers.gthread import ThreadWorker

# gthread's deferral of connections that have sent nothing yet (Gunicorn >= 24): inline handling
# relies on it (without it, requests go through the thread pool as in plain gthread)
_DEFER: Any = getattr(gthread, "_DEFER", None)
#: a new connection that has sent nothing for this long no longer keeps its worker from accepting
AWAIT_GRACE = 0.05


class BalancedThreadWorker(ThreadWorker):
    def init_process(self) -> None:
        self._in_flight = 0  # requests handed to the thread pool and not finished (main thread only)
        self._inline = self.cfg.threads == 1 and _DEFER is not None and hasattr(self, "pending_conns")
        self._handling = False  # inline: a request is being handled (main thread only)
        super().init_process()

    def enqueue_req(self, conn: Any) -> None:
        self._in_flight += 1
        if self._inline:
            self._handle_inline(conn)
            return
        super().enqueue_req(conn)
        self._reconsider()

    def _handle_inline(self, conn: Any) -> None:
        """gthread's handle() and finish_request() on the main thread (see the module docstring)."""
        if self._handling:  # finish_request found the next request already read: after this one
            self.method_queue.defer(self._handle_inline, conn)
            return
        done: futures.Future[Any] = futures.Future()
        self._handling = True
        try:
            if not conn.initialized and not conn.data_ready:
                done.set_result(_DEFER)  # nothing to read yet: wait in the poller, not here
            else:
                try:
                    done.set_result(self.handle(conn))
                except Exception as exc:  # handle() answers every error itself; belt and braces
                    done.set_exception(exc)
            self.finish_request(conn, done)
        finally:
            self._handling = False

    def finish_request(self, conn: Any, fs: Any) -> None:
        self._in_flight -= 1
        super().finish_request(conn, fs)
        self._reconsider()

    def set_accept_enabled(self, enabled: bool) -> None:
        busy = self._in_flight + (self._awaited() if self._inline else 0)
        super().set_accept_enabled(enabled and (self.nr_conns == 0 or busy < self.cfg.threads))

    def _awaited(self) -> int:
        """New connections whose first bytes should arrive any moment (accepted less than
        AWAIT_GRACE ago, waiting in the poller): as busy as a request in progress, so that a sibling
        accepts the next connection of a burst (as a pool thread waiting for them would make it).
        None with a single worker: there is no sibling to accept instead."""
        if self.cfg.workers < 2 or not self.pending_conns:
            return 0
        recent = time.monotonic() - AWAIT_GRACE + self.cfg.keepalive  # conn.timeout of the youngest
        n = 0
        for conn in reversed(self.pending_conns):  # oldest first, so newest last
            if conn.timeout <= recent:
                break
            n += 1
        return n

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        if self._inline and self.pending_conns and not self._accepting and self.cfg.workers > 1:
            # accepting again once the youngest waiting connection is no longer new (see _awaited)
            youngest = self.pending_conns[-1].timeout - self.cfg.keepalive
            timeout = max(0.0, min(timeout, youngest + AWAIT_GRACE - time.monotonic() + 0.001))
        super().wait_for_and_dispatch_events(timeout)

    def handle_request(self, req: Any, conn: Any) -> Any:
        sock = conn.sock
        coalescing = _Coalescing(sock)
        conn.sock = coalescing  # what Gunicorn's Response writes to, for this request only
        try:
            return super().handle_request(req, conn)
        finally:
            conn.sock = sock
            coalescing.flush()

    def _reconsider(self) -> None:
        if self.alive:
            self.set_accept_enabled(self.nr_conns < self.worker_connections)


class _Coalescing:
    """A socket whose first `sendall` (a response's head) is held until the next one (its body) or
    until anything else is done with the socket (`flush`, any other attribute)."""

    __slots__ = ("_held", "_sock")

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self._held: bytes | None = None  # None: nothing written yet; b"": no longer holding

    def sendall(self, data: bytes) -> None:
        held = self._held
        if held is None:
            self._held = bytes(data)
            return
        self._held = b""
        self._sock.sendall(held + data if held else data)

    def flush(self) -> None:
        held, self._held = self._held, b""
        if held:
            self._sock.sendall(held)

    def __getattr__(self, name: str) -> Any:
        self.flush()
        return getattr(self._sock, name)
