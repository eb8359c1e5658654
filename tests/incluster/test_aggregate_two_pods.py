"""Two `celkeeper serve` processes acting as two pods of one Deployment (--expected-pods 2): both show in
byPod, and a constraint reports enforced only once both have loaded its current generation. The pods
share no leader: both write CRDs and aggregated status, and the end state is the same."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.incluster.support import (
    KubeServe,
    by_pod,
    deployment_setting,
    get,
    pod_statuses,
    remove_templates,
    required_labels,
    required_labels_template,
    status,
)
from tests.support.apiserver import ControlPlane
from tests.support.kubectl import apply
from tests.support.waiting import wait_for

pytestmark = pytest.mark.kube


@pytest.fixture(scope="module")
def setting(kube_cluster: ControlPlane) -> Iterator[tuple[ControlPlane, str, Path]]:
    pod_namespace, kubeconfig = deployment_setting(kube_cluster, "celkeeper-pair")
    yield kube_cluster, pod_namespace, kubeconfig
    remove_templates(kube_cluster, "pairlabels")


@pytest.fixture
def pod_a(setting: tuple[ControlPlane, str, Path], tmp_path: Path) -> Iterator[KubeServe]:
    _, pod_namespace, kubeconfig = setting
    server = KubeServe(tmp_path / "a", kubeconfig, "pod-a", pod_namespace, expected_pods=2)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_a_constraint_is_enforced_only_when_both_pods_have_observed_it(
    setting: tuple[ControlPlane, str, Path], pod_a: KubeServe, tmp_path: Path
) -> None:
    cluster, pod_namespace, kubeconfig = setting
    kind = f"PairLabels{secrets.token_hex(3)}"
    apply(cluster, required_labels_template(kind))
    apply(cluster, required_labels(kind, "pair", ["owner"], ["somewhere"]))
    resource = kind.lower()

    wait_for(
        lambda: by_pod(cluster, resource, "pair").get("pod-a", {}).get("enforced"),
        timeout=20,
        what="pod-a to report the constraint",
    )
    time.sleep(1.0)  # a second of chances to (wrongly) report it enforced with one pod of two
    assert status(cluster, resource, "pair").get("enforced") is False
    assert set(by_pod(cluster, resource, "pair")) == {"pod-a"}

    pod_b = KubeServe(tmp_path / "b", kubeconfig, "pod-b", pod_namespace, expected_pods=2)
    pod_b.start()
    try:
        wait_for(
            lambda: status(cluster, resource, "pair").get("enforced") is True,
            timeout=30,
            what="enforced once both pods observed it",
        )
        entries = by_pod(cluster, resource, "pair")
        assert set(entries) == {"pod-a", "pod-b"}
        assert all(e["enforced"] and e["observedGeneration"] == 1 for e in entries.values())
        assert all(e["expectedPods"] == 2 for e in entries.values())  # kept by the CRD's schema
        wait_for(
            lambda: set(by_pod(cluster, "constrainttemplate", resource)) == {"pod-a", "pod-b"},
            timeout=20,
            what="both pods in the template's byPod",
        )

        # a new generation: not enforced until both pods have it again
        apply(cluster, required_labels(kind, "pair", ["owner", "team"], ["somewhere"]))
        constraint = get(cluster, resource, "pair")
        assert constraint is not None and constraint["metadata"]["generation"] == 2

        def both_at_2() -> bool:
            entries = by_pod(cluster, resource, "pair")
            return {e["observedGeneration"] for e in entries.values()} == {2} and len(entries) == 2

        wait_for(both_at_2, timeout=30, what="both pods at generation 2")
        wait_for(
            lambda: status(cluster, resource, "pair").get("enforced") is True,
            timeout=20,
            what="generation 2 enforced",
        )

        # each pod wrote exactly its own status objects
        mine = [
            s
            for s in pod_statuses(cluster, pod_namespace)
            if s["metadata"]["labels"]["internal.celkeeper.io/constraint-kind"] == kind
        ]
        assert sorted(s["status"]["id"] for s in mine) == ["pod-a", "pod-b"]

        # one pod gone and its status object removed (a Deployment scaled down, GC'd): no longer enforced
        pod_b.stop()
        for s in mine:
            if s["status"]["id"] == "pod-b":
                cluster.kubectl("delete", "constraintpodstatus", s["metadata"]["name"], "-n", pod_namespace)
        wait_for(
            lambda: status(cluster, resource, "pair").get("enforced") is False,
            timeout=20,
            what="enforced to turn false with one pod of two",
        )
        assert set(by_pod(cluster, resource, "pair")) == {"pod-a"}
    finally:
        pod_b.stop()
