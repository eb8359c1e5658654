"""A node leaves the shared machine as it found it: after stop() no process of it runs (pods and shims
included), nothing of it is mounted, its cgroups, network namespace and state are gone, and the kernel
settings kubelet changes are back. And a node whose test process died is swept by the next one."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support import cgroups, node_cleanup
from tests.support.binaries import NodeBinaries
from tests.support.node import NodeCluster
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]


def leftovers(node_id: str, cgroup: str, dirs: list[Path]) -> dict[str, object]:
    """What of a node still exists (empty values everywhere when it is all gone)."""
    socket = str(node_cleanup.STATE_ROOT / node_id / "containerd.sock")
    return {
        "processes": sorted(node_cleanup._processes_of(node_id, socket) | cgroups.pids(cgroup)),
        "mounts": node_cleanup._mounts_under([str(d) for d in dirs]),
        "cgroups": [str(m / cgroup) for m in cgroups.mounts() if (m / cgroup).exists()],
        "netns": (Path("/run/netns") / node_id).exists(),
        "state": (node_cleanup.STATE_ROOT / node_id).exists(),
    }


def nothing(found: dict[str, object]) -> bool:
    return not any(found.values())


def test_stop_leaves_nothing_behind(node_binaries: NodeBinaries, tmp_path: Path) -> None:
    before = node_cleanup.read_sysctls()
    node = NodeCluster(tmp_path / "node", node_binaries)
    dirs = [tmp_path / "node", node.paths.state]
    try:
        node.start()
        node.kubectl(
            "run", "sleeper", "--image=celkeeper.test/nodetest:1", "--image-pull-policy=Never", "--", "serve"
        )
        node.kubectl("wait", "--for=condition=Ready", "pod/sleeper", "--timeout=120s", timeout=130)
        running = leftovers(node.node_id, node.cgroup, dirs)
        assert running["processes"] and running["mounts"] and running["cgroups"] and running["netns"]
    finally:
        node.stop()
    found = leftovers(node.node_id, node.cgroup, dirs)
    assert nothing(found), found
    if not any(o.node_id != node.node_id for o in node_cleanup._owners()):  # no other node on the machine
        assert node_cleanup.read_sysctls() == before


def test_a_node_whose_test_process_died_is_swept_by_the_next(
    node_binaries: NodeBinaries, tmp_path: Path
) -> None:
    """A child Python starts a node and is SIGKILLed; its programs die with it (parent-death signal) but
    its pods, shims, mounts, cgroups and namespace stay until reap_stale() runs."""
    del node_binaries  # only to skip where no node can run
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        sys.path.insert(0, {str(ROOT)!r})
        from tests.support.binaries import find_node_binaries
        from tests.support.node import NodeCluster
        node = NodeCluster(Path({str(tmp_path / "orphan")!r}), find_node_binaries()).start()
        node.kubectl("run", "orphan", "--image=celkeeper.test/nodetest:1", "--image-pull-policy=Never",
                     "--", "serve")
        node.kubectl("wait", "--for=condition=Ready", "pod/orphan", "--timeout=120s", timeout=130)
        print(node.node_id, node.cgroup, node.paths.state, flush=True)
        time.sleep(600)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        node_id, cgroup, state = child.stdout.readline().split()
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    dirs = [tmp_path / "orphan", Path(state)]
    wait_for(lambda: leftovers(node_id, cgroup, dirs)["processes"], timeout=10, what="the orphaned pod")
    orphaned = leftovers(node_id, cgroup, dirs)
    assert orphaned["processes"] and orphaned["cgroups"] and orphaned["state"], orphaned

    assert node_id in node_cleanup.reap_stale()
    found = leftovers(node_id, cgroup, dirs)
    assert nothing(found), found
