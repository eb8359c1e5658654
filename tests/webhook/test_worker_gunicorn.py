"""What celkeeper takes from Gunicorn and gunicorn-h1c, checked against the installed releases: when an
upgrade changes any of it, these fail (loudly, naming what changed) before a server misbehaves.

celkeeper's worker (webhook/worker.py) subclasses Gunicorn's documented worker base and feeds
complete requests to Gunicorn's HTTP parser and WSGI layer; its master (webhook/server.py)
subclasses the Arbiter for rolling replacement. setup.cfg pins the releases tested here.
"""

from __future__ import annotations

import configparser
import inspect
import re
from pathlib import Path
from typing import Any

import gunicorn
import gunicorn_h1c
import pytest
from gunicorn import http, util
from gunicorn import sock as gsock
from gunicorn.arbiter import Arbiter
from gunicorn.config import Config
from gunicorn.http import wsgi
from gunicorn.workers import base

ROOT = Path(__file__).resolve().parents[2]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _pinned(name: str) -> tuple[str, str]:
    """The (lowest, first excluded) releases setup.cfg allows: `name>=A,<B` (a requirement or an extra's)."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    lines = cfg["options"]["install_requires"].strip().splitlines()
    lines += [line for extra in cfg["options.extras_require"].values() for line in extra.strip().splitlines()]
    for line in lines:
        found = re.fullmatch(re.escape(name) + r">=([\d.]+),<([\d.]+)", line.strip())
        if found:
            return found.group(1), found.group(2)
    raise AssertionError(f"no `{name}>=A,<B` in setup.cfg")


@pytest.mark.parametrize(
    ("name", "version"), [("gunicorn", gunicorn.__version__), ("gunicorn-h1c", gunicorn_h1c.__version__)]
)
def test_the_installed_release_is_in_the_tested_range(name: str, version: str) -> None:
    low, high = _pinned(name)
    assert _version(low) <= _version(version) < _version(high), f"{name} {version} is outside >={low},<{high}"


def _params(fn: Any) -> list[str]:
    return list(inspect.signature(fn).parameters)


def test_the_worker_base_class_offers_what_the_event_worker_uses() -> None:
    assert _params(base.Worker.__init__) == ["self", "age", "ppid", "sockets", "app", "timeout", "cfg", "log"]
    assert _params(base.Worker.handle_error) == ["self", "req", "client", "addr", "exc"]
    for method in (
        "init_process",
        "notify",
        "load_wsgi",
        "init_signals",
        "handle_exit",
        "handle_quit",
        "run",
    ):
        assert callable(getattr(base.Worker, method, None)), f"Worker.{method} is gone"
    source = inspect.getsource(base.Worker)
    # attributes the event loop reads: set by the base class
    for attribute in (
        "self.alive",
        "self.nr",
        "self.max_requests",
        "self.PIPE",
        "self.sockets",
        "self.ppid",
        "self.timeout",
        "self.booted",
        "self.wsgi",
        "self.tmp",
    ):
        assert attribute in source, f"Worker no longer sets {attribute}"
    assert "signal.set_wakeup_fd(self.PIPE[1])" in source, "signals no longer wake the worker through PIPE"
    assert "self.run()" in inspect.getsource(base.Worker.init_process)


def test_a_complete_request_goes_through_the_parser_and_wsgi_into_one_buffer() -> None:
    cfg = Config()
    body = b'{"a": 1}'
    request = b"POST /v1/admit?x=1 HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
    request += b"Content-Length: %d\r\n\r\n%s" % (len(body), body)

    class Out:
        def __init__(self) -> None:
            self.parts: list[bytes] = []

        def sendall(self, data: bytes) -> None:
            self.parts.append(bytes(data))

        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"Gunicorn used socket.{name}: the worker only offers sendall")

    parser = http.get_parser(cfg, iter([request]), ("127.0.0.1", 5))
    req = next(parser)
    out = Out()
    resp, environ = wsgi.create(req, out, ("127.0.0.1", 5), ("127.0.0.1", 443), cfg)
    assert environ["PATH_INFO"] == "/v1/admit" and environ["QUERY_STRING"] == "x=1"
    assert environ["CONTENT_LENGTH"] == str(len(body)) and environ["wsgi.input"].read() == body

    def app(env: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
        return [b"ok"]

    for item in app(environ, resp.start_response):
        resp.write(item)
    resp.close()
    data = b"".join(out.parts)
    assert data.startswith(b"HTTP/1.1 200 OK\r\n") and data.endswith(b"\r\n\r\nok")
    assert not resp.should_close()
    resp.force_close()
    assert resp.should_close()


def test_error_answers_and_tls_settings_are_where_the_worker_takes_them() -> None:
    assert _params(util.write_error) == ["sock", "status_int", "reason", "mesg"]
    # the worker writes an error answer into its collector, as Gunicorn writes it to a socket
    from celkeeper.webhook.worker import _Collector

    out = _Collector()
    util.write_error(out, 400, "Bad Request", "invalid chunked body")
    answer = out.data()
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n") and b"invalid chunked body" in answer
    assert _params(util.close) == ["sock"]
    assert _params(gsock.ssl_context) == ["conf"]
    cfg = Config()
    for setting in (
        "worker_connections",
        "keepalive",
        "graceful_timeout",
        "pre_request",
        "post_request",
        "post_worker_init",
        "pre_fork",
        "post_fork",
        "child_exit",
        "worker_exit",
        "worker_tmp_dir",
        "ssl_context",
        "max_requests",
        "max_requests_jitter",
        "control_socket_disable",
    ):
        assert setting in cfg.settings, f"Gunicorn has no setting {setting!r} any more"
    assert hasattr(cfg, "is_ssl")


def test_the_arbiter_offers_what_rolling_replacement_uses() -> None:
    for method in ("manage_workers", "handle_hup", "spawn_worker", "kill_worker", "reap_workers", "stop"):
        assert callable(getattr(Arbiter, method, None)), f"Arbiter.{method} is gone"
    assert isinstance(Arbiter.num_workers, property) and Arbiter.num_workers.fset is not None
    manage = inspect.getsource(Arbiter.manage_workers)
    assert "self.num_workers" in manage and "spawn_workers" in manage, (
        "manage_workers no longer sizes by num_workers"
    )
    spawn = inspect.getsource(Arbiter.spawn_worker)
    for needed in ("self.worker_age += 1", "self.WORKERS[pid] = worker", "self.cfg.pre_fork(self, worker)"):
        assert needed in spawn, f"spawn_worker changed: {needed!r}"


def test_a_graceful_stop_goes_through_stop_where_the_drain_runs() -> None:
    """The drain (webhook/server.py, _Arbiter.stop) runs before Gunicorn's own stop: SIGTERM must end
    in stop(graceful=True) (through halt), SIGINT in stop(False), and the signal queue must be one the
    drain can poll."""
    assert "raise StopIteration" in inspect.getsource(Arbiter.handle_term)
    assert "self.stop()" in inspect.getsource(Arbiter.halt)
    assert "self.stop(False)" in inspect.getsource(Arbiter.handle_int)
    stop = inspect.getsource(Arbiter.stop)
    assert "close_sockets(self.LISTENERS" in stop and "self.kill_workers(sig)" in stop
    assert "self.SIG_QUEUE.put_nowait(sig)" in inspect.getsource(Arbiter.signal)
    assert "SIG_QUEUE = queue.SimpleQueue()" in inspect.getsource(Arbiter.__init__)


def test_h1c_frames_a_head_as_the_worker_reads_it() -> None:
    head = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"
    parsed = gunicorn_h1c.parse_request_fast(head)
    assert [(bytes(k), bytes(v)) for k, v in parsed.headers][1:] == [
        (b"Content-Length", b"5"),
        (b"Expect", b"100-continue"),
    ]
    # refused (the worker then hands the head to Gunicorn, which answers 400): malformed, and smuggling shapes
    for bad in (
        b"P\x00ST / HTTP/1.1\r\n\r\n",
        head.replace(b"Expect: 100-continue", b"Transfer-Encoding: chunked"),
    ):
        with pytest.raises(Exception):  # noqa: B017
            gunicorn_h1c.parse_request_fast(bad)
