"""celkeeper's install, end to end on a real node: `kubectl apply -f deploy/celkeeper.yaml` runs N webhook
pods from the image built here (hack/image/build.sh); a constraint is enforced once all N pods have loaded
it; the API server calls the webhook through its Service and a violating Pod is refused with the
constraint's message; a rolling update never runs more than N pods and admission keeps answering; a
deleted pod is replaced and the garbage collector removes its status objects; the audit Deployment writes
the violations of objects that already exist on each constraint's status."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.e2e.node import install
from tests.support.binaries import ROOT
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
    t0 = time.monotonic()
    install.install(node_cluster)
    try:
        install.wait_ready(node_cluster, pods)
        ready = time.monotonic() - t0
        install.apply_template(node_cluster)
        install.apply_constraint(node_cluster, install.POLICY / "constraint.yaml")
        install.time_until(lambda: install.denied(node_cluster, "default"), 120, "the first denial")
        denial = time.monotonic() - t0
        install.time_until(lambda: install.enforced_by(node_cluster, pods), 120, "the constraint enforced")
        # The figures issue 15 asks for, from this run (shown with -rP; bench/node_install.py measures them
        # properly, applying the policy with the install rather than once the pods are ready).
        print(
            f"node warm start {node_cluster.startup_seconds['total']:.1f} s; kubectl apply of the install to "
            f"{pods} ready pods {ready:.1f} s, to the first denial (policy applied then) {denial:.1f} s, "
            f"to ENFORCED by {pods} pods {time.monotonic() - t0:.1f} s"
        )
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


LABELS_TEMPLATE = ROOT / "examples" / "required-labels" / "template.yaml"
LABELS_KIND = "CKRequiredLabels"
AUDITED = {"audited-by-node-test": "yes"}


def config_map(name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace, "labels": labels}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


def labels_constraint(name: str, action: str, namespace: str) -> dict[str, Any]:
    """ConfigMaps labelled AUDITED in `namespace` must carry the label `owner`."""
    return {
        "apiVersion": "constraints.celkeeper.io/v1beta1",
        "kind": LABELS_KIND,
        "metadata": {"name": name},
        "spec": {
            "enforcementAction": action,
            "match": {
                "kinds": [{"apiGroups": [""], "kinds": ["ConfigMap"]}],
                "namespaces": [namespace],
                "labelSelector": {"matchLabels": AUDITED},
            },
            "parameters": {"labels": [{"key": "owner"}]},
        },
    }


def unowned(name: str, namespace: str, action: str) -> dict[str, Any]:
    """The status.violations entry the audit writes for ConfigMap `name`."""
    return {
        "group": "",
        "version": "v1",
        "kind": "ConfigMap",
        "name": name,
        "namespace": namespace,
        "message": f"ConfigMap {name} is missing required labels: owner",
        "enforcementAction": action,
    }


def audited_since(node: NodeCluster, since: datetime, *names: str) -> list[dict[str, Any]] | None:
    """The statuses of constraints `names` once each carries an audit run that started at `since` or later."""
    statuses = [install.constraint_status(node, name, LABELS_KIND) for name in names]
    stamps = [s.get("auditTimestamp") for s in statuses]
    if all(stamps) and all(datetime.fromisoformat(str(t)) >= since for t in stamps):
        return statuses
    return None


def test_a_deployment_s_pods_are_mutated_before_they_are_validated(
    node_cluster: NodeCluster, installed: int, node_namespace: str
) -> None:
    """Gatekeeper's mutators through the installed MutatingWebhookConfiguration on a real node: the
    ReplicaSet controller's Pods of a Deployment whose template runs privileged are mutated (privileged
    set false, a label added) before the validating webhook sees them, so the example policy admits them
    and they run; without the mutator they are denied."""
    mutators: list[dict[str, Any]] = [
        {
            "apiVersion": "mutations.gatekeeper.sh/v1",
            "kind": "Assign",
            "metadata": {"name": f"unprivileged-{node_namespace[-6:]}"},
            "spec": {
                "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                "match": {"namespaces": [node_namespace]},
                "location": "spec.containers[name:*].securityContext.privileged",
                "parameters": {"assign": {"value": False}},
            },
        },
        {
            "apiVersion": "mutations.gatekeeper.sh/v1",
            "kind": "AssignMetadata",
            "metadata": {"name": f"label-{node_namespace[-6:]}"},
            "spec": {
                "match": {"namespaces": [node_namespace]},
                "location": "metadata.labels.mutated-by",
                "parameters": {"assign": {"value": "celkeeper"}},
            },
        },
    ]
    template = install.privileged_pod("web", node_namespace)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": node_namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": template["spec"]},
        },
    }
    assert install.create(node_cluster, template).returncode != 0  # privileged: denied without mutators
    node_cluster.kubectl("apply", "-f", "-", input={"apiVersion": "v1", "kind": "List", "items": mutators})
    try:
        # kubectl applies the List's items one by one, so a pod may serve the first mutator a snapshot
        # before the second: wait for both to be enforced by every pod, as a user would (byPod).
        wait_for(
            lambda: all(
                install.mutator_enforced_by(node_cluster, installed, m["kind"], m["metadata"]["name"])
                for m in mutators
            ),
            timeout=60,
            interval=1,
            what="the mutators enforced by every pod",
        )
        assert install.create(node_cluster, template, "--dry-run=server").returncode == 0
        node_cluster.kubectl("apply", "-f", "-", input=deployment)
        node_cluster.kubectl(
            "rollout", "status", "deployment/web", "-n", node_namespace, "--timeout=120s", timeout=130
        )
        pods = node_cluster.kubectl_json("get", "pods", "-n", node_namespace, "-l", "app=web")["items"]
        assert len(pods) == 1
        assert pods[0]["metadata"]["labels"]["mutated-by"] == "celkeeper"
        assert pods[0]["spec"]["containers"][0]["securityContext"]["privileged"] is False
    finally:
        for mutator in mutators:
            node_cluster.kubectl("delete", mutator["kind"].lower(), mutator["metadata"]["name"], check=False)


def test_the_audit_deployment_reports_violations_of_existing_objects(
    node_cluster: NodeCluster, installed: int, node_namespace: str
) -> None:
    """Objects made before their constraint (deny) and objects the webhook let through (dryrun) are found
    by the installed audit pod, which writes them on each constraint's status and its printer columns."""
    earlier, dryrun = node_namespace, namespace_name("audit-dryrun")
    node_cluster.kubectl("create", "namespace", dryrun)
    try:
        existing = [config_map(f"unowned-{i}", earlier, AUDITED) for i in range(3)]
        existing += [config_map("owned", earlier, {**AUDITED, "owner": "platform"})]
        existing += [config_map("unselected", earlier, {})]
        node_cluster.kubectl("create", "-f", "-", input=existing)
        node_cluster.kubectl("apply", "-f", str(LABELS_TEMPLATE))
        t0 = time.monotonic()
        install.apply_constraint(node_cluster, labels_constraint("audit-deny", "deny", earlier))
        install.apply_constraint(node_cluster, labels_constraint("audit-dryrun", "dryrun", dryrun))
        for name in ("audit-deny", "audit-dryrun"):
            install.time_until(
                lambda n=name: install.enforced_by(node_cluster, installed, n, LABELS_KIND),
                120,
                f"{name} enforced",
            )
        print(f"2 new constraints to ENFORCED by {installed} pods: {time.monotonic() - t0:.1f} s")
        # Admission now: a deny violation is refused, a dryrun one let through (only the audit reports it).
        refused = install.create(node_cluster, config_map("unowned-late", earlier, AUDITED))
        assert refused.returncode != 0 and "is missing required labels: owner" in refused.stderr
        assert install.create(node_cluster, config_map("unowned", dryrun, AUDITED)).returncode == 0

        # A run now: the audit pod audits at start, and its Deployment (Recreate) replaces a deleted pod.
        old = {p["metadata"]["name"] for p in install.audit_pods(node_cluster)}
        assert len(old) == 1, old
        since = datetime.now(UTC).replace(microsecond=0)
        node_cluster.kubectl(
            "delete", "pod", "-n", install.NAMESPACE, "-l", install.AUDIT_SELECTOR, timeout=120
        )
        statuses = wait_for(
            lambda: audited_since(node_cluster, since, "audit-deny", "audit-dryrun"),
            timeout=180,
            interval=1,
            what="a new audit run on both constraints",
        )
        assert {p["metadata"]["name"] for p in install.audit_pods(node_cluster)}.isdisjoint(old)

        assert statuses is not None
        deny, dry = statuses
        assert deny["totalViolations"] == 3
        assert sorted(deny["violations"], key=lambda v: v["name"]) == [
            unowned(f"unowned-{i}", earlier, "deny") for i in range(3)
        ]
        assert dry["totalViolations"] == 1
        assert dry["violations"] == [unowned("unowned", dryrun, "dryrun")]
        # what the webhook pods aggregate on the same status is kept
        assert deny["enforced"] is True and dry["enforced"] is True

        table = node_cluster.kubectl("get", f"{LABELS_KIND.lower()}.constraints.celkeeper.io").stdout
        header, *rows = [line.split() for line in table.splitlines()]
        assert header[:4] == ["NAME", "ENFORCEMENT-ACTION", "TOTAL-VIOLATIONS", "ENFORCED"], header
        assert sorted(r[:4] for r in rows) == [
            ["audit-deny", "deny", "3", "true"],
            ["audit-dryrun", "dryrun", "1", "true"],
        ]
    finally:
        node_cluster.kubectl(
            "delete", "-f", str(LABELS_TEMPLATE), "--ignore-not-found", check=False, timeout=120
        )
        node_cluster.kubectl("delete", "namespace", dryrun, "--wait=false", check=False)


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
