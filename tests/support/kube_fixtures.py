"""pytest fixtures for tests that need a real kube-apiserver (loaded by tests/conftest.py).

- `kube_cluster` (session): one ControlPlane (etcd + kube-apiserver) for the whole run, stopped at the
  end of the session, also when tests fail or the run is interrupted with ^C. Skips with the reason when
  the binaries are missing (no Go, not built); with CELKEEPER_REQUIRE_KUBE=1 that is a failure instead.
- `kube_namespace` (function): a fresh namespace per test, deleted afterwards (without a controller
  manager it stays Terminating, which is harmless: every test gets a new name).

Tests that use `kube_cluster` get the `kube` marker automatically, so `-m "not kube"` deselects them.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator

import pytest

from tests.support.apiserver import ControlPlane
from tests.support.binaries import BinariesUnavailable, KubeBinaries, find_binaries
from tests.support.requirements import KUBE

REQUIRE_ENV = KUBE.env  # CELKEEPER_REQUIRE_KUBE, for the fixtures that follow the same rule


def pytest_report_header(config: pytest.Config) -> str:
    del config

    def describe() -> str:
        found = find_binaries()
        where = found.kube_apiserver.parent
        return f"kube-apiserver v{found.kube_version} in {where}, kubectl {found.kubectl}"

    return KUBE.header(describe)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    KUBE.mark(items)


@pytest.fixture(scope="session")
def kube_binaries() -> KubeBinaries:
    try:
        return find_binaries()
    except BinariesUnavailable as exc:
        KUBE.unavailable("the control plane", exc)


@pytest.fixture(scope="session")
def kube_cluster(
    kube_binaries: KubeBinaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """The session's control plane; logs, certificates and kubeconfig stay in pytest's tmp dir."""
    cluster = ControlPlane(tmp_path_factory.mktemp("kube"), kube_binaries)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def namespace_name(test_name: str) -> str:
    """A valid, unique namespace name derived from a test's name."""
    base = re.sub(r"[^a-z0-9]+", "-", test_name.lower()).strip("-")
    base = re.sub(r"^test-", "", base)[:48].strip("-") or "t"
    return f"t-{base}-{secrets.token_hex(3)}"


@pytest.fixture
def kube_namespace(kube_cluster: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of its own for this test (the kubeconfig's default namespace stays `default`)."""
    from kubernetes import client

    core = client.CoreV1Api(kube_cluster.api_client)
    name = namespace_name(request.node.name)
    core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels={"celkeeper-test": "true"}))
    )
    yield name
    try:
        core.delete_namespace(name)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
