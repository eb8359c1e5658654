"""Readiness and the failure mode on a real server: a worker without policies is not ready, and
answers admission requests by the failure mode (here: deny) until it has loaded a snapshot."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator

import pytest

from tests.support.serve import POLICIES, ServeProcess, pod, review

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    workdir = tmp_path_factory.mktemp("ready")
    shutil.copytree(POLICIES, workdir / "policies")
    proc = ServeProcess(workdir, workdir / "policies", workers=1, args=["--failure-mode", "deny"])
    proc.start()
    yield proc
    proc.stop()


def test_readyz_is_503_until_the_worker_has_compiled_a_complete_snapshot(server: ServeProcess) -> None:
    ready = server.get("/readyz")
    assert ready.status_code == 200
    engine = ready.json()["engine"]  # named by every worker, ready or not
    informer = server.informer_pid()
    (worker,) = server.worker_pids()
    os.kill(informer, signal.SIGSTOP)  # nothing gets published while it is stopped
    try:
        server.state.snapshot.unlink()
        os.kill(worker, signal.SIGKILL)  # its replacement finds no snapshot
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and server.worker_pids() in (set(), {worker}):
            time.sleep(0.05)
        (replacement,) = server.worker_pids()
        assert replacement != worker
        resp = server.get("/readyz")
        assert resp.status_code == 503
        ready = resp.json()
        assert ready.pop("loop") in ("MainThread", "event-loop-1")  # the worker's loop that answered
        assert ready == {
            "ready": False,
            "worker": replacement,
            "engine": engine,
            "reason": "no snapshot loaded yet",
        }
        # no policies: the failure mode answers (deny), with a well-formed review and the uid
        status, body = server.admit(review(pod(labels={"owner": "a"}), uid="uid-unready"))
        assert status == 200
        assert body["response"]["uid"] == "uid-unready"
        assert body["response"]["allowed"] is False
        assert body["response"]["status"]["code"] == 500
        assert "internal error" in body["response"]["status"]["message"]
        assert "Traceback" not in body["response"]["status"]["message"]
    finally:
        os.kill(informer, signal.SIGCONT)  # it notices the vanished snapshot and publishes it again
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and server.get("/readyz").status_code != 200:
        time.sleep(0.05)
    detail = server.get("/readyz").json()
    assert detail["ready"] is True and detail["constraints"] == 5
    assert server.admit(review(pod(labels={"owner": "a"})))[1]["response"]["allowed"] is True
    log = server.log(400)
    assert "internal error answering uid uid-unready" in log
    assert "no policies loaded yet" in log
    assert "Traceback" not in log  # expected before the first snapshot: one line, not a traceback
