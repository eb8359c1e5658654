"""Watches survive the real world: the API server restarts while etcd is compacted past every
resourceVersion celkeeper holds, so every watch resumes into 410 Gone and relists. Changes made right
after the restart (a constraint deleted, one changed, one added) all arrive, each exactly once: no
policy is lost, none is duplicated, and the per-pod status follows.

Uses a control plane of its own (restarting the session's would disturb other tests).
"""

from __future__ import annotations

import base64
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.incluster.support import (
    KubeServe,
    by_pod,
    configmap,
    create_namespace,
    etcd_compact,
    install_crds,
    pod_statuses,
    required_labels,
    required_labels_template,
    status,
)
from tests.support.apiserver import ControlPlane
from tests.support.binaries import KubeBinaries
from tests.support.kubectl import apply
from tests.support.serve import review
from tests.support.waiting import wait_for

pytestmark = pytest.mark.kube

KIND = "ExpiryLabels"


@pytest.fixture(scope="module")
def cluster(kube_binaries: KubeBinaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = ControlPlane(tmp_path_factory.mktemp("kube-expiry"), kube_binaries)
    try:
        plane.start()
        yield plane
    finally:
        plane.stop()


def etcd_put(cluster: ControlPlane, key: str) -> None:
    body = {"key": base64.b64encode(key.encode()).decode(), "value": base64.b64encode(b"x").decode()}
    request = urllib.request.Request(
        cluster.etcd_url + "/v3/kv/put", data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


def denials(server: KubeServe, namespace: str) -> list[str]:
    code, body = server.admit(review(configmap("probe", namespace)))
    assert code == 200, body
    message = (body["response"].get("status") or {}).get("message") or ""
    return sorted(line for line in message.splitlines() if line.startswith("["))


def test_no_policy_is_lost_or_duplicated_across_an_expired_watch(
    cluster: ControlPlane, tmp_path: Path
) -> None:
    install_crds(cluster)
    pod_namespace = create_namespace(cluster, "celkeeper-system")
    namespace = create_namespace(cluster, "apps")
    server = KubeServe(tmp_path / "pod", cluster.kubeconfig_path, "pod-x", pod_namespace)
    server.start()
    try:
        apply(cluster, required_labels_template(KIND))
        apply(cluster, required_labels(KIND, "keep-a", ["a"], [namespace]))
        apply(cluster, required_labels(KIND, "keep-b", ["b"], [namespace]))
        wait_for(
            lambda: (
                denials(server, namespace) == ["[keep-a] missing labels: a", "[keep-b] missing labels: b"]
            ),
            timeout=20,
            what="both constraints enforced",
        )
        wait_for(
            lambda: status(cluster, "expirylabels", "keep-b").get("enforced") is True,
            timeout=20,
            what="status.enforced",
        )

        def compact_everything() -> None:
            etcd_put(cluster, "/celkeeper-test/after-every-watch")  # a revision newer than any watch holds
            etcd_compact(cluster)

        cluster.restart_apiserver(while_down=compact_everything)
        # at once, before celkeeper's watches are back: delete one, change one, add one
        cluster.kubectl("delete", "expirylabels", "keep-a")
        apply(cluster, required_labels(KIND, "keep-b", ["b2"], [namespace]))
        apply(cluster, required_labels(KIND, "new-c", ["c"], [namespace]))

        wait_for(
            lambda: (
                denials(server, namespace) == ["[keep-b] missing labels: b2", "[new-c] missing labels: c"]
            ),
            timeout=45,
            what="the changes made after the restart",
        )
        snapshot = server.snapshot()
        assert snapshot is not None
        names = [item.name for item in snapshot.items]
        assert len(names) == len(set(names))
        assert sorted(n for n in names if KIND in n or KIND.lower() in n) == [
            "constraint/ExpiryLabels/keep-b",
            "constraint/ExpiryLabels/new-c",
            "constrainttemplate/expirylabels",
        ]
        assert "410 Gone" in server.full_log(), "no watch expired: the test did not provoke what it must"

        def statuses() -> dict[str, int]:
            return {
                s["metadata"]["labels"]["internal.celkeeper.io/constraint-name"]: s["status"][
                    "observedGeneration"
                ]
                for s in pod_statuses(cluster, pod_namespace)
            }

        wait_for(
            lambda: statuses() == {"keep-b": 2, "new-c": 1},
            timeout=30,
            what="pod status of exactly keep-b (generation 2) and new-c",
        )

        def keep_b_generation() -> object:
            return by_pod(cluster, "expirylabels", "keep-b").get("pod-x", {}).get("observedGeneration")

        wait_for(lambda: keep_b_generation() == 2, timeout=30, what="keep-b's byPod at generation 2")
        wait_for(
            lambda: status(cluster, "expirylabels", "new-c").get("enforced") is True,
            timeout=30,
            what="new-c enforced",
        )
    finally:
        server.stop()
