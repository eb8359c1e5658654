"""The webhook's Gunicorn worker: one event loop per process, the application only sees complete requests.

A Gunicorn worker class written on Gunicorn's documented worker base (`gunicorn.workers.base.Worker`:
signals, heartbeat, the app) rather than on gthread's internals. Every socket is non-blocking and
watched by one selector:

    accept -> TLS handshake -> read a request (HTTP/1.1 framing, webhook/http1.py) -> the app -> write
              <= handshake_timeout  <= request_timeout from its first byte         <= write_timeout
    between requests: idle for at most keepalive seconds (a new connection: request_timeout)

Only a complete request reaches the application, which runs on the loop's thread (requests of one
worker share one GIL anyway: no thread hand-offs, ~130 us of CPU saved per review). A client that
connects and stalls - in the TCP handshake, half-way through its ClientHello, after the TLS handshake,
in its headers or its body - costs a file descriptor and a deadline, never the thread that evaluates
policies: other clients are served meanwhile, and the stalled connection is closed at its deadline.
At `worker_connections` the connection idle the longest (or still in its handshake) is closed to make
room, so idle connections cannot lock the listener either.

A response is written in one piece (head and body in one TLS record); a client that does not read it
holds nothing but its buffer. A worker that has served `max_requests` asks the master for a
replacement (`retire_request`) and keeps serving until the master stops it (once the replacement
accepts): see webhook/server.py.

Stopping without resetting a client (a pod leaving a Service while the API server keeps connections to
it alive). Draining (`DrainFlag`, set by the master for `--drain-seconds` after its SIGTERM): the worker
keeps accepting and answering, every answer says `Connection: close` and is followed by a half-close,
so each client moves to a new connection after its next request. SIGTERM to the worker: it accepts the
connections already waiting in the listener's backlog (closing the last listener would reset them),
closes its listener, finishes what is in progress, answers a request arriving on a kept-alive connection
within 2 s with `Connection: close`, then closes idle connections with a half-close (FIN, never a reset
under unread bytes) and leaves (at the latest at Gunicorn's graceful timeout).

Gunicorn is used for: the master and its supervision (webhook/server.py), the worker base class, TLS
settings (`gunicorn.sock.ssl_context`), and the HTTP request parser, WSGI environ and response
(`gunicorn.http`, fed the complete request). tests/webhook/test_worker_gunicorn.py fails loudly when
any of these change shape; setup.cfg pins the Gunicorn releases tested.
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import itertools
import mmap
import os
import re
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from gunicorn import SERVER, http, util
from gunicorn import sock as gsock
from gunicorn.http import wsgi
from gunicorn.workers import base

from celkeeper.settings import MAX_REVIEW_BYTES
from celkeeper.webhook.balance import DEFER, LoadBoard
from celkeeper.webhook.http1 import Frame, Head, RequestFramer, RequestTooLarge
from celkeeper.webhook.idle import IdleTrim

HANDSHAKE, IDLE, READING, WRITING, CLOSING = "handshake", "idle", "reading", "writing", "closing"
STOP_LINGER = 2.0  # a stopping worker keeps kept-alive connections this long (a request may be on its way)
CLOSE_LINGER = 1.0  # after a last answer, unread input is drained this long before the close
READ_BUDGET = 1024 * 1024  # bytes read from one connection before the others get a turn
_WAKE = object()  # a loop's own wake-up pipe
_SIGNAL = object()  # the worker's signal pipe (Gunicorn's PIPE), watched by the main loop
_NOTICE = object()  # the listener's data while this worker leaves new connections to a sibling
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"

#: A route the worker answers itself, without Gunicorn's parser, WSGI or the framework: `(body, length)`
#: of a POST (length: its declared Content-Length, the body being dropped when over the limit) to
#: `(status line, JSON payload)`. The application offers them as `app.extensions["celkeeper"]["routes"]`
#: (path -> Route); every other request goes through Gunicorn and the WSGI application.
Route = Callable[[bytes, int], tuple[str, bytes]]
#: the header fields a routed request may carry (what the API server sends, and common clients): none is
#: one Gunicorn's header policy acts on (forwarding, schemes, Expect, underscores); a request carrying any
#: other goes through Gunicorn's parser, so that it is refused or read exactly as Gunicorn does
_PLAIN_FIELDS = frozenset(
    (b"host", b"user-agent", b"accept", b"accept-encoding", b"content-type", b"content-length", b"connection")
)
_TARGET = re.compile(rb"/[!-~]*\Z")  # an origin-form request target, printable ASCII


class DrainFlag:
    """One byte shared by the master and the workers it forks: set while the server drains."""

    def __init__(self) -> None:
        self._mem = mmap.mmap(-1, 1)

    def set(self) -> None:
        self._mem[0] = 1

    def is_set(self) -> bool:
        return self._mem[0] == 1


class _Conn:
    __slots__ = (
        "client",
        "close_after",
        "deadline",
        "events",
        "framer",
        "out",
        "pending",
        "queued",
        "served",
        "server",
        "state",
        "tls",
    )

    def __init__(
        self, tls: ssl.SSLSocket | socket.socket, client: Any, server: Any, framer: RequestFramer
    ) -> None:
        self.tls = tls  # the TLS socket (or the plain one without TLS): read, written and watched
        self.client = client
        self.server = server
        self.framer = framer
        self.state = HANDSHAKE
        self.deadline = 0.0
        self.queued = 0.0  # the earliest of this connection's entries in the heap (0: none)
        self.events = 0  # what the selector watches for (0: not registered)
        self.out = memoryview(b"")  # what is left to write
        self.pending = b""  # bytes read past the request being answered (pipelining)
        self.close_after = False
        self.served = 0


class _Collector:
    """What Gunicorn's Response writes to: the response, gathered to be written in one piece."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.parts.append(bytes(data))

    def gettimeout(self) -> float:
        """Gunicorn's util.write_error writes with write_nonblock, which asks the socket's timeout: 0.0,
        a socket that does not block, is written at once (sendall)."""
        return 0.0

    def data(self) -> bytes:
        return b"".join(self.parts)


class EventWorker(base.Worker):
    """The worker process: `threads` event loops (`_Loop`), the first on the process's main thread
    (where Python delivers signals), each with connections of its own. The loops share the listeners,
    the application and the process's state; the evaluation's Go part releases the GIL, so loops on
    two threads evaluate on two cores at once."""

    # set per server by webhook/server.py (worker_class_for)
    handshake_timeout = 5.0
    request_timeout = 10.0
    write_timeout = 10.0
    max_head = 64 * 1024
    max_body = MAX_REVIEW_BYTES
    drain_limit = 64 * 1024 * 1024
    threads = 1  # event loops of this worker, each on a thread of its own
    board: LoadBoard | None = None  # shared with the sibling workers (webhook/balance.py)
    drain: DrainFlag | None = None  # set by the master while the server drains (webhook/server.py)
    slots: tuple[int, ...] = ()  # its slots on the board, one per loop (set by the master before the fork)

    def request_replacement(self) -> bool:
        """Ask the master for a worker to replace this one (it stops this one once the replacement
        accepts); False when there is no one to ask (then the worker leaves by itself)."""
        return False

    def init_process(self) -> None:
        count = max(1, self.threads)
        slots = [*self.slots[:count], *[-1] * (count - len(self.slots))]
        # each loop holds its share of worker_connections (at least one)
        room = max(1, self.cfg.worker_connections // count)
        self.loops = [_Loop(self, index, slot, room) for index, slot in enumerate(slots)]
        self._lock = threading.Lock()  # request counting, and the loops' stop (_listener_done)
        self._unlistened = 0  # loops that have stopped watching the listeners (stopping)
        self.retiring = False
        self.abandoned = False  # the master is gone: every loop leaves at once
        self.routes: Mapping[bytes, Route] = {}
        super().init_process()

    def run(self) -> None:
        self.routes = {} if self.cfg.accesslog else routes_of(self.wsgi)
        main, *others = self.loops
        main.selector.register(self.PIPE[0], selectors.EVENT_READ, _SIGNAL)
        threads = [
            threading.Thread(target=loop.run, name=f"event-loop-{loop.index}", daemon=True) for loop in others
        ]
        for thread in threads:
            thread.start()
        # between bursts of reviews the Go heap's free memory goes back to the system (webhook/idle.py);
        # imported here, in the worker: the master imports nothing of the native library
        from celkeeper.native.ffi import trim

        idle = IdleTrim(lambda: self.nr, trim)
        idle.start()
        try:
            main.run()
        finally:
            idle.stop()
            self.alive = False
            self.wake()
            for thread in threads:
                thread.join()
            if self.board is not None:
                for loop in self.loops:
                    self.board.release(loop.slot)
            for listener in self.sockets:
                listener.close()

    def wake(self) -> None:
        """Make every loop look at the process's state now (a signal arrived, the worker stops)."""
        for loop in self.loops:
            loop.wake()

    def draining(self) -> bool:
        """Answers close their connection: the server is stopping, or draining before it stops."""
        return not self.alive or (self.drain is not None and self.drain.is_set())

    def listener_done(self, loop: _Loop) -> None:
        """A stopping loop no longer watches the listeners: the last one closes them (after taking what
        waits in the backlog once more, see `_Loop.begin_stop`), so that later connections are refused
        at once rather than left waiting in a backlog nobody takes."""
        with self._lock:
            self._unlistened += 1
            last = self._unlistened == len(self.loops)
        if last:
            loop.take_backlog()
            for listener in self.sockets:
                listener.close()

    def count_request(self) -> None:
        with self._lock:
            self.nr += 1
            if self.nr < self.max_requests or self.retiring:
                return
            self.retiring = True
        try:
            asked = self.request_replacement()
        except Exception:  # cannot ask: leave the old way
            self.log.exception("could not ask for a replacement")
            asked = False
        if asked:
            self.log.info("worker %s served %d requests: replacement requested", self.pid, self.nr)
        else:
            self.log.info("Autorestarting worker after current request.")
            self.alive = False
            self.wake()


class _Loop:
    """One event loop of a worker: a selector and the connections it accepted (see the module doc).
    Everything here runs on the loop's own thread."""

    def __init__(self, worker: EventWorker, index: int, slot: int, room: int) -> None:
        self.worker = worker
        self.index = index
        self.slot = slot  # on the board (-1: none)
        self.room = room  # connections this loop holds at most
        self.cfg = worker.cfg
        self.log = worker.log
        self.selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.selector.register(self._wake_r, selectors.EVENT_READ, _WAKE)
        self.conns: dict[_Conn, None] = {}  # every open connection
        self.idle: dict[_Conn, None] = {}  # connections without a request in progress, oldest first
        # (when, tie, conn): at most one entry per connection, the earliest its deadline may be; a
        # deadline moved later is found when its entry comes up, and queued again (no entry per request)
        self.heap: list[tuple[float, int, _Conn]] = []
        self.tie = itertools.count()
        self.listening: object = False  # False, or what the listener is registered with (None: accept)
        self.defer_until = 0.0  # a new connection was noticed: it goes to a sibling unless still here then
        self.again: list[_Conn] = []  # connections to read again without waiting (TLS holds bytes)
        self.stop_at = 0.0
        self._date_at = 0
        self._date_text = ""

    def wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"1")

    # -- the loop -----------------------------------------------------------------------------------
    def run(self) -> None:
        worker = self.worker
        main = self.index == 0
        next_beat = 0.0
        try:
            while not worker.abandoned:
                now = time.monotonic()
                if not worker.alive:
                    if not self.stop_at:
                        self.begin_stop(now)
                    if not self.conns or now >= self.stop_at:
                        break
                if main and now >= next_beat:
                    worker.notify()
                    next_beat = now + min(1.0, worker.timeout / 4 if worker.timeout else 1.0)
                    if worker.ppid != os.getppid():
                        self.log.info("Parent changed, shutting down: %s", worker)
                        worker.abandoned = True
                        worker.wake()
                        break
                self._listen(now)
                timeout = min(1.0, max(0.0, next_beat - now)) if main else 1.0
                if self.again:
                    timeout = 0.0
                elif self.heap:
                    timeout = min(timeout, max(0.0, self.heap[0][0] - now))
                if self.defer_until:
                    timeout = min(timeout, max(0.0, self.defer_until - now))
                try:
                    events = self.selector.select(timeout)
                except OSError as err:
                    if err.errno != errno.EINTR:
                        raise
                    events = []
                again, self.again = self.again, []
                for conn in again:
                    if conn in self.conns and conn.state in (IDLE, READING):
                        self._guarded(conn, self._resume, conn)
                for key, mask in events:
                    if key.data is _WAKE:
                        with contextlib.suppress(OSError):
                            os.read(self._wake_r, 64)
                    elif key.data is _SIGNAL:  # (the main loop) a signal: the others look too
                        with contextlib.suppress(OSError):
                            os.read(worker.PIPE[0], 64)
                        worker.wake()
                    elif key.data is _NOTICE:
                        self.defer_until = time.monotonic() + DEFER
                        self._set_listening(False)
                    elif isinstance(key.data, _Conn):
                        self._guarded(key.data, self._ready, key.data, mask)
                    else:
                        self._guarded_accept(key.fileobj)
                        if worker.board is not None:
                            worker.board.publish(self.slot, len(self.conns))
                self._expire(time.monotonic())
        finally:
            if worker.board is not None:
                worker.board.publish(self.slot, None)
            if not self.stop_at:  # left without stopping (the master is gone, or a bug)
                self._set_listening(False)
                worker.listener_done(self)
            for conn in list(self.conns):
                self._close(conn)
            self.selector.close()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _guarded(self, conn: _Conn | None, step: Any, *args: Any) -> None:
        """One step of the loop; a bug there costs the connection, never the worker."""
        try:
            step(*args)
        except Exception:
            self.log.exception("internal error on a connection from %s", conn.client if conn else "(accept)")
            if conn is not None and conn in self.conns:
                self._close(conn)

    def take_backlog(self) -> None:
        """Accept the connections the kernel completed but no loop accepted yet (they would be reset
        with the last listener): they are answered like the others, with `Connection: close`."""
        for listener in self.worker.sockets:
            with contextlib.suppress(OSError):
                listener.setblocking(False)
            for _ in range(self.cfg.backlog):
                if not self._guarded_accept(listener):
                    break

    def begin_stop(self, now: float) -> None:
        self.take_backlog()
        self._set_listening(False)
        self.stop_at = now + self.cfg.graceful_timeout
        self.worker.listener_done(self)
        for conn in list(self.idle):
            if conn.state == IDLE:
                self._deadline(conn, min(conn.deadline, now + STOP_LINGER))

    def _listen(self, now: float) -> None:
        """Watch the listener to accept, to notice (a sibling has fewer connections), or not at all."""
        room = len(self.conns) < self.room or bool(self.idle)
        board = self.worker.board
        if not self.worker.alive or not room:
            if board is not None:
                board.publish(self.slot, None)
            self._set_listening(False)
            return
        if board is None or self.slot < 0:
            self._set_listening(None)
            return
        board.publish(self.slot, len(self.conns))
        least = board.least_other(self.slot)
        if least is None or len(self.conns) <= least:
            self.defer_until = 0.0
            self._set_listening(None)
        elif not self.defer_until:
            self._set_listening(_NOTICE)
        elif now >= self.defer_until:  # still waiting after DEFER: the siblings are busy; take it
            self.defer_until = 0.0
            for listener in self.worker.sockets:
                self._guarded_accept(listener)
            board.publish(self.slot, len(self.conns))
            self._set_listening(_NOTICE)
        else:
            self._set_listening(False)

    def _set_listening(self, how: object) -> None:
        if how is self.listening:
            return
        for listener in self.worker.sockets:
            if self.listening is not False:
                self.selector.unregister(listener)
            if how is not False:
                listener.setblocking(False)
                self.selector.register(listener, selectors.EVENT_READ, how)
        self.listening = how

    # -- connections ----------------------------------------------------------------------------------
    def _guarded_accept(self, listener: Any) -> bool:
        """Accept one connection (False: none was waiting, or accepting failed)."""
        try:
            return self._accept(listener)
        except Exception:
            self.log.exception("internal error on a connection from (accept)")
            return False

    def _accept(self, listener: Any) -> bool:
        try:
            raw, client = listener.accept()
        except OSError as err:
            if err.errno in (
                errno.EAGAIN,
                errno.EWOULDBLOCK,
                errno.ECONNABORTED,
                errno.EMFILE,
                errno.ENFILE,
                errno.EBADF,  # a sibling loop closed the listener (stopping)
            ):
                return False
            raise
        if len(self.conns) >= self.room and self.idle:
            self._close(next(iter(self.idle)))  # full: the one idle the longest makes room
        raw.setblocking(False)
        worker = self.worker
        framer = RequestFramer(worker.max_head, worker.max_body, worker.drain_limit)
        try:
            if self.cfg.is_ssl:
                tls: Any = gsock.ssl_context(self.cfg).wrap_socket(
                    raw, server_side=True, do_handshake_on_connect=False, suppress_ragged_eofs=True
                )
            else:
                tls = raw
        except (OSError, ValueError) as err:
            self.log.debug("cannot set up a connection from %s: %s", client, err)
            util.close(raw)
            return True
        conn = _Conn(tls, client, listener.getsockname(), framer)
        self.conns[conn] = None
        self.idle[conn] = None
        now = time.monotonic()
        self._deadline(conn, now + worker.handshake_timeout)
        if self.cfg.is_ssl:
            self._handshake(conn)
        else:
            self._to_idle(conn, now + worker.request_timeout)
        return True

    def _ready(self, conn: _Conn, mask: int) -> None:
        if conn not in self.conns:  # closed by an earlier event of the same round
            return
        if conn.state == HANDSHAKE:
            self._handshake(conn)
        elif conn.state == WRITING:
            self._write(conn)
        elif conn.state == CLOSING:
            self._linger(conn)
        else:
            self._resume(conn)  # pipelined bytes already read come before what the socket holds

    def _watch(self, conn: _Conn, events: int) -> None:
        if events == conn.events:
            return
        if not events:
            self.selector.unregister(conn.tls)
        elif not conn.events:
            self.selector.register(conn.tls, events, conn)
        else:
            self.selector.modify(conn.tls, events, conn)
        conn.events = events

    def _deadline(self, conn: _Conn, when: float) -> None:
        conn.deadline = when
        if not conn.queued or when < conn.queued:
            conn.queued = when
            heapq.heappush(self.heap, (when, next(self.tie), conn))

    def _expire(self, now: float) -> None:
        heap = self.heap
        while heap and heap[0][0] <= now:
            when, _, conn = heapq.heappop(heap)
            if conn not in self.conns or when != conn.queued:
                continue  # closed, or a later entry of the same connection stands for it
            if conn.deadline > now:  # moved later since: queue it again at its deadline
                conn.queued = conn.deadline
                heapq.heappush(heap, (conn.deadline, next(self.tie), conn))
                continue
            conn.queued = 0  # this entry is used up
            if conn.state == IDLE and conn.served:
                self._start_close(conn)  # kept alive, nothing sent since: FIN, then read what comes
                continue
            self.log.debug("closing a connection from %s: no progress (%s)", conn.client, conn.state)
            self._close(conn)

    def _close(self, conn: _Conn) -> None:
        self._watch(conn, 0)
        self.conns.pop(conn, None)
        self.idle.pop(conn, None)
        util.close(conn.tls)

    def _handshake(self, conn: _Conn) -> None:
        try:
            conn.tls.do_handshake()  # type: ignore[union-attr]
        except ssl.SSLWantReadError:
            self._watch(conn, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._watch(conn, selectors.EVENT_WRITE)
            return
        except (OSError, ValueError) as err:  # ssl.SSLError is an OSError: not TLS, refused, reset
            self.log.debug("TLS handshake with %s failed: %s", conn.client, err)
            self._close(conn)
            return
        self._to_idle(conn, time.monotonic() + self.worker.request_timeout)
        self._read(conn)  # the request may have come with the end of the handshake

    def _to_idle(self, conn: _Conn, deadline: float) -> None:
        conn.state = IDLE
        self.idle[conn] = None
        self._deadline(conn, deadline)
        self._watch(conn, selectors.EVENT_READ)

    def _read(self, conn: _Conn) -> None:
        frame: Frame | None = None
        budget = READ_BUDGET
        while frame is None:
            if budget <= 0:  # a fast sender does not hold the loop: the rest next round
                self.again.append(conn)
                return
            try:
                data = conn.tls.recv(262144)
            except (ssl.SSLWantReadError, BlockingIOError):
                self._watch(conn, selectors.EVENT_READ)
                return
            except ssl.SSLWantWriteError:
                self._watch(conn, selectors.EVENT_WRITE)
                return
            except (OSError, ValueError) as err:
                self.log.debug("reading from %s failed: %s", conn.client, err)
                self._close(conn)
                return
            if not data:
                self._close(conn)
                return
            budget -= len(data)
            frame = self._feed(conn, data)
            if frame is None and conn.state != READING:  # answered with an error, or closed
                return
        self._answer(conn, frame)

    def _feed(self, conn: _Conn, data: bytes) -> Frame | None:
        if conn.state == IDLE:
            conn.state = READING
            self.idle.pop(conn, None)
            self._deadline(conn, time.monotonic() + self.worker.request_timeout)
        try:
            frame = conn.framer.feed(data)
        except RequestTooLarge as err:
            self._error(conn, 431, "Request Header Fields Too Large", str(err))
            return None
        if frame is None and conn.framer.continue_wanted:
            conn.framer.continue_wanted = False
            with contextlib.suppress(OSError):
                conn.tls.send(_CONTINUE)  # small: fits the empty send buffer of a waiting client
        return frame

    def _answer(self, conn: _Conn, frame: Frame) -> None:
        if frame.error:
            self._error(conn, 400, "Bad Request", frame.error)
            return
        route = self._route(frame.head)
        if route is not None:
            payload, keep = self._serve_route(conn, frame, route)
        else:
            payload, keep = self._serve(conn, frame)
        conn.pending = frame.rest
        conn.close_after = not keep or frame.close
        self._send(conn, payload)

    def _error(self, conn: _Conn, status: int, reason: str, message: str) -> None:
        out = _Collector()
        self.log.warning("Invalid request from ip=%s: %s", (conn.client or ("",))[0], message)
        util.write_error(out, status, reason, message)
        conn.close_after = True
        conn.pending = b""
        self._send(conn, out.data())

    def _send(self, conn: _Conn, payload: bytes) -> None:
        conn.state = WRITING
        conn.out = memoryview(payload)
        self._deadline(conn, time.monotonic() + self.worker.write_timeout)
        self._write(conn)

    def _write(self, conn: _Conn) -> None:
        while conn.out:
            try:
                sent = conn.tls.send(conn.out)
            except (ssl.SSLWantWriteError, BlockingIOError):
                self._watch(conn, selectors.EVENT_WRITE)
                return
            except ssl.SSLWantReadError:
                self._watch(conn, selectors.EVENT_READ)
                return
            except (OSError, ValueError) as err:
                self.log.debug("writing to %s failed: %s", conn.client, err)
                self._close(conn)
                return
            conn.out = conn.out[sent:]
        conn.served += 1
        if conn.close_after:  # (decided with the answer: one that did not say close keeps the connection)
            self._start_close(conn)
            return
        now = time.monotonic()
        self._to_idle(conn, now + (STOP_LINGER if self.stop_at else self.cfg.keepalive))
        # the next request may be here already (pipelined, or in TLS's buffer where the selector
        # cannot see it): look next round, not now - no recursion, and the others get their turn
        self.again.append(conn)

    def _resume(self, conn: _Conn) -> None:
        """A connection back from answering: the pipelined bytes first, then what the socket holds."""
        if conn.pending:
            pending, conn.pending = conn.pending, b""
            frame = self._feed(conn, pending)
            if frame is not None:
                self._answer(conn, frame)
                return
            if conn not in self.conns or conn.state not in (IDLE, READING):
                return
        self._read(conn)

    def _start_close(self, conn: _Conn) -> None:
        """Stop writing, then drain what the client still sends for a moment, so that closing with
        unread input does not reset the connection under the answer."""
        conn.state = CLOSING
        self.idle.pop(conn, None)
        try:
            conn.tls.shutdown(socket.SHUT_WR)  # (an SSLSocket drops TLS: what follows is raw)
        except OSError:
            self._close(conn)
            return
        self._deadline(conn, time.monotonic() + CLOSE_LINGER)
        self._watch(conn, selectors.EVENT_READ)

    def _linger(self, conn: _Conn) -> None:
        try:
            data = conn.tls.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close(conn)

    # -- the application ------------------------------------------------------------------------------
    def _route(self, head: Head | None) -> Route | None:
        """The worker's own route for this request, when it has one and the request is plain (see
        `_PLAIN_FIELDS`) and within Gunicorn's limits."""
        routes = self.worker.routes
        if head is None or not routes or head.method != b"POST":
            return None
        route = routes.get(head.target.partition(b"?")[0])
        if route is None or not _TARGET.match(head.target):
            return None
        cfg = self.cfg
        if len(head.target) + 15 > cfg.limit_request_line or len(head.headers) > cfg.limit_request_fields:
            return None
        for name, value in head.headers:
            if name.lower() not in _PLAIN_FIELDS or len(name) + len(value) + 2 > cfg.limit_request_field_size:
                return None
        return route

    def _serve_route(self, conn: _Conn, frame: Frame, route: Route) -> tuple[bytes, bool]:
        """Answer a request on one of the worker's routes: (response, keep-alive), as Gunicorn would
        frame it (its status line, Server, Date and Connection headers)."""
        head = frame.head
        assert head is not None
        worker = self.worker
        worker.count_request()
        close = frame.close or worker.draining() or not self.cfg.keepalive
        if not close:  # the request's own wish: the first Connection field, as Gunicorn reads it
            wish = next((v.strip(b" \t").lower() for k, v in head.headers if k.lower() == b"connection"), b"")
            close = wish == b"close" or (wish != b"keep-alive" and head.minor == 0)
        try:
            status, payload = route(frame.data[frame.body_at :], head.length)
        except Exception as exc:
            out = _Collector()
            worker.handle_error(None, out, conn.client, exc)
            return out.data(), False
        date = self._date()
        answer = (
            f"HTTP/1.{head.minor} {status}\r\nServer: {SERVER}\r\nDate: {date}\r\n"
            f"Connection: {'close' if close else 'keep-alive'}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n"
        )
        return answer.encode("latin-1") + payload, not close

    def _date(self) -> str:
        """The Date header's value (computed once a second)."""
        now = int(time.time())
        if now != self._date_at:
            self._date_at, self._date_text = now, util.http_date(now)
        return self._date_text

    def _serve(self, conn: _Conn, frame: Frame) -> tuple[bytes, bool]:
        """Run one complete request through Gunicorn's parser and the WSGI app: (response, keep-alive)."""
        out = _Collector()
        req = None
        environ: dict[str, Any] = {}
        resp = None
        try:
            parser = http.get_parser(self.cfg, iter([frame.data]), conn.client)
            req = next(parser)
            self.cfg.pre_request(self.worker, req)
            started = datetime.now()
            resp, environ = wsgi.create(req, out, conn.client, conn.server, self.cfg)
            environ["wsgi.multithread"] = len(self.worker.loops) > 1
            self.worker.count_request()
            if self.worker.draining() or frame.close or not self.cfg.keepalive:
                resp.force_close()
            respiter = self.worker.wsgi(environ, resp.start_response)
            try:
                for item in respiter:
                    resp.write(item)
                resp.close()
            finally:
                self.log.access(resp, req, environ, datetime.now() - started)
                if hasattr(respiter, "close"):
                    respiter.close()
            return out.data(), not resp.should_close()
        except (StopIteration, http.errors.NoMoreData):
            return out.data(), False
        except Exception as exc:
            out.parts.clear()  # nothing was sent yet: the error replaces whatever was written
            self.worker.handle_error(req, out, conn.client, exc)
            return out.data(), False
        finally:
            if req is not None:
                try:
                    self.cfg.post_request(self.worker, req, environ, resp)
                except Exception:
                    self.log.exception("Exception in post_request hook")


def routes_of(app: Any) -> Mapping[bytes, Route]:
    """The routes a WSGI application offers the worker (see `Route`): none unless it says."""
    extensions = getattr(app, "extensions", None)
    found = extensions.get("celkeeper", {}).get("routes") if isinstance(extensions, dict) else None
    return found if isinstance(found, dict) else {}
