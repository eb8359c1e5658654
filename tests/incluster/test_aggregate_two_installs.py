"""Two celkeeper installs in one cluster (each its own namespace for its pods' status objects), over the
same constraint: each computes byPod from its own pods, so each write of one is undone by the other.
Without a back-off that is a write per watch event, without end. Each install must notice, say so once,
and write the contested status only now and then, while its own view stays what it computes."""

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
    remove_templates,
    required_labels,
    required_labels_template,
)
from tests.support.apiserver import ControlPlane
from tests.support.kubectl import apply
from tests.support.waiting import wait_for

pytestmark = pytest.mark.kube

CONTESTED = "is rewritten by another writer"


@pytest.fixture
def two_installs(kube_cluster: ControlPlane, tmp_path: Path) -> Iterator[tuple[KubeServe, KubeServe]]:
    servers = []
    try:
        for name in ("one", "two"):
            namespace, kubeconfig = deployment_setting(kube_cluster, f"celkeeper-{name}")
            server = KubeServe(tmp_path / name, kubeconfig, f"pod-{name}", namespace)
            server.start()
            servers.append(server)
        yield servers[0], servers[1]
    finally:
        for server in servers:
            server.stop()
        remove_templates(kube_cluster, "contestedlabels")


def test_two_installs_do_not_rewrite_a_constraints_status_without_end(
    kube_cluster: ControlPlane, two_installs: tuple[KubeServe, KubeServe]
) -> None:
    one, two = two_installs
    kind = f"ContestedLabels{secrets.token_hex(3)}"
    apply(kube_cluster, required_labels_template(kind))
    apply(kube_cluster, required_labels(kind, "contested", ["owner"], ["somewhere"]))
    resource = kind.lower()

    def contested() -> bool:
        return any(CONTESTED in s.full_log() for s in (one, two)) and bool(
            by_pod(kube_cluster, resource, "contested")
        )

    wait_for(
        contested,
        timeout=60,
        what="an install to find the constraint's status contested",
    )

    # from here, count the distinct versions of the constraint over a while: every write is one
    versions: set[str] = set()
    ids: set[str] = set()
    end = time.monotonic() + 8.0
    while time.monotonic() < end:
        constraint = get(kube_cluster, resource, "contested")
        assert constraint is not None
        versions.add(constraint["metadata"]["resourceVersion"])
        ids.update(e["id"] for e in constraint.get("status", {}).get("byPod", []))
        time.sleep(0.05)
    # two back-offs doubling from 2 s: a handful of writes in 8 s (unbounded, it is one per round trip)
    assert len(versions) <= 8, f"{len(versions)} versions of the constraint in 8 s"
    assert ids <= {"pod-one", "pod-two"}  # each install writes only its own pods' entries
    objects = (f"ConstraintTemplate {resource}", f"{kind} contested")  # as the warning names them
    logs = [server.full_log() for server in (one, two)]
    assert any(f"{obj} {CONTESTED}" in log for log in logs for obj in objects)
    for log in logs:  # said once per object, not once per write
        for obj in objects:
            assert log.count(f"{obj} {CONTESTED}") <= 1, obj
