"""Leaving the machine as a test node found it: processes, mounts, cgroups, network namespace, sysctls.

A node's pods and containerd's shims are not children of the test process (the shims daemonize), so the
usual process-group stop does not reach them. `sweep()` finds everything by what it belongs to: the
node's cgroup (pods), its network namespace (every node program and the shims), its directories
(mounts). Each running node registers itself in `/run/celkeeper-node/<id>/owner.json`; `reap_stale()`
sweeps the nodes whose test process died without stopping them (SIGKILL, a crash).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.support import cgroups
from tests.support.netns import NETNS_DIR

STATE_ROOT = Path("/run/celkeeper-node")

# What kubelet sets machine-wide at start (pkg/kubelet/cm/container_manager_linux.go setupKernelTunables);
# restored when the last node on the machine stops.
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)


@dataclass(frozen=True)
class Owner:
    """Who runs a node, and what to sweep when it is gone."""

    node_id: str
    pid: int
    started: str  # /proc/<pid>/stat start time: a pid reused later does not pass for the owner
    cgroup: str
    dirs: tuple[str, ...]
    sysctls: dict[str, str]


def _start_time(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def register(node_id: str, cgroup: str, dirs: Sequence[Path]) -> Owner:
    """Record this process as the node's owner, with the sysctls to restore (a running node's kubelet
    has already changed them: take the values that node saved)."""
    saved = next((o.sysctls for o in _owners() if _alive(o)), None) or read_sysctls()
    owner = Owner(node_id, os.getpid(), _start_time(os.getpid()), cgroup, tuple(map(str, dirs)), saved)
    directory = STATE_ROOT / node_id
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "owner.json").write_text(json.dumps(asdict(owner)) + "\n")
    return owner


def _owners() -> list[Owner]:
    found = []
    for path in STATE_ROOT.glob("*/owner.json"):
        with contextlib.suppress(OSError, ValueError, TypeError):
            data = json.loads(path.read_text())
            found.append(Owner(**{**data, "dirs": tuple(data["dirs"])}))
    return found


def _alive(owner: Owner) -> bool:
    return _start_time(owner.pid) == owner.started != ""


def read_sysctls() -> dict[str, str]:
    values = {}
    for key in KUBELET_SYSCTLS:
        with contextlib.suppress(OSError):
            values[key] = Path("/proc/sys", key).read_text().strip()
    return values


def restore_sysctls(saved: dict[str, str], node_id: str) -> None:
    """Put back what kubelet changed, unless another node still runs (its kubelet wants them too)."""
    if any(o.node_id != node_id and _alive(o) for o in _owners()):
        return
    for key, value in saved.items():
        with contextlib.suppress(OSError):
            Path("/proc/sys", key).write_text(value)


def _netns_inode(node_id: str) -> int | None:
    try:
        return os.stat(NETNS_DIR / node_id).st_ino
    except OSError:
        return None


def _processes_of(node_id: str, socket: str) -> set[int]:
    """Processes in the node's network namespace, and containerd shims serving its socket."""
    inode = _netns_inode(node_id)
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if inode is not None and os.stat(entry / "ns" / "net").st_ino == inode:
                found.add(int(entry.name))
                continue
            if socket.encode() in (entry / "cmdline").read_bytes():
                found.add(int(entry.name))
    return found


def _mounts_under(dirs: Sequence[str]) -> list[str]:
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if any(point == d or point.startswith(d.rstrip("/") + "/") for d in dirs):
            found.append(point)
    return sorted(set(found), key=lambda p: -len(p))


def unmount_all(dirs: Sequence[str]) -> None:
    for _ in range(5):  # a lazy unmount can uncover a mount below it
        points = _mounts_under(dirs)
        if not points:
            return
        for point in points:
            subprocess.run(["umount", "-l", point], capture_output=True, check=False, timeout=30)


def sweep(owner: Owner, socket: str) -> None:
    """Kill what the node left running, unmount its mounts, remove its cgroups, namespace and state."""
    deadline = time.monotonic() + 10
    while (
        pids := _processes_of(owner.node_id, socket) | cgroups.pids(owner.cgroup)
    ) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    unmount_all(owner.dirs)
    cgroups.remove(owner.cgroup)
    subprocess.run(["ip", "netns", "delete", owner.node_id], capture_output=True, check=False, timeout=30)
    shutil.rmtree(STATE_ROOT / owner.node_id, ignore_errors=True)


def reap_stale() -> list[str]:
    """Sweep the nodes whose test process is gone; return their ids."""
    reaped = []
    for owner in _owners():
        if not _alive(owner):
            sweep(owner, str(STATE_ROOT / owner.node_id / "containerd.sock"))
            restore_sysctls(owner.sysctls, owner.node_id)
            reaped.append(owner.node_id)
    return reaped
