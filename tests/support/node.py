"""A real single-node Kubernetes cluster for tests, built from source on this machine (no kind, no Docker).

    from tests.support.node import NodeCluster
    with NodeCluster(workdir, find_node_binaries()) as cluster:     # ready in seconds once built
        cluster.kubectl("apply", "-f", "deploy/celkeeper.yaml")

Inside a network namespace of its own (tests.support.netns): etcd and kube-apiserver (tests.support.apiserver,
with the ServiceAccount admission plugin, Node authorization and kubelet credentials), kube-controller-manager
and kube-scheduler, containerd 2.x with runc and the CNI bridge plugin, kubelet (cgroupfs driver, a cgroup
root of its own), and kube-proxy (nftables). All Kubernetes programs are v1.37.2 from k8s.io/kubernetes
(hack/kube/build.sh); images are imported into containerd from OCI archives built locally
(hack/kube/images/build.py, `import_image`), never pulled. The host reaches the API server at
`inner_ip`; pods reach it through the `kubernetes` Service, as in any cluster. Logs are in
`<workdir>/logs/`. `stop()` drains the node (every pod deleted), stops everything and sweeps what is left
(tests.support.node_cleanup).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support import cgroups, node_cleanup
from tests.support.apiserver import ControlPlane, _child_env
from tests.support.binaries import NodeBinaries
from tests.support.netns import NetworkNamespace
from tests.support.node_config import (
    NODE_NAME,
    POD_CIDR,
    NodePaths,
    cni_config,
    containerd_config,
    kube_proxy_config,
    kubelet_config,
    write_json,
)
from tests.support.processes import ManagedProcess
from tests.support.waiting import wait_for

__all__ = ["NODE_NAME", "NodeCluster", "NodeError"]


class NodeError(RuntimeError):
    """The node did not start; the message carries the tail of the relevant logs."""


class NodeCluster:
    """One control plane, its controllers and one node. Use as a context manager or start()/stop()."""

    def __init__(self, workdir: Path, binaries: NodeBinaries) -> None:
        self.binaries = binaries
        self.workdir = workdir
        self.netns = NetworkNamespace()
        self.node_id = self.netns.name
        self.cgroup = f"celkeeper-{self.node_id}"
        self.paths = NodePaths(workdir, node_cleanup.STATE_ROOT / self.node_id)
        self.log_dir = workdir / "logs"
        self.control_plane: ControlPlane | None = None
        self.processes: dict[str, ManagedProcess] = {}
        self.startup_seconds: dict[str, float] = {}
        self.imported: set[str] = set()
        self._owner: node_cleanup.Owner | None = None

    # -- facts and helpers tests use --------------------------------------------------------------------

    @property
    def cluster(self) -> ControlPlane:
        assert self.control_plane is not None, "the node cluster is not running"
        return self.control_plane

    def kubectl(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.cluster.kubectl(*args, **kwargs)

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def ctr(self, *args: str, timeout: float = 120.0) -> str:
        cmd = [
            str(self.binaries["ctr"]),
            "--address",
            str(self.paths.containerd_socket),
            "-n",
            "k8s.io",
            *args,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if proc.returncode != 0:
            raise NodeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    def import_image(self, archive: Path) -> str:
        """Import an OCI (or Docker) image archive into the node's containerd; return its reference."""
        out = self.ctr("images", "import", "--platform", "linux/amd64", str(archive), timeout=600)
        refs = [line.split()[1] for line in out.splitlines() if line.startswith("unpacking ")]
        self.imported.update(refs)
        return refs[0] if refs else out.strip()

    def logs(self, lines: int = 30) -> str:
        parts = [self.cluster.logs(lines)] if self.control_plane else []
        for proc in self.processes.values():
            parts.append(f"--- {proc.name} ({proc.log_path}), last {lines} lines\n{proc.log_tail(lines)}")
        return "\n".join(parts)

    # -- lifecycle -------------------------------------------------------------------------------------

    def __enter__(self) -> NodeCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 240.0) -> NodeCluster:
        t0 = time.monotonic()
        try:
            self._start(time.monotonic() + timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds["total"] = time.monotonic() - t0
        return self

    def _step(self, name: str, since: float) -> float:
        now = time.monotonic()
        self.startup_seconds[name] = now - since
        return now

    def _start(self, deadline: float) -> None:
        t = time.monotonic()
        node_cleanup.reap_stale()
        self.paths.state.mkdir(parents=True, exist_ok=True)
        self._owner = node_cleanup.register(self.node_id, self.cgroup, [self.workdir, self.paths.state])
        self.netns.create()
        cgroups.create(self.cgroup)
        t = self._step("network and cgroups", t)
        self.control_plane = ControlPlane(
            self.workdir / "control-plane",
            self.binaries.control_plane,
            keep_workdir=True,
            address=self.netns.inner_ip,
            wrap=self.netns.wrap,
            with_node=True,
        )
        self.control_plane.start(timeout=max(deadline - time.monotonic(), 30))
        t = self._step("control plane", t)
        self._write_configs()
        self._run("kube-controller-manager", self._controller_manager_argv())
        self._run("kube-scheduler", self._scheduler_argv())
        self._run(
            "containerd",
            [str(self.binaries["containerd"]), "--config", str(self.paths.config_dir / "containerd.toml")],
        )
        self._wait(lambda: self.ctr("version", timeout=10) != "", "containerd", deadline, 30)
        for name in ("pause", "nodetest"):
            self.import_image(self.binaries.images[name])
        t = self._step("containerd and images", t)
        self._run("kubelet", self._kubelet_argv())
        self._run(
            "kube-proxy",
            [
                str(self.binaries["kube-proxy"]),
                "--config",
                str(self.paths.config_dir / "kube-proxy.json"),
                "--v=1",
            ],
        )
        self._wait(self._node_ready, "the node to be Ready", deadline)
        t = self._step("kubelet", t)
        self._wait(self._proxy_programmed, "kube-proxy's nftables rules for the kubernetes Service", deadline)
        self._wait(
            lambda: self.kubectl("get", "serviceaccount", "default", check=False).returncode == 0,
            "the default ServiceAccount (kube-controller-manager)",
            deadline,
        )
        self._step("kube-proxy and controllers", t)

    def stop(self) -> None:
        """Drain the node, stop every program, sweep what is left. Idempotent."""
        for name in ("kube-controller-manager", "kube-scheduler"):  # nothing recreates or reschedules pods
            if name in self.processes:
                self.processes[name].stop()
        if self.control_plane is not None and self._running("kubelet") and self._running("containerd"):
            self._drain()
        for name in ("kube-proxy", "kubelet", "containerd"):
            if name in self.processes:
                self.processes[name].stop()
        if self.control_plane is not None:
            self.control_plane.stop()
        if self._owner is not None:
            node_cleanup.sweep(self._owner, str(self.paths.containerd_socket))
            node_cleanup.restore_sysctls(self._owner.sysctls, self.node_id)
            self._owner = None
            for bulky in (self.paths.containerd_root, self.paths.kubelet_root):
                shutil.rmtree(bulky, ignore_errors=True)
        self.netns.delete()

    # -- internals -------------------------------------------------------------------------------------

    def _running(self, name: str) -> bool:
        return name in self.processes and self.processes[name].running()

    def _drain(self) -> None:
        """Delete every pod and wait for containerd to have no task left (kubelet stops the sandboxes)."""
        try:
            self.kubectl(
                "delete",
                "pods",
                "--all",
                "--all-namespaces",
                "--force",
                "--grace-period=0",
                "--wait=false",
                check=False,
                timeout=60,
            )
            wait_for(
                lambda: self.ctr("tasks", "ls", "-q", timeout=10).strip() == "",
                timeout=60,
                interval=0.5,
                what="containerd's tasks to end",
            )
        except (TimeoutError, NodeError, subprocess.TimeoutExpired):
            pass  # the sweep kills what is left

    def _run(self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        proc = ManagedProcess(
            name,
            self.netns.wrap(argv),
            self.log_dir / f"{name}.log",
            env=env or self._env(),
            cwd=self.workdir,
        )
        self.processes[name] = proc
        proc.start()

    def _env(self) -> dict[str, str]:
        env = _child_env()
        env["PATH"] = f"{self.binaries.bin_dir}:{env.get('PATH', '')}:/usr/sbin:/sbin"
        return env

    def _wait(self, probe: Callable[[], bool], what: str, deadline: float, cap: float | None = None) -> None:
        for name, proc in self.processes.items():
            if not proc.running():
                raise NodeError(f"{name} exited with status {proc.returncode()} before {what}\n{self.logs()}")
        timeout = max(deadline - time.monotonic(), 1.0)

        def check() -> bool:
            dead = [n for n, p in self.processes.items() if not p.running()]
            if dead:
                raise NodeError(f"{', '.join(dead)} exited")
            return probe()

        try:
            wait_for(check, timeout=min(timeout, cap) if cap else timeout, interval=0.25, what=what)
        except TimeoutError as exc:
            raise NodeError(f"{exc}\n{self.logs()}") from None

    def _node_ready(self) -> bool:
        proc = self.kubectl("get", "node", NODE_NAME, "-o", "json", check=False)
        if proc.returncode != 0:
            return False
        conditions = json.loads(proc.stdout).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def _proxy_programmed(self) -> bool:
        cmd = self.netns.wrap(["nft", "list", "table", "ip", "kube-proxy"])
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
        return proc.returncode == 0 and "10.0.0.1" in proc.stdout

    def _write_configs(self) -> None:
        cp = self.cluster
        pki = cp.pki_dir
        cp.ca.serving_cert([self.netns.inner_ip, NODE_NAME], f"system:node:{NODE_NAME}").write(pki, "kubelet")
        self.kubeconfigs = {
            "kubelet": cp.kubeconfig_for(f"system:node:{NODE_NAME}", ["system:nodes"]),
            "kube-controller-manager": cp.kubeconfig_for("system:kube-controller-manager"),
            "kube-scheduler": cp.kubeconfig_for("system:kube-scheduler"),
            "kube-proxy": cp.kubeconfig_for("system:kube-proxy"),
        }
        config = self.paths.config_dir
        config.mkdir(parents=True, exist_ok=True)
        (config / "containerd.toml").write_text(
            containerd_config(self.paths, self.binaries.bin_dir, self.binaries.runc, self.binaries.cni_dir)
        )
        write_json(self.paths.cni_conf_dir / "10-celkeeper.conflist", cni_config(self.paths))
        write_json(
            config / "kubelet.json",
            kubelet_config(
                self.paths, node_ip=self.netns.inner_ip, cgroup_root=self.cgroup, ca=cp.ca_path, pki=pki
            ),
        )
        write_json(config / "kube-proxy.json", kube_proxy_config(self.kubeconfigs["kube-proxy"]))
        for directory in (self.paths.kubelet_root, self.paths.pod_logs, self.paths.containerd_root):
            directory.mkdir(parents=True, exist_ok=True)

    def _controller_manager_argv(self) -> list[str]:
        cp, kubeconfig = self.cluster, self.kubeconfigs["kube-controller-manager"]
        return [
            str(self.binaries["kube-controller-manager"]),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={cp.pki_dir / 'service-account.key'}",
            f"--root-ca-file={cp.ca_path}",
            f"--cluster-cidr={POD_CIDR}",
            "--v=1",
        ]

    def _scheduler_argv(self) -> list[str]:
        kubeconfig = self.kubeconfigs["kube-scheduler"]
        return [
            str(self.binaries["kube-scheduler"]),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
            "--v=1",
        ]

    def _kubelet_argv(self) -> list[str]:
        return [
            str(self.binaries["kubelet"]),
            f"--config={self.paths.config_dir / 'kubelet.json'}",
            f"--kubeconfig={self.kubeconfigs['kubelet']}",
            f"--root-dir={self.paths.kubelet_root}",
            f"--node-ip={self.netns.inner_ip}",
            f"--hostname-override={NODE_NAME}",
            "--v=1",
        ]


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m tests.support.node [--workdir DIR]`: run a cluster with a node until ^C or SIGTERM."""
    import argparse
    import signal
    import sys
    import tempfile

    from tests.support.binaries import find_node_binaries

    parser = argparse.ArgumentParser(prog="python -m tests.support.node", description=main.__doc__)
    parser.add_argument("--workdir", type=Path, help="keep configuration, kubeconfigs and logs here")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="celkeeper-node-"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # unwind through the with-block
    with NodeCluster(workdir, find_node_binaries()) as node:
        seconds = ", ".join(f"{k} {v:.1f}s" for k, v in node.startup_seconds.items())
        print(f"node {NODE_NAME} ready in {node.startup_seconds['total']:.1f}s ({seconds})")
        print(f"export KUBECONFIG={node.cluster.kubeconfig_path}")
        print(f"network namespace {node.node_id} (nsenter --net={node.netns.path}); logs in {node.log_dir}")
        print("Ctrl-C stops everything", flush=True)
        try:
            while all(p.running() for p in node.processes.values()):
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
