"""An idle worker gives its Go heap's free memory back (webhook/idle.py; issue 29: memory flat over a
run, the pod's memory after its reviews): once per idle period, only after enough requests, never while
requests come; and in a served worker, its memory falls once a burst of reviews ends, the worker deciding
as before."""

from __future__ import annotations

import re
import shutil
import socket
import time
from pathlib import Path

import orjson
import pytest

from celkeeper.webhook.idle import IdleTrim
from tests.support.keepalive import post
from tests.support.native import require_celgo
from tests.support.serve import POLICIES, ServeProcess, pod, review


class Counter:
    def __init__(self) -> None:
        self.n = 0
        self.trims: list[int] = []  # the count at each trim

    def trim(self) -> None:
        self.trims.append(self.n)


def test_it_trims_once_when_the_requests_stop() -> None:
    counter = Counter()
    idle = IdleTrim(lambda: counter.n, counter.trim, least=10)
    for _ in range(5):  # requests keep coming: never
        counter.n += 7
        assert idle.tick() is False
    assert idle.tick() is True  # a whole tick without one: once
    assert counter.trims == [35]
    assert [idle.tick() for _ in range(3)] == [False, False, False]  # still idle: not again
    counter.n += 10
    assert idle.tick() is False  # they came again
    assert idle.tick() is True  # and stopped
    assert counter.trims == [35, 45]
    assert idle.trims == 2


def test_a_few_requests_between_idle_periods_do_not_trim() -> None:
    """Readiness probes and the odd review allocate next to nothing: `least` requests since the last trim."""
    counter = Counter()
    idle = IdleTrim(lambda: counter.n, counter.trim, least=10)
    assert idle.tick() is False  # none yet
    for _ in range(4):
        counter.n += 3  # a probe or three
        assert idle.tick() is False
        assert idle.tick() is (counter.n >= 10)
    assert counter.trims == [12]


def _rss_mib(pid: int) -> float:
    match = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    assert match
    return int(match.group(1)) / 1024


@pytest.mark.server
def test_a_served_worker_returns_its_go_memory_once_reviews_stop(tmp_path: Path) -> None:
    require_celgo()
    policy_dir = tmp_path / "policies"
    shutil.copytree(POLICIES, policy_dir)
    server = ServeProcess(tmp_path, policy_dir, workers=1, threads=1)
    server.start()
    try:
        (pid,) = server.worker_pids()
        denied = orjson.dumps(review(pod(labels={}, image="docker.io/library/nginx:1.27"), uid="d"))
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        with server.client_context().wrap_socket(raw, server_hostname="localhost") as sock:
            # a burst: the Go heap grows to its goal (GOGC=400) several times over
            for _ in range(3000):
                status, body, _closing = post(sock, denied)
                assert status == 200
            answer = orjson.loads(body)["response"]
            busy = _rss_mib(pid)
            deadline = time.monotonic() + 60
            while _rss_mib(pid) > busy - 16 and time.monotonic() < deadline:
                time.sleep(0.5)
        idle = _rss_mib(pid)
        assert idle <= busy - 16, f"the idle worker kept {idle:.1f} MiB of {busy:.1f}"
        # and it decides as before
        status, again = server.admit(orjson.loads(denied))
        assert status == 200 and again["response"] == answer
        assert answer["allowed"] is False
    finally:
        server.stop()
