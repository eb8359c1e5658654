"""The configuration files of a test node's programs: containerd, CNI, kubelet and kube-proxy.

Kept apart from tests.support.node (which starts the programs) so each choice is stated once, with why.
Everything is written as JSON (kubelet and kube-proxy read YAML, a superset) or TOML (containerd).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

NODE_NAME = "celkeeper-node"
POD_CIDR = "10.244.0.0/24"  # inside the node's own network namespace: never seen by the host
POD_GATEWAY = "10.244.0.1"
PAUSE_IMAGE = "celkeeper.test/pause:3.10.2"  # hack/kube/images/build.py's reference


@dataclass(frozen=True)
class NodePaths:
    """Where one node keeps its files. `state` is short (a socket path must fit in 108 bytes)."""

    workdir: Path
    state: Path

    @property
    def containerd_socket(self) -> Path:
        return self.state / "containerd.sock"

    @property
    def containerd_root(self) -> Path:
        return self.workdir / "containerd"

    @property
    def kubelet_root(self) -> Path:
        """Under `state`: kubelet makes sockets in it (pod-resources, plugin registration), and a test's
        workdir can be too long for them (pytest-xdist adds a folder per worker)."""
        return self.state / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.workdir / "pod-logs"

    @property
    def cni_conf_dir(self) -> Path:
        return self.workdir / "cni" / "net.d"

    @property
    def config_dir(self) -> Path:
        return self.workdir / "config"


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))  # a JSON string is a valid TOML basic string


def containerd_config(paths: NodePaths, bin_dir: Path, runc: Path, cni_dir: Path) -> str:
    """containerd 2.x (config version 3) for the CRI: everything under this node's own directories."""
    tables: dict[str, dict[str, object]] = {
        "": {
            "version": 3,
            "root": str(paths.containerd_root),
            "state": str(paths.state / "containerd"),
            # NRI's socket (/var/run/nri/nri.sock) would be shared by every containerd on the machine.
            "disabled_plugins": ["io.containerd.nri.v1.nri"],
        },
        "grpc": {"address": str(paths.containerd_socket)},
        "ttrpc": {"address": str(paths.containerd_socket) + ".ttrpc"},
        "plugins.'io.containerd.internal.v1.opt'": {"path": str(paths.containerd_root / "opt")},
        "plugins.'io.containerd.cri.v1.images'": {"snapshotter": "overlayfs"},
        # Pinned: CRI never garbage-collects it; there is no registry to pull it from again.
        "plugins.'io.containerd.cri.v1.images'.pinned_images": {"sandbox": PAUSE_IMAGE},
        "plugins.'io.containerd.cri.v1.runtime'": {
            # This machine's root lacks CAP_SYS_RESOURCE: no process may lower its oom_score_adj, which
            # the pause container (-998) and Guaranteed pods (-997) would. Clamp to containerd's own.
            "restrict_oom_score_adj": True,
            # Pods' network namespaces under this node's state directory, not the shared /var/run/netns.
            "netns_mounts_under_state_dir": True,
        },
        "plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc": {
            "runtime_type": "io.containerd.runc.v2",
            "runtime_path": str(bin_dir / "containerd-shim-runc-v2"),
        },
        "plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options": {
            "BinaryName": str(runc),
            "SystemdCgroup": False,  # no systemd here (and kubelet learns the driver from this answer)
            "Root": str(paths.state / "runc"),
        },
        "plugins.'io.containerd.cri.v1.runtime'.cni": {
            "bin_dirs": [str(cni_dir)],
            "conf_dir": str(paths.cni_conf_dir),
        },
        "plugins.'io.containerd.grpc.v1.cri'": {
            "stream_server_address": "127.0.0.1",
            "stream_server_port": "0",
        },
    }
    lines: list[str] = []
    for table, values in tables.items():
        if table:
            lines.append(f"\n[{table}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def cni_config(paths: NodePaths) -> dict[str, object]:
    """A bridge with host-local addresses: the pods' network, routed by the node (no masquerading: pods
    only talk to the node and to each other)."""
    return {
        "cniVersion": "1.0.0",
        "name": "celkeeper",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,  # a pod reaching itself through its Service
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR, "gateway": POD_GATEWAY}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(paths.workdir / "cni" / "ipam"),
                },
            }
        ],
    }


def kubelet_config(
    paths: NodePaths, *, node_ip: str, cgroup_root: str, ca: Path, pki: Path
) -> dict[str, object]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node_ip,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "tlsCertFile": str(pki / "kubelet.crt"),
        "tlsPrivateKeyFile": str(pki / "kubelet.key"),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{paths.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{cgroup_root}",  # a root per node: two nodes on one machine keep their pods apart
        "failCgroupV1": False,  # the development machine runs cgroup v1: kubelet 1.35+ refuses it otherwise
        "failSwapOn": False,
        "oomScoreAdj": 0,  # kubelet's default, -999, needs CAP_SYS_RESOURCE (see containerd_config)
        "podLogsDirectory": str(paths.pod_logs),
        "clusterDomain": "cluster.local",
        "resolvConf": "/etc/resolv.conf",
        # A shared development machine's disk and memory are other people's too: evict only in extremis.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.inodesFree": "1%",
        },
        # Images here are imported, never pulled: garbage-collecting one would lose it.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "shutdownGracePeriod": "0s",
        "rotateCertificates": False,
        "registerNode": True,
    }


def kube_proxy_config(kubeconfig: Path) -> dict[str, object]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        # nftables: one table of its own (`ip kube-proxy`), in the node's network namespace.
        "mode": "nftables",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": NODE_NAME,
        "clusterCIDR": POD_CIDR,
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        "oomScoreAdj": 0,
        # Leave the machine-wide conntrack table size and timeouts alone.
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        "nftables": {"minSyncPeriod": "0s"},
    }


def write_json(path: Path, value: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
    return path
