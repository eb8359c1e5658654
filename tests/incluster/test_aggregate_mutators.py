"""Gatekeeper's mutators' per-pod status on a real kube-apiserver: two `celkeeper serve` processes acting as
two pods (--expected-pods 2, the webhook's own RBAC from deploy/celkeeper.yaml) each write a
MutatorPodStatus per mutator - enforced for a mutator Gatekeeper's System applies, Gatekeeper's error for
one it refuses, `ErrConflictingSchema` for each of two mutators whose schemas conflict - and the mutator's
own `status.byPod` gathers both pods' entries (Gatekeeper's MutatorPodStatusStatus fields); deleting a
mutator removes its pod statuses."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import celkeeper
from tests.incluster.support import KubeServe, by_pod, deployment_setting, get, pod_statuses
from tests.support.apiserver import ControlPlane
from tests.support.kubectl import apply, wait_established
from tests.support.waiting import wait_for

pytestmark = pytest.mark.kube

MUTATOR_CRDS = Path(celkeeper.__file__).parent / "native" / "go" / "mutation" / "crds"


def _assign(name: str, location: str, value: Any, kinds: tuple[str, ...] = ("Pod",)) -> dict[str, Any]:
    return {
        "apiVersion": "mutations.gatekeeper.sh/v1",
        "kind": "Assign",
        "metadata": {"name": name},
        "spec": {
            "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": list(kinds)}],
            "location": location,
            "parameters": {"assign": {"value": value}},
        },
    }


@pytest.fixture(scope="module")
def setting(kube_cluster: ControlPlane) -> Iterator[tuple[ControlPlane, str, Path]]:
    kube_cluster.kubectl("apply", "-f", str(MUTATOR_CRDS))
    for plural in ("assign", "assignmetadata", "modifyset", "assignimage"):
        wait_established(kube_cluster, f"{plural}.mutations.gatekeeper.sh")
    pod_namespace, kubeconfig = deployment_setting(kube_cluster, "celkeeper-mutators")
    yield kube_cluster, pod_namespace, kubeconfig


@pytest.fixture
def pods(setting: tuple[ControlPlane, str, Path], tmp_path: Path) -> Iterator[list[KubeServe]]:
    _, pod_namespace, kubeconfig = setting
    started: list[KubeServe] = []
    try:
        for name in ("pod-a", "pod-b"):
            started.append(
                KubeServe(tmp_path / name, kubeconfig, name, pod_namespace, expected_pods=2).start()
            )
        yield started
    finally:
        for server in started:
            server.stop()


def _mine(cluster: ControlPlane, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    found = pod_statuses(cluster, namespace, "mutatorpodstatuses.status.celkeeper.io")
    return {
        s["status"]["id"]: s["status"]
        for s in found
        if s["metadata"]["labels"].get("internal.celkeeper.io/mutator-name") == name
    }


def test_each_pod_reports_each_mutator_and_the_mutator_gathers_them(
    setting: tuple[ControlPlane, str, Path], pods: list[KubeServe]
) -> None:
    cluster, pod_namespace, _ = setting
    suffix = secrets.token_hex(3)
    fine, refused = f"pull-{suffix}", f"refused-{suffix}"
    list_side, map_side = f"as-list-{suffix}", f"as-map-{suffix}"
    apply(cluster, _assign(fine, "spec.containers[name:*].imagePullPolicy", "Always"))
    # valid for the CRD's schema, refused by Gatekeeper: Assign may not change metadata
    apply(cluster, _assign(refused, "metadata.labels.team", "x"))
    # one reads spec.volumes as a keyed list, the other as a map: Gatekeeper applies neither
    apply(cluster, _assign(list_side, "spec.volumes[name:data].emptyDir", {}, ("Pod",)))
    apply(cluster, _assign(map_side, "spec.volumes.data", "x", ("Pod",)))

    def reported(name: str, enforced: bool) -> dict[str, dict[str, Any]] | None:
        """Both pods' statuses of the mutator once both say `enforced` (a pod may first report a snapshot
        from before the other mutators arrived: the conflicting pair is applied one after the other)."""
        found = _mine(cluster, pod_namespace, name)
        done = set(found) == {"pod-a", "pod-b"} and all(s["enforced"] is enforced for s in found.values())
        return found if done else None

    expected = {fine: True, refused: False, list_side: False, map_side: False}
    statuses = {
        name: wait_for(
            lambda n=name, e=enforced: reported(n, e), timeout=60, what=f"both pods to report {name}"
        )
        for name, enforced in expected.items()
    }
    assert all(s["enforced"] and "errors" not in s for s in statuses[fine].values())
    assert all(s["expectedPods"] == 2 and s["observedGeneration"] == 1 for s in statuses[fine].values())
    for status in statuses[refused].values():
        assert status["enforced"] is False
        assert "metadata" in status["errors"][0]["message"], status
    for name in (list_side, map_side):
        for status in statuses[name].values():
            assert status["enforced"] is False
            assert status["errors"][0]["type"] == "ErrConflictingSchema", status

    # the mutator's status: Gatekeeper's byPod, every pod
    wait_for(lambda: set(by_pod(cluster, "assign", fine)) == {"pod-a", "pod-b"}, timeout=30, what="byPod")
    entries = by_pod(cluster, "assign", fine)
    stored = get(cluster, "assign", fine)
    assert stored is not None
    uid = stored["metadata"]["uid"]
    assert all(
        e
        == {
            "id": e["id"],
            "mutatorUID": uid,
            "operations": ["mutation-webhook"],
            "observedGeneration": 1,
            "enforced": True,
        }
        for e in entries.values()
    ), entries
    wait_for(lambda: len(by_pod(cluster, "assign", map_side)) == 2, timeout=30, what="conflict byPod")
    assert all(
        e["errors"][0]["type"] == "ErrConflictingSchema" and "enforced" not in e
        for e in by_pod(cluster, "assign", map_side).values()
    )

    # resolved: the conflict gone, the other mutator is enforced again; a deleted mutator's statuses go
    cluster.kubectl("delete", "assign", map_side)
    wait_for(
        lambda: all(s.get("enforced") for s in _mine(cluster, pod_namespace, list_side).values()),
        timeout=60,
        what="the conflict to be resolved",
    )
    wait_for(lambda: not _mine(cluster, pod_namespace, map_side), timeout=60, what="statuses deleted")
    for name in (fine, refused, list_side):
        cluster.kubectl("delete", "assign", name)
