"""A network namespace of its own for a test cluster with a node, joined to the host by a veth pair.

The node's whole cluster (etcd, kube-apiserver, the controllers, containerd, kubelet, kube-proxy and the
pods' bridge) runs inside it, so that what a node does to networking (a bridge, nftables rules,
forwarding) stays out of the machine's own namespace, and two clusters on one machine (two test runs)
never meet: each has its own ports, bridge and rules. The host reaches it at `inner_ip` (the API
server binds there), over a /30 from 100.64.0.0/10 that no route of the host uses.

Only the network is separated: processes started with `wrap()` (nsenter --net) share the machine's
mounts, so kubelet's volume mounts are the ones containerd and runc see.
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import secrets
import subprocess
from collections.abc import Sequence
from pathlib import Path

NETNS_DIR = Path("/run/netns")
_POOL = ipaddress.ip_network("100.64.0.0/10")


class NetnsError(RuntimeError):
    """The namespace could not be made; the message carries the failing command and its output."""


def _ip(*args: str, netns: str | None = None) -> str:
    cmd = ["ip", *(("-n", netns) if netns else ()), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=30)
    if proc.returncode != 0:
        raise NetnsError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def _used_networks() -> list[ipaddress.IPv4Network]:
    used = []
    for route in json.loads(_ip("-j", "-4", "route", "show", "table", "all") or "[]"):
        dst = route.get("dst", "")
        if dst in ("", "default") or ":" in dst:
            continue
        try:
            used.append(ipaddress.ip_network(dst if "/" in dst else f"{dst}/32", strict=False))
        except ValueError:
            continue
    return [n for n in used if isinstance(n, ipaddress.IPv4Network)]


def _free_subnet() -> ipaddress.IPv4Network:
    used = _used_networks()
    rng = random.Random(secrets.randbits(64))
    for _ in range(200):
        candidate = ipaddress.ip_network(
            (int(_POOL.network_address) + 4 * rng.randrange(_POOL.num_addresses // 4), 30)
        )
        assert isinstance(candidate, ipaddress.IPv4Network)
        if not any(candidate.overlaps(n) for n in used):
            return candidate
    raise NetnsError(f"no free /30 in {_POOL}")


class NetworkNamespace:
    """`ck-<hex>`: created by create(), removed by delete() once nothing runs in it."""

    def __init__(self) -> None:
        token = secrets.token_hex(4)
        self.name = f"ck-{token}"
        self.host_if = f"ck{token}h"
        self.inner_if = "eth0"
        self.subnet: ipaddress.IPv4Network | None = None
        self.host_ip = ""
        self.inner_ip = ""

    @property
    def path(self) -> Path:
        return NETNS_DIR / self.name

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside the namespace (nsenter execs it: same pid, same process group)."""
        return ["nsenter", f"--net={self.path}", "--", *argv]

    def create(self) -> NetworkNamespace:
        _ip("netns", "add", self.name)
        try:
            self.subnet = _free_subnet()
            hosts = list(self.subnet.hosts())
            self.host_ip, self.inner_ip = str(hosts[0]), str(hosts[1])
            _ip(
                "link", "add", self.host_if, "type", "veth", "peer", "name", self.inner_if, "netns", self.name
            )
            _ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
            _ip("link", "set", self.host_if, "up")
            _ip("link", "set", "lo", "up", netns=self.name)
            _ip("addr", "add", f"{self.inner_ip}/30", "dev", self.inner_if, netns=self.name)
            _ip("link", "set", self.inner_if, "up", netns=self.name)
            _ip("route", "add", "default", "via", self.host_ip, netns=self.name)
            self.sysctl("net/ipv4/ip_forward", "1")
            self.sysctl("net/bridge/bridge-nf-call-iptables", "1")
        except BaseException:
            self.delete()
            raise
        return self

    def sysctl(self, key: str, value: str) -> None:
        """Write /proc/sys/<key> as seen from inside the namespace (net.* settings are per namespace)."""
        cmd = self.wrap(["sh", "-c", f"echo {value} > /proc/sys/{key}"])
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=30)
        if proc.returncode != 0:
            raise NetnsError(f"setting {key}={value} in {self.name}: {proc.stderr.strip()}")

    def exists(self) -> bool:
        return self.path.exists()

    def delete(self) -> None:
        """Remove the namespace (its end of the veth pair takes the host's end with it). Idempotent."""
        if self.exists():
            subprocess.run(["ip", "netns", "delete", self.name], capture_output=True, check=False, timeout=30)
        if os.path.exists(f"/sys/class/net/{self.host_if}"):
            subprocess.run(
                ["ip", "link", "delete", self.host_if], capture_output=True, check=False, timeout=30
            )
