"""Gunicorn, started programmatically: the master, its workers and one informer process.

    serve(options, tls, app_factory, informer=..., on_worker_gone=..., worker_ready=...)

`app_factory(heartbeat)` runs in each worker after the fork; `heartbeat()` tells the master the
worker is alive while the app loads (compiling a large policy set can take longer than --timeout).

Process tree of one server:

    master (Gunicorn arbiter)     binds the sockets, forks and supervises the rest, never serves
    ├── informer                  exactly one; re-forked (with back-off) whenever it dies
    ├── worker 1 .. N             event-loop workers (webhook/worker.py); each loads the app
    │                             (create_app) after the fork and serves HTTPS; Gunicorn replaces
    │                             any worker that dies

Rolling replacement: SIGHUP, and a worker that has served --max-requests, replace workers one at a
time. The master starts the replacement first (N+1 workers for a while) and stops the old worker
(SIGTERM: it finishes what it has) only once the replacement accepts connections (it has loaded the
app and its first policies: `<control>/<pid>.up`, plus `worker_ready(pid)`), so that a large policy
set, slow to compile, never leaves no worker accepting. Gunicorn's own SIGHUP starts every new worker
at once and stops the old ones immediately.

Stopping (SIGTERM to the master, as Kubernetes stops a pod): for `drain_seconds` the master only sets
the drain flag (webhook/worker.py, DrainFlag): the workers keep accepting and answering, each answer
with `Connection: close`, so clients holding kept-alive connections (the API server) move to new ones
after their next request, while the Service's endpoints and kube-proxy catch up. Then Gunicorn's
graceful stop: listeners closed, workers SIGTERMed (they take what waits in the backlog, finish what
is in progress, half-close idle connections) and killed after `graceful_timeout`. The drain ends
early when no worker is left; SIGINT/SIGQUIT skip or cut it (a quick stop). At most drain_seconds +
graceful_timeout in all: keep the pod's terminationGracePeriodSeconds above that.

The workers and the informer share nothing but files (snapshots, statuses, metrics, the control
folder's markers).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import queue
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from wsgiref.types import WSGIApplication

from gunicorn.app.base import BaseApplication
from gunicorn.arbiter import Arbiter

from celkeeper.settings import MAX_REVIEW_BYTES
from celkeeper.tls import ServerTLS
from celkeeper.webhook.balance import LoadBoard
from celkeeper.webhook.worker import DrainFlag, EventWorker

#: `app_factory(heartbeat)`: the WSGI application of one worker, made after the fork
AppFactory = Callable[[Callable[[], None]], WSGIApplication]

log = logging.getLogger("celkeeper.server")


@dataclass(frozen=True)
class ServerOptions:
    binds: tuple[str, ...] = ("0.0.0.0:8443",)
    workers: int = 1
    threads: int = 2  # event loops per worker process, each on a thread of its own
    timeout: int = 30  # a worker silent for this long is killed and replaced
    graceful_timeout: int = 10  # on stop/restart, workers finish their requests within this
    drain_seconds: float = 0.0  # on SIGTERM, serve this long first, every answer closing its connection
    keepalive: int = 60  # idle keep-alive connections are closed after this (the API server reuses them)
    handshake_timeout: float = 5.0  # a connection must complete its TLS handshake within this
    request_timeout: float = 10.0  # a request must arrive whole within this of its first byte (and a
    # new connection send its first request within this of its handshake)
    max_connections: int = 1000  # per worker; beyond, the connection idle the longest is closed
    max_body: int = MAX_REVIEW_BYTES  # a larger body is read and dropped (the app answers 413)
    backlog: int = 2048
    max_requests: int = 50_000  # recycle a worker after this many requests, +0-10% jitter (0: never)
    gc_threshold: int = 20_000  # the workers' generation-0 threshold (0: Python's default)
    access_log: bool = False
    log_level: str = "info"
    proc_name: str = "celkeeper"
    # where the master and workers leave markers (rolling replacement); None: Gunicorn's own SIGHUP
    # and --max-requests behaviour (workers replaced without waiting for their successor)
    control_dir: Path | None = None
    worker_tmp_dir: str | None = None  # Gunicorn's heartbeat files (None: /dev/shm if writable, else /tmp)
    # the workers evaluate Kubernetes' admission policies (--enforce-admission-policies); without them a
    # worker loads the variant of the native library that lacks them (celkeeper/native/locate.py)
    admission_policies: bool = False


def worker_class_for(
    options: ServerOptions, board: LoadBoard | None = None, drain: DrainFlag | None = None
) -> type[EventWorker]:
    """The worker class of one server: EventWorker with this server's limits, its load board (new
    connections spread over the workers), its drain flag, and, with a control folder, a worker at
    --max-requests asks for a replacement rather than leaving."""
    attrs: dict[str, Any] = {
        "handshake_timeout": options.handshake_timeout,
        "request_timeout": options.request_timeout,
        "max_body": options.max_body,
        "threads": options.threads,
        "board": board,
        "drain": drain,
    }
    control = options.control_dir
    if control is not None:

        def request_replacement(self: EventWorker) -> bool:
            _touch(control / f"{os.getpid()}.retire")
            return True

        attrs["request_replacement"] = request_replacement
    return type("CelkeeperWorker", (EventWorker,), attrs)


def _touch(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)


def _markers(control: Path, suffix: str) -> set[int]:
    try:
        names = os.listdir(control)
    except OSError:
        return set()
    return {int(n[: -len(suffix)]) for n in names if n.endswith(suffix) and n[: -len(suffix)].isdigit()}


class Sidecar:
    """A child process the master keeps running: forked from the master, restarted when it dies.

    A sidecar that dies soon after starting is restarted with a growing delay (1 s doubling to 30 s);
    one that ran for a while is restarted at once.
    """

    MIN_DELAY, MAX_DELAY, STABLE_AFTER = 1.0, 30.0, 30.0

    def __init__(self, name: str, target: Callable[[], int]) -> None:
        self.name = name
        self.target = target
        self.pid = 0
        self.started_at = 0.0
        self.restarts = 0
        self._delay = 0.0
        self._not_before = 0.0
        self.stopping = False

    def ensure(self, arbiter: Arbiter) -> None:
        if self.pid or self.stopping or time.monotonic() < self._not_before:
            return
        if self.started_at:
            self.restarts += 1
        self.spawn(arbiter)

    def spawn(self, arbiter: Arbiter) -> None:
        pid = os.fork()
        if pid:
            self.pid, self.started_at = pid, time.monotonic()
            log.info("started the %s (pid %d)", self.name, pid)
            return
        # the child: undo the master's signal handling, drop its sockets, run the target
        code = 1
        try:
            for sig in [*arbiter.SIGNALS, signal.SIGCHLD]:
                signal.signal(sig, signal.SIG_DFL)
            for listener in arbiter.LISTENERS:
                with contextlib.suppress(OSError):
                    listener.close()
            with contextlib.suppress(Exception):
                from gunicorn import util

                util._setproctitle(f"{self.name} [{arbiter.proc_name}]")
            code = int(self.target())
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            log.exception("the %s failed", self.name)
        finally:
            logging.shutdown()
            os._exit(code)

    def reap(self) -> None:
        """Notice (and reap) the sidecar's exit, if it has exited."""
        if not self.pid:
            return
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:  # already reaped by the arbiter's waitpid(-1)
            pid, status = self.pid, -1
        if not pid:
            return
        self._exited(status)

    def _exited(self, status: int) -> None:
        pid, self.pid = self.pid, 0
        if self.stopping:
            log.info("the %s (pid %d) stopped", self.name, pid)
            with contextlib.suppress(Exception):
                _process_gone(pid)
            return
        if status == -1:
            how = "exited"
        elif os.WIFSIGNALED(status):
            how = f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
        else:
            how = f"exited with status {os.WEXITSTATUS(status)}"
        lived = time.monotonic() - self.started_at
        if lived >= self.STABLE_AFTER:
            self._delay = 0.0
        elif self._delay:
            self._delay = min(self._delay * 2, self.MAX_DELAY)
        elif self.restarts:
            self._delay = self.MIN_DELAY
        self._not_before = time.monotonic() + self._delay
        report = log.warning if status in (0, -1) else log.error
        report(
            "the %s (pid %d) %s after %.1f s; restarting it%s",
            self.name,
            pid,
            how,
            lived,
            f" in {self._delay:.0f} s" if self._delay else "",
        )
        with contextlib.suppress(Exception):
            _process_gone(pid)

    def retire(self) -> None:
        """Do not restart it: the server is stopping (it runs on until terminate or stop). A sidecar
        that exits meanwhile (e.g. a Ctrl-C reached the whole process group) is reported stopped."""
        self.stopping = True

    def terminate(self) -> None:
        """Ask it to stop (SIGTERM) and do not restart it."""
        self.stopping = True
        if self.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)

    def stop(self, timeout: float) -> None:
        self.stopping = True
        if not self.pid:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                pid, _status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                break
            if pid:
                break
            time.sleep(0.05)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
        with contextlib.suppress(Exception):
            _process_gone(self.pid)
        self.pid = 0


def _process_gone(pid: int) -> None:
    """Bookkeeping for a dead process: its live metrics (prometheus_client multiprocess mode)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)


class _Arbiter(Arbiter):
    def __init__(self, app: WebhookServer, sidecars: list[Sidecar]) -> None:
        self.sidecars = sidecars
        self.server_app = app
        self.queue: list[int] = []  # workers to replace, in order
        self.replacing = 0  # the worker being replaced now (0: none)
        self.replacing_since = 0.0
        self.after_age = 0  # its replacement is the youngest worker older than this age
        self.retired: set[int] = set()  # replaced workers told to stop, not yet gone
        self.drained = False
        super().__init__(app)

    @property
    def configured_workers(self) -> int:
        return int(self.cfg.workers)

    def manage_workers(self) -> None:
        for sidecar in self.sidecars:
            sidecar.ensure(self)
        if self.server_app.options.control_dir is not None:
            self._roll()
        super().manage_workers()

    # -- rolling replacement (see the module docstring) ------------------------------------------------
    def handle_hup(self) -> None:
        if self.server_app.options.control_dir is None:
            super().handle_hup()
            return
        self.log.info("Hang up: replacing the %d worker(s) one at a time", len(self.WORKERS))
        self.log.reopen_files()
        for pid, _worker in sorted(self.WORKERS.items(), key=lambda w: w[1].age):
            if pid not in self.retired and pid not in self.queue and pid != self.replacing:
                self.queue.append(pid)

    def _roll(self) -> None:
        control = self.server_app.options.control_dir
        assert control is not None
        for pid in sorted(_markers(control, ".retire")):
            known = pid in self.queue or pid == self.replacing or pid in self.retired
            if pid in self.WORKERS and not known:
                self.log.info("worker %d asks to be replaced", pid)
                self.queue.append(pid)
        self.retired &= set(self.WORKERS)
        self.queue = [pid for pid in self.queue if pid in self.WORKERS]
        if self.replacing and self.replacing not in self.WORKERS:
            self.replacing = 0  # it died meanwhile: Gunicorn replaces it the usual way
        if not self.replacing and self.queue:
            self.replacing = self.queue.pop(0)
            self.replacing_since = time.monotonic()
            self.after_age = self.worker_age
            self.log.info("replacing worker %d: starting its successor", self.replacing)
        successor = self._successor()
        if self.replacing and successor and self._up(control, successor):
            self.log.info("worker %d accepts; stopping worker %d", successor, self.replacing)
            self.retired.add(self.replacing)
            self.kill_worker(self.replacing, signal.SIGTERM)
            self.replacing = 0
        # never fewer than configured serving, plus the successor being started, plus those leaving
        wanted = self.configured_workers + len(self.retired) + (1 if self.replacing else 0)
        arbiter: Any = self  # Gunicorn's num_workers property (untyped)
        if wanted != arbiter.num_workers:
            arbiter.num_workers = wanted

    def _successor(self) -> int:
        newer = [(w.age, pid) for pid, w in self.WORKERS.items() if w.age > self.after_age]
        return max(newer)[1] if newer else 0

    def _up(self, control: Path, pid: int) -> bool:
        if pid not in _markers(control, ".up"):
            return False
        ready = self.server_app.worker_ready
        return ready is None or ready(pid)

    def reap_workers(self) -> None:
        for sidecar in self.sidecars:
            sidecar.reap()
        try:
            super().reap_workers()
        finally:
            for sidecar in self.sidecars:
                sidecar.reap()

    def stop(self, graceful: bool = True) -> None:
        for sidecar in self.sidecars:
            sidecar.retire()
        if graceful and not self.drained:
            self._drain()
        for sidecar in self.sidecars:
            sidecar.terminate()
        super().stop(graceful)

    def _drain(self) -> None:
        """Serve on for drain_seconds, every answer closing its connection (see the module docstring)."""
        self.drained = True
        seconds = self.server_app.options.drain_seconds
        if seconds <= 0 or not self.WORKERS:
            return
        self.log.info("Draining for %.1f s: answers close their connections", seconds)
        self.server_app.drain.set()
        until = time.monotonic() + seconds
        while self.WORKERS and time.monotonic() < until:
            with contextlib.suppress(queue.Empty):
                if self.SIG_QUEUE.get_nowait() in (signal.SIGINT, signal.SIGQUIT):
                    self.log.info("Quick shutdown requested: drain cut short")
                    break
            self.reap_workers()
            time.sleep(0.1)
        for sidecar in self.sidecars:
            sidecar.stop(timeout=5.0)


def _default_tmp_dir() -> str | None:
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


def _safe(hook: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    """Hooks run inside Gunicorn's loops: an exception there must not take the master down.
    (Gunicorn checks a hook's arity: the wrapper keeps the two positional parameters.)"""

    def run(server: Any, worker: Any) -> None:
        try:
            hook(server, worker)
        except Exception:
            log.exception("server hook %s failed", getattr(hook, "__name__", hook))

    return run


class WebhookServer(BaseApplication):
    def __init__(
        self,
        options: ServerOptions,
        tls: ServerTLS,
        app_factory: AppFactory,
        informer: Callable[[], int] | None = None,
        on_worker_gone: Callable[[int], None] | None = None,
        *,
        worker_ready: Callable[[int], bool] | None = None,
    ) -> None:
        self.options = options
        self._worker: Any = None  # in a worker process: its Gunicorn worker object
        self.tls = tls
        self.app_factory = app_factory
        self.sidecars = [Sidecar("informer", informer)] if informer is not None else []
        self.on_worker_gone = on_worker_gone
        self.worker_ready = worker_ready
        # made in the master, shared by fork: connections spread over the loops of every worker
        self.board = LoadBoard() if options.workers * options.threads > 1 else None
        self.drain = DrainFlag()  # likewise
        super().__init__()

    def _worker_gone(self, pid: int) -> None:
        if self.on_worker_gone is not None:
            self.on_worker_gone(pid)
        _process_gone(pid)
        control = self.options.control_dir
        if control is not None:
            for suffix in (".up", ".retire"):
                with contextlib.suppress(OSError):
                    os.unlink(control / f"{pid}{suffix}")

    def load_config(self) -> None:
        o = self.options
        tls = self.tls

        def ssl_context(config: Any, default_ssl_context_factory: Any) -> Any:
            return tls.context()

        def post_fork(server: Any, worker: Any) -> None:  # the worker, right after the fork
            self._worker = worker
            # the native library's variant, chosen before the app loads it (the master imports none of it)
            from celkeeper.native import ffi, locate

            ffi.prefer(locate.FULL if o.admission_policies else locate.GATEKEEPER)
            if o.gc_threshold:
                # fewer collections: a request allocates a few hundred containers, nearly all freed
                # by reference counting; the default (700) collects every other request
                gc.set_threshold(o.gc_threshold, 50, 100)

        def pre_fork(server: Any, worker: Any) -> None:  # master, before forking a worker
            if self.board is not None:
                worker.slots = tuple(self.board.claim() for _ in range(o.threads))

        def post_worker_init(worker: Any) -> None:  # the worker, its app loaded, about to accept
            if o.control_dir is not None:
                _touch(o.control_dir / f"{os.getpid()}.up")

        def child_exit(server: Any, worker: Any) -> None:  # master, after a worker was reaped
            if self.board is not None:
                for slot in getattr(worker, "slots", ()):
                    self.board.release(slot)
            self._worker_gone(worker.pid)

        def worker_exit(server: Any, worker: Any) -> None:  # the worker itself, exiting
            if self.on_worker_gone is not None:
                self.on_worker_gone(worker.pid)

        settings: dict[str, Any] = {
            "bind": list(o.binds),
            "workers": o.workers,
            "worker_class": worker_class_for(o, self.board, self.drain),
            "worker_connections": o.max_connections,
            "timeout": o.timeout,
            "graceful_timeout": o.graceful_timeout,
            "keepalive": o.keepalive,
            "backlog": o.backlog,
            "max_requests": o.max_requests,
            "max_requests_jitter": o.max_requests // 10 if o.max_requests else 0,
            "certfile": tls.cert_file,
            "keyfile": tls.key_file,
            "ssl_context": ssl_context,
            "pre_fork": _safe(pre_fork),
            "post_fork": post_fork,
            "post_worker_init": post_worker_init,
            "child_exit": _safe(child_exit),
            "worker_exit": _safe(worker_exit),
            "accesslog": "-" if o.access_log else None,
            "errorlog": "-",
            "loglevel": o.log_level,
            "proc_name": o.proc_name,
            "preload_app": False,  # nothing of the app exists in the master
            "control_socket_disable": True,  # gunicorn >= 25: no ~/.gunicorn/gunicorn.ctl
            "worker_tmp_dir": o.worker_tmp_dir or _default_tmp_dir(),
        }
        for key, value in settings.items():
            if key in self.cfg.settings:
                self.cfg.set(key, value)

    def load(self) -> WSGIApplication:
        worker = self._worker

        def heartbeat() -> None:
            if worker is not None:
                worker.notify()

        return self.app_factory(heartbeat)

    def run(self) -> None:
        try:
            _Arbiter(self, self.sidecars).run()
        except RuntimeError as err:
            print(f"celkeeper serve: {err}", file=sys.stderr)
            sys.exit(1)


def serve(
    options: ServerOptions,
    tls: ServerTLS,
    app_factory: AppFactory,
    informer: Callable[[], int] | None = None,
    on_worker_gone: Callable[[int], None] | None = None,
    *,
    worker_ready: Callable[[int], bool] | None = None,
) -> None:
    """Run the server until it is stopped (SIGTERM/SIGINT: graceful; SIGQUIT: quick; SIGHUP: replace
    the workers one at a time). Does not return normally: Gunicorn ends the master with SystemExit."""
    WebhookServer(options, tls, app_factory, informer, on_worker_gone, worker_ready=worker_ready).run()


__all__ = ["ServerOptions", "Sidecar", "WebhookServer", "serve", "worker_class_for"]
