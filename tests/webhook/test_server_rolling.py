"""SIGHUP and worker recycling replace workers one at a time, a successor accepting before its
predecessor leaves (issue 12), on a real server over TLS with a policy set large enough that a worker
takes seconds to load it.

Gunicorn's own SIGHUP starts all new workers and stops the old ones at once: with 10,000
constraints, ~30 s with no worker accepting. Here reviews are sent throughout a SIGHUP (and through
workers retiring at --max-requests): none may fail, and the server's log must show each old worker
leaving only after its successor accepted.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.support.policysets import large_policy_set
from tests.support.serve import PROCESS_MODELS, ServeProcess, pod, review
from tests.support.slowclients import Latencies, measure

pytestmark = pytest.mark.server

CONSTRAINTS = 2000  # ~10 s to load per worker on a loaded 2-core machine (cel-go)
DENIED = json.dumps(review(pod(labels={}, image="docker.io/library/nginx:latest"))).encode()
LATENCY_BOUND = 3.0  # seconds; a worker that has to load the policies first takes longer than this


def _answered(status: int, body: bytes) -> bool:
    return status == 200 and (json.loads(body).get("response") or {}).get("allowed") is False


class _Traffic:
    """Reviews on new connections, one after the other, in a thread, until stopped."""

    def __init__(self, server: ServeProcess) -> None:
        self.server = server
        self.result = Latencies([], [])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        ctx = self.server.client_context()
        while not self._stop.is_set():
            got = measure(
                "127.0.0.1", self.server.port, ctx, DENIED, _answered, 1, new_connections=True, timeout=30
            )
            self.result.seconds += got.seconds
            self.result.failures += got.failures

    def __enter__(self) -> _Traffic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


def _handovers(log: str) -> list[tuple[int, int]]:
    """(successor, predecessor) for each 'worker S accepts; stopping worker P' line."""
    return [(int(a), int(b)) for a, b in re.findall(r"worker (\d+) accepts; stopping worker (\d+)", log)]


def _order_is_successor_first(log: str) -> None:
    """Each predecessor exits after its successor's handover line; no worker is stopped otherwise."""
    lines = log.splitlines()
    for successor, predecessor in _handovers(log):
        handover = next(i for i, line in enumerate(lines) if f"worker {successor} accepts; stopping" in line)
        booted = next(i for i, line in enumerate(lines) if f"Booting worker with pid: {successor}" in line)
        exits = [i for i, line in enumerate(lines) if f"Worker exiting (pid: {predecessor})" in line]
        assert booted < handover, f"worker {successor} took over before it booted"
        # a predecessor handed over near the end of the log may still be draining: not exited yet
        assert not exits or exits[0] > handover, f"worker {predecessor} left before {successor} accepted"


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("large") / "policies"
    large_policy_set(out, CONSTRAINTS, distinct=True)
    return out


@pytest.mark.parametrize("model", PROCESS_MODELS)
def test_sighup_replaces_the_workers_one_at_a_time(tmp_path: Path, policies: Path, model: str) -> None:
    workers, threads = PROCESS_MODELS[model]
    args = ["--max-requests", "0"]
    server = ServeProcess(tmp_path / "srv", policies, workers=workers, threads=threads, args=args)
    server.start(timeout=600)
    try:
        before = server.worker_pids()
        with _Traffic(server) as traffic:
            time.sleep(1.0)
            hup = time.monotonic()
            os.kill(server.process.pid, signal.SIGHUP)  # type: ignore[union-attr]
            deadline = hup + 600
            while time.monotonic() < deadline:
                now = server.worker_pids()
                if (
                    len(now) == workers
                    and not now & before
                    and all(s.ready for s in server.worker_statuses())
                ):
                    break
                time.sleep(0.2)
            rolled = time.monotonic() - hup
            time.sleep(1.0)
        log = server.log(100_000)
        assert not server.worker_pids() & before, (
            f"old workers still there after {rolled:.0f} s:\n{log[-3000:]}"
        )
        assert not traffic.result.failures, traffic.result.failures[:3]
        worst = max(traffic.result.seconds)
        print(
            f"roll of {workers} worker(s) took {rolled:.1f} s; "
            f"{len(traffic.result.seconds)} reviews during it, "
            f"p99 {traffic.result.percentile(99) * 1000:.0f} ms, max {worst * 1000:.0f} ms"
        )
        assert worst < LATENCY_BOUND
        assert {p for _, p in _handovers(log)} == before  # each old worker was handed over from
        _order_is_successor_first(log)
    finally:
        server.stop()


def test_workers_at_max_requests_are_replaced_without_a_gap(tmp_path: Path, policies: Path) -> None:
    args = ["--max-requests", "30"]
    server = ServeProcess(tmp_path / "srv", policies, workers=2, args=args).start(timeout=600)
    try:
        first = server.worker_pids()
        with _Traffic(server) as traffic:
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline and len(_handovers(server.log(100_000))) < 2:
                time.sleep(0.5)
        log = server.log(100_000)
        assert len(_handovers(log)) >= 2, log[-3000:]
        assert "asks to be replaced" in log
        assert not traffic.result.failures, traffic.result.failures[:3]
        assert max(traffic.result.seconds) < LATENCY_BOUND
        assert first - server.worker_pids(), "no worker was replaced"
        _order_is_successor_first(log)
    finally:
        server.stop()
