"""pytest fixtures for tests that need a real node (loaded by tests/conftest.py).

- `node_cluster` (session): one NodeCluster (control plane, controllers, containerd, kubelet, kube-proxy)
  for the whole run, stopped at the end of the session, also when tests fail or the run is interrupted.
  Skips with the reason where the machine cannot run a node (not root, no cgroups, binaries or packages
  missing); with CELKEEPER_REQUIRE_NODE=1 (CI) that is a failure instead.
- `node_namespace` (function): a fresh namespace whose `default` ServiceAccount exists (Pods need it),
  deleted afterwards (the namespace controller finishes the deletion).

Tests that use `node_cluster` get the `node` marker automatically, so `-m "not node"` deselects them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from tests.support import cgroups
from tests.support.binaries import BinariesUnavailable, NodeBinaries, find_node_binaries
from tests.support.kube_fixtures import namespace_name
from tests.support.node import NodeCluster
from tests.support.requirements import NODE
from tests.support.waiting import wait_for


def machine_unsuitable() -> str | None:
    """Why this machine cannot run a test node, or None."""
    if not sys.platform.startswith("linux"):
        return "a node needs Linux"
    if os.geteuid() != 0:
        return "a node needs root (network namespaces, cgroups, mounts)"
    return cgroups.writable()


def _find() -> NodeBinaries:
    reason = machine_unsuitable()
    if reason:
        raise BinariesUnavailable(reason)
    return find_node_binaries()


def pytest_report_header(config: pytest.Config) -> str:
    del config

    def describe() -> str:
        found = _find()
        return f"kubelet, containerd and the rest in {found.bin_dir}, runc {found.runc}, CNI {found.cni_dir}"

    return NODE.header(describe)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    NODE.mark(items)


@pytest.fixture(scope="session")
def node_binaries() -> NodeBinaries:
    try:
        return _find()
    except BinariesUnavailable as exc:
        NODE.unavailable("a node", exc)


@pytest.fixture(scope="session")
def node_cluster(
    node_binaries: NodeBinaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NodeCluster]:
    """The session's cluster with a node; logs, configuration and kubeconfigs stay in pytest's tmp dir."""
    cluster = NodeCluster(tmp_path_factory.mktemp("node"), node_binaries)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def node_namespace(node_cluster: NodeCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    name = namespace_name(request.node.name)
    node_cluster.kubectl("create", "namespace", name)
    wait_for(
        lambda: (
            node_cluster.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0
        ),
        timeout=30,
        what=f"the default ServiceAccount of {name}",
    )
    yield name
    node_cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
