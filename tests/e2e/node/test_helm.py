"""celkeeper's Helm chart, installed on the real node with the real `helm` (hack/helm/build.sh) as a user
would (`helm install celkeeper charts/celkeeper -n celkeeper-system --create-namespace`), then the same
checks as the manifest's (tests/e2e/node/test_install.py): N ready pods, the constraint enforced by all, a
violating Pod denied through the webhook's Service; `helm uninstall` removes the release."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.node import install
from tests.support.binaries import ROOT, BinariesUnavailable
from tests.support.node import NodeCluster
from tests.support.waiting import wait_for

CHART = ROOT / "charts" / "celkeeper"
HELM_BUILD = ROOT / "hack" / "helm" / "build.sh"
RELEASE = "celkeeper"


def find_helm() -> Path:
    proc = subprocess.run(
        [str(HELM_BUILD), "--print"], capture_output=True, text=True, check=False, timeout=60
    )
    helm = (
        Path(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 and proc.stdout.strip() else None
    )
    if helm is None or not helm.is_file():
        raise BinariesUnavailable(f"helm is not built: run {HELM_BUILD}")
    return helm


class Helm:
    def __init__(self, binary: Path, node: NodeCluster) -> None:
        self.binary, self.node = binary, node

    def __call__(
        self, *args: str, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        env = self.node.cluster.kubectl_env()
        env["HELM_CACHE_HOME"] = env["HELM_CONFIG_HOME"] = env["HELM_DATA_HOME"] = str(
            self.node.workdir / "helm"
        )
        cmd = [str(self.binary), *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc


@pytest.fixture(scope="module")
def helm_release(node_cluster: NodeCluster) -> Iterator[Helm]:
    binary = install.prepare(node_cluster, "the chart's install", [CHART, HELM_BUILD], find_helm)
    helm = Helm(binary, node_cluster)
    # the README's command: Helm makes the namespace (it stores the release there before the chart's objects,
    # so the chart does not render a Namespace of its own unless createNamespace=true, as for the manifest)
    helm("install", RELEASE, str(CHART), "--namespace", install.NAMESPACE, "--create-namespace")
    try:
        # until its pods are ready, celkeeper refuses namespace creates and updates (the ignore-label guard
        # fails closed, as Gatekeeper's does): the tests' namespaces are made after that, as the README says
        install.wait_ready(node_cluster, install.replicas())
        yield helm
    finally:
        node_cluster.kubectl("delete", "constrainttemplates.templates.celkeeper.io", "--all", check=False)
        helm("uninstall", RELEASE, "--namespace", install.NAMESPACE, check=False)
        # the release's pods stopped at once (a test's teardown needs no preStop sleep nor drain), then
        # their namespace gone
        node_cluster.kubectl(
            "delete",
            "pods",
            "--all",
            "-n",
            install.NAMESPACE,
            "--force",
            "--grace-period=0",
            "--wait=false",
            check=False,
        )
        node_cluster.kubectl(
            "delete", "namespace", install.NAMESPACE, "--ignore-not-found", check=False, timeout=180
        )
        node_cluster.kubectl(
            "delete", "-f", str(ROOT / "crds"), "--ignore-not-found", check=False, timeout=120
        )


def test_helm_install_runs_n_pods_that_enforce_and_deny(
    node_cluster: NodeCluster, helm_release: Helm, node_namespace: str
) -> None:
    pods = (
        install.replicas()
    )  # the chart's default replicas render the manifest's (issue 14 checks they agree)
    install.wait_ready(node_cluster, pods)
    install.apply_template(node_cluster)
    install.apply_constraint(node_cluster, install.POLICY / "constraint.yaml")
    wait_for(lambda: install.enforced_by(node_cluster, pods), timeout=120, what="the constraint enforced")

    proc = install.create(node_cluster, install.privileged_pod("privileged", node_namespace))
    assert proc.returncode != 0 and install.DENIAL in proc.stderr, proc.stderr
    assert "STATUS: deployed" in helm_release("status", RELEASE, "--namespace", install.NAMESPACE).stdout
