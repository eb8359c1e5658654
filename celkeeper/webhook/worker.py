"""The webhook's Gunicorn worker: gthread, with new connections spread over the workers.

All workers wait on the one listening socket and the kernel wakes them in the same order, so with
plain gthread one worker accepts nearly every connection, even while it is busy and a sibling is
idle; a keep-alive connection then stays with it for good (measured with bench/webhook.py: all 8 of
wrk's connections on one of two workers, half the server idle). Here a worker whose threads are all
busy with requests, and which already holds a connection, stops listening until a thread is free,
so an idle sibling accepts instead. Requests are handled exactly as by gthread.
"""

from __future__ import annotations

from typing import Any

from gunicorn.workers.gthread import ThreadWorker


class BalancedThreadWorker(ThreadWorker):
    def init_process(self) -> None:
        self._in_flight = 0  # requests handed to the thread pool and not finished (main thread only)
        super().init_process()

    def enqueue_req(self, conn: Any) -> None:
        self._in_flight += 1
        super().enqueue_req(conn)
        self._reconsider()

    def finish_request(self, conn: Any, fs: Any) -> None:
        self._in_flight -= 1
        super().finish_request(conn, fs)
        self._reconsider()

    def set_accept_enabled(self, enabled: bool) -> None:
        super().set_accept_enabled(enabled and (self.nr_conns == 0 or self._in_flight < self.cfg.threads))

    def _reconsider(self) -> None:
        if self.alive:
            self.set_accept_enabled(self.nr_conns < self.worker_connections)
