"""celkeeper's install, end to end on a real node: `kubectl apply -f deploy/celkeeper.yaml` runs N webhook
pods from the image built here (hack/image/build.sh); a constraint is enforced once all N pods have loaded
it; the API server calls the webhook through its Service and a violating Pod is refused with the
constraint's message; a rolling update never runs more than N pods and admission keeps answering; a
deleted pod is replaced and the garbage collector removes its status objects."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.node import install
from tests.support.kube_fixtures import namespace_name
from tests.support.node import NodeCluster
from tests.support.waiting import wait_for

STATUS_KINDS = (
    "constraintpodstatuses.status.celkeeper.io",
    "constrainttemplatepodstatuses.status.celkeeper.io",
)


@pytest.fixture(scope="module")
def installed(node_cluster: NodeCluster) -> Iterator[int]:
    """celkeeper installed with its example policy enforced by every pod; yields the number of pods."""
    install.prepare(node_cluster, "celkeeper's install", [install.MANIFEST], lambda: None)
    pods = install.replicas()
    install.install(node_cluster)
    try:
        install.wait_ready(node_cluster, pods)
        install.apply_template(node_cluster)
        install.apply_constraint(node_cluster, install.POLICY / "constraint.yaml")
        wait_for(lambda: install.enforced_by(node_cluster, pods), timeout=120, what="the constraint enforced")
        yield pods
    finally:
        install.uninstall(node_cluster)


def status_objects(node: NodeCluster) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for kind in STATUS_KINDS:
        items += node.kubectl_json("get", kind, "-n", install.NAMESPACE)["items"]
    return items


def owners(obj: dict[str, Any]) -> set[str]:
    return {ref["uid"] for ref in obj["metadata"].get("ownerReferences") or []}


def by_pod_ids(node: NodeCluster) -> set[str]:
    return {entry["id"] for entry in install.constraint_status(node).get("byPod") or []}


def test_every_webhook_pod_enforces_the_constraint_and_owns_its_status(
    node_cluster: NodeCluster, installed: int
) -> None:
    pods = install.wait_ready(node_cluster, installed)
    names = {p["metadata"]["name"] for p in pods}
    assert len(pods) == installed
    assert by_pod_ids(node_cluster) == names
    assert install.constraint_status(node_cluster)["enforced"] is True
    # Each pod's status objects name it as their owner (the garbage collector removes them with it).
    uids = {p["metadata"]["uid"] for p in pods}
    statuses = status_objects(node_cluster)
    assert {uid for s in statuses for uid in owners(s)} == uids
    assert all(len([s for s in statuses if uid in owners(s)]) == len(STATUS_KINDS) for uid in uids)


def test_a_violating_pod_is_denied_through_the_webhook_service(
    node_cluster: NodeCluster, installed: int, node_namespace: str
) -> None:
    del installed
    config = node_cluster.kubectl_json(
        "get", "validatingwebhookconfiguration", "celkeeper-validating-webhook-configuration"
    )
    client = config["webhooks"][0]["clientConfig"]
    assert client["service"]["name"] == "celkeeper-webhook-service" and "url" not in client
    assert client.get("caBundle"), "celkeeper injects its CA into the registration"

    proc = install.create(node_cluster, install.privileged_pod("privileged", node_namespace))
    assert proc.returncode != 0
    assert 'admission webhook "validation.celkeeper.io" denied the request' in proc.stderr
    assert install.DENIAL in proc.stderr

    fine = install.privileged_pod("fine", node_namespace)
    fine["spec"]["containers"][0]["securityContext"] = {
        "privileged": False,
        "allowPrivilegeEscalation": False,
    }
    assert install.create(node_cluster, fine).returncode == 0
    node_cluster.kubectl(
        "wait", "--for=condition=Ready", "pod/fine", "-n", node_namespace, "--timeout=120s", timeout=130
    )


@dataclass(frozen=True)
class Rollout:
    before: set[str]
    after: set[str]
    sampler: install.Sampler


@pytest.fixture(scope="module")
def rollout(node_cluster: NodeCluster, installed: int) -> Rollout:
    """A rolling update to a new image tag (the same image, tagged anew in containerd), sampled throughout."""
    namespace = namespace_name("rollout-probes")
    node_cluster.kubectl("create", "namespace", namespace)
    before = {p["metadata"]["name"] for p in install.wait_ready(node_cluster, installed)}
    image = install.webhook_pods(node_cluster)[0]["spec"]["containers"][0]["image"]
    node_cluster.ctr("images", "tag", image, f"{image}-rolled")
    deployment = f"deployment/{install.DEPLOYMENT}"
    with install.Sampler(node_cluster, namespace) as sampler:
        node_cluster.kubectl("set", "image", deployment, f"webhook={image}-rolled", "-n", install.NAMESPACE)
        node_cluster.kubectl(
            "rollout", "status", deployment, "-n", install.NAMESPACE, "--timeout=300s", timeout=310
        )
        after = {p["metadata"]["name"] for p in install.wait_ready(node_cluster, installed)}
        time.sleep(1)
    return Rollout(before, after, sampler)


def test_a_rolling_update_replaces_every_pod_never_above_n_live_pods(
    node_cluster: NodeCluster, installed: int, rollout: Rollout
) -> None:
    assert rollout.after and not rollout.after & rollout.before
    # maxSurge 0: never more than N pods that are not being deleted. (A pod being deleted still runs until
    # its container stops, and Deployments, 1.37, start its replacement meanwhile: counting those, N + 1
    # and N + 2 pods were seen, see the report of issue 15.)
    assert max(rollout.sampler.live) <= installed, rollout.sampler.live
    wait_for(
        lambda: install.enforced_by(node_cluster, installed) and by_pod_ids(node_cluster) == rollout.after,
        timeout=120,
        what="the constraint enforced by the new pods",
    )


@pytest.mark.xfail(
    reason="known issue (docs/known-issues.md): a pod stopping during a rolling update resets the API "
    "server's keep-alive connections to it, and with failurePolicy Ignore those few calls are allowed",
    strict=False,
)
def test_admission_answers_every_call_during_a_rolling_update(rollout: Rollout) -> None:
    verdicts = rollout.sampler.verdicts
    assert len(verdicts) >= 5, "the rollout was sampled"
    assert all(verdicts), (
        f"{verdicts.count(False)} of {len(verdicts)} violating creates were allowed during the rollout",
        rollout.sampler.errors,
    )


def test_a_deleted_pod_is_replaced_and_its_status_objects_collected(
    node_cluster: NodeCluster, installed: int, node_namespace: str
) -> None:
    pods = install.wait_ready(node_cluster, installed)
    victim = pods[0]["metadata"]
    assert [s for s in status_objects(node_cluster) if victim["uid"] in owners(s)]

    node_cluster.kubectl("delete", "pod", victim["name"], "-n", install.NAMESPACE, timeout=120)
    now = install.wait_ready(node_cluster, installed)
    names = {p["metadata"]["name"] for p in now}
    assert victim["name"] not in names

    wait_for(
        lambda: not [s for s in status_objects(node_cluster) if victim["uid"] in owners(s)],
        timeout=60,
        what="the deleted pod's status objects to be garbage-collected",
    )
    wait_for(
        lambda: install.enforced_by(node_cluster, installed) and by_pod_ids(node_cluster) == names,
        timeout=120,
        what="the constraint enforced again by the replacement",
    )
    assert install.denied(node_cluster, node_namespace)
