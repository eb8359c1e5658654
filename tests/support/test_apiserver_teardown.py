"""Stopping a control plane leaves no process and no listening port behind: after a clean stop, and
when the Python process that started it is killed outright."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.apiserver import ControlPlane, wait_for
from tests.support.binaries import ROOT, KubeBinaries
from tests.support.processes import port_open

pytestmark = pytest.mark.kube


def _live_processes_mentioning(text: str, but: int = 0) -> list[int]:
    """PIDs of running (not zombie) processes other than `but` whose command line contains `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in (os.getpid(), but):
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, PermissionError, IndexError):
            continue
        if text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_stop_leaves_no_process_and_no_port(kube_binaries: KubeBinaries, tmp_path: Path) -> None:
    cluster = ControlPlane(tmp_path / "cp", kube_binaries)
    with cluster:
        ports = [cluster.etcd_port, cluster.secure_port]
        assert all(port_open(p) for p in ports)
        assert len(_live_processes_mentioning(str(cluster.workdir))) == 2
        default_ns = cluster.kubectl("get", "namespace", "default", "-o", "name").stdout
        assert default_ns.strip() == "namespace/default"
    assert _live_processes_mentioning(str(cluster.workdir)) == []
    assert not any(port_open(p) for p in ports)
    assert not (cluster.workdir / "etcd-data").exists()
    assert (cluster.log_dir / "kube-apiserver.log").stat().st_size > 0
    cluster.stop()  # idempotent


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux-only")
def test_servers_die_with_a_killed_test_process(kube_binaries: KubeBinaries, tmp_path: Path) -> None:
    del kube_binaries  # only for the skip when the binaries are missing
    workdir = tmp_path / "cp"
    runner = subprocess.Popen(
        [sys.executable, "-m", "tests.support.apiserver", "--workdir", str(workdir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert runner.stdout is not None
        lines = []
        for line in runner.stdout:
            lines.append(line)
            if line.startswith("logs in"):
                break
        pids_line = next((x for x in lines if x.startswith("pids ")), None)
        assert pids_line, "".join(lines)
        pids = [int(p) for p in pids_line.split()[1:]]
        assert len(pids) == 2
        assert sorted(_live_processes_mentioning(str(workdir), but=runner.pid)) == sorted(pids)

        runner.send_signal(signal.SIGKILL)  # no Python cleanup runs: only the parent-death signal
        runner.wait(timeout=10)
        wait_for(
            lambda: not _live_processes_mentioning(str(workdir)),
            timeout=15,
            what="etcd and kube-apiserver to die with their parent",
        )
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        if runner.stdout is not None:
            runner.stdout.close()
        for pid in _live_processes_mentioning(str(workdir)):
            os.kill(pid, signal.SIGKILL)
