"""`celkeeper serve` with a read-only root filesystem and one writable folder (issue 12).

The server runs in a mount namespace of its own (unshare, as root) where `/` and `/dev/shm` are
read-only and only its --state-dir is writable - what a pod with readOnlyRootFilesystem: true and one
emptyDir sees. It must serve, roll its workers and report metrics; without a writable state folder it
must say so in one line. Skipped where mount namespaces cannot be made (not root, no unshare).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.serve import POLICIES, ROOT, ServeProcess, pod, review

pytestmark = pytest.mark.server


# in the new mount namespace: the state folder stays writable (a mount of its own), the rest does not
READ_ONLY = """
set -e
if [ -n "$STATE" ]; then mount --bind "$STATE" "$STATE"; fi
mount -o remount,bind,ro /
for shm in $(awk '$5 == "/dev/shm" {print $5}' /proc/self/mountinfo | sort -u); do
    mount -o remount,bind,ro "$shm"
done
exec "$@"
"""


def _can_unshare() -> str:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return "needs root and unshare (mount namespaces)"
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "true"], capture_output=True, check=False
    )
    return "" if probe.returncode == 0 else f"unshare -m fails here: {probe.stderr.decode().strip()}"


REASON = _can_unshare()


class ReadOnlyServe(ServeProcess):
    def argv(self) -> list[str]:
        return ["unshare", "-m", "--propagation", "private", "sh", "-c", READ_ONLY, "sh", *super().argv()]


@pytest.mark.skipif(bool(REASON), reason=REASON)
def test_it_serves_with_a_read_only_root_and_one_writable_folder(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    server = ReadOnlyServe(tmp_path / "srv", policies, workers=2)
    server.state.root.mkdir(parents=True)
    server.extra_env["STATE"] = str(server.state.root)
    server.start()
    try:
        status, body = server.admit(review(pod(labels={})))
        assert status == 200 and body["response"]["allowed"] is False
        assert "celkeeper_workers 2.0" in server.get("/metrics").text
        before = server.worker_pids()
        os.kill(server.process.pid, signal.SIGHUP)  # type: ignore[union-attr]  # markers go to the state folder
        deadline = time.monotonic() + 120
        while server.worker_pids() & before or len(server.worker_pids()) != 2:
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.2)
        assert "Traceback" not in server.log(5000) and "Read-only file system" not in server.log(5000)
        written = {p.relative_to(server.state.root).parts[0] for p in server.state.root.rglob("*")}
        assert written <= {"snapshot.json", "informer.json", "workers", "metrics", "server", "tmp"}, written
    finally:
        server.stop()


def _serve_read_only(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    certs = ServeProcess(tmp_path / "srv", POLICIES).certs
    argv = [
        sys.executable,
        "-m",
        "celkeeper",
        "serve",
        "--policy-dir",
        str(POLICIES),
        "--bind",
        "127.0.0.1:0",
        "--cert",
        str(certs.cert),
        "--key",
        str(certs.key),
        *args,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STATE": ""}
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", READ_ONLY, "sh", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


@pytest.mark.skipif(bool(REASON), reason=REASON)
def test_without_a_writable_folder_it_says_what_it_needs_in_one_line(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    for args in ((), ("--state-dir", str(state))):
        proc = _serve_read_only(tmp_path, *args)
        assert proc.returncode == 1, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert lines[0].startswith("celkeeper serve: ") and "--state-dir" in lines[0]
        assert "writable" in lines[0] and "emptyDir" in lines[0]
