"""The cgroup a test node's kubelet puts its pods under (`cgroupRoot`), one per node, and its removal.

kubelet (cgroupfs driver) creates `<root>/kubepods/...` in every hierarchy and runc the containers' cgroups
below; a root of its own per node keeps two nodes on one machine (two test runs) from managing, and
killing, each other's pods. Works on cgroup v1 (one mount per controller, as on the development machine)
and v2 (the unified hierarchy).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

CGROUP_FS = Path("/sys/fs/cgroup")


def mounts() -> list[Path]:
    """Every cgroup (v1) and cgroup2 mount point, from /proc/self/mountinfo."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        if fstype in ("cgroup", "cgroup2"):
            found.append(Path(fields[4]))
    return found


def is_v1() -> bool:
    return not (CGROUP_FS / "cgroup.controllers").exists()


def writable() -> str | None:
    """None if this process may create cgroups, else why not."""
    if not mounts():
        return "no cgroup filesystem is mounted"
    probe = (CGROUP_FS / "memory" if is_v1() else CGROUP_FS) / f"celkeeper-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        return f"cannot create cgroups ({probe}: {exc.strerror})"
    return None


def create(name: str) -> None:
    """`/<name>` in every hierarchy; cpuset's gets its parent's CPUs and memory nodes."""
    for mount in mounts():
        path = mount / name
        path.mkdir(exist_ok=True)
        if (path / "cpuset.cpus").exists() and not (path / "cpuset.cpus").read_text().strip():
            for key in ("cpuset.cpus", "cpuset.mems"):
                (path / key).write_text((mount / key).read_text())


def pids(name: str) -> set[int]:
    """Every process in `/<name>` or below, in any hierarchy."""
    found: set[int] = set()
    for mount in mounts():
        root = mount / name
        if not root.is_dir():
            continue
        for procs in root.rglob("cgroup.procs"):
            with contextlib.suppress(OSError):
                found.update(int(p) for p in procs.read_text().split())
    return found


def remove(name: str, timeout: float = 10.0) -> None:
    """SIGKILL whatever still runs in `/<name>`, then remove its cgroups, deepest first."""
    deadline = time.monotonic() + timeout
    while (left := pids(name)) and time.monotonic() < deadline:
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    for mount in mounts():
        root = mount / name
        if not root.is_dir():
            continue
        for path in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                path.rmdir()
        with contextlib.suppress(OSError):
            root.rmdir()


class MemoryCgroup:
    """A memory cgroup with a limit, as Kubernetes makes a container's (memory.limit_in_bytes on v1,
    memory.max on v2), processes started in it with `wrap(argv)`, and what it saw (peak usage, OOM kills).
    Swap is not counted against the limit (v2: memory.swap.max 0, as the kubelet sets it without swap)."""

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        create(name)
        self.dir = (CGROUP_FS / "memory" / name) if is_v1() else (CGROUP_FS / name)
        if is_v1():
            (self.dir / "memory.limit_in_bytes").write_text(str(limit))
        else:
            (self.dir / "memory.max").write_text(str(limit))
            with contextlib.suppress(OSError):
                (self.dir / "memory.swap.max").write_text("0")

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` run as a process of the cgroup (it enters it, then executes the command)."""
        procs = self.dir / "cgroup.procs"
        return ["/bin/sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh", *argv]

    def peak(self) -> int:
        """The most memory the cgroup has used, in bytes."""
        name = "memory.max_usage_in_bytes" if is_v1() else "memory.peak"
        return int((self.dir / name).read_text().split()[0])

    def oom_kills(self) -> int:
        """How many of its processes the kernel killed for want of memory."""
        name = "memory.oom_control" if is_v1() else "memory.events"
        for line in (self.dir / name).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def remove(self) -> None:
        remove(self.name)
