"""End to end in a real API server: templates and constraints applied with kubectl drive a running
`celkeeper serve --source kubernetes` (one pod, two workers, a kubeconfig bound to the webhook's RBAC in
deploy/celkeeper.yaml only), registered as the cluster's validating webhook.

Every test uses its own constraint kind (CRDs are cluster-wide) and its own namespace.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.incluster.support import (
    KubeServe,
    Webhook,
    allowed,
    by_pod,
    configmap,
    create_namespace,
    denied_with,
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
from tests.support.serve import review
from tests.support.waiting import wait_for

pytestmark = pytest.mark.kube

POD = "pod-a"


@dataclass
class Env:
    cluster: ControlPlane
    server: KubeServe
    webhook: Webhook
    pod_namespace: str


@pytest.fixture(scope="module")
def env(kube_cluster: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    pod_namespace, kubeconfig = deployment_setting(kube_cluster, "celkeeper-pods")
    server = KubeServe(tmp_path_factory.mktemp("pod-a"), kubeconfig, POD, pod_namespace, workers=2)
    server.start()
    webhook = Webhook(kube_cluster, server)
    try:
        yield Env(kube_cluster, server, webhook, pod_namespace)
    finally:
        webhook.remove()
        server.stop()
        remove_templates(kube_cluster, "requiredlabels")


@pytest.fixture
def kind() -> str:
    return f"RequiredLabels{secrets.token_hex(3)}"


@pytest.fixture
def namespace(env: Env) -> str:
    """A namespace whose requests the API server sends to celkeeper."""
    return create_namespace(env.cluster, "t-incluster", env.webhook.labels)


def template_ready(env: Env, kind: str) -> None:
    apply(env.cluster, required_labels_template(kind))
    crd = f"{kind.lower()}.constraints.celkeeper.io"
    env.cluster.kubectl("wait", "--for=condition=Established", "--timeout=30s", f"crd/{crd}", check=False)
    wait_for(lambda: get(env.cluster, "crd", crd), timeout=20, what=f"CRD {crd}")


def enforced(env: Env, kind: str, name: str, generation: int = 1) -> bool:
    entry = by_pod(env.cluster, kind.lower(), name).get(POD)
    return bool(
        entry
        and entry.get("enforced")
        and entry.get("observedGeneration") == generation
        and status(env.cluster, kind.lower(), name).get("enforced") is True
    )


def test_a_template_makes_its_constraint_crd(env: Env, kind: str) -> None:
    apply(env.cluster, required_labels_template(kind))
    crd_name = f"{kind.lower()}.constraints.celkeeper.io"
    crd = wait_for(lambda: get(env.cluster, "crd", crd_name), timeout=20, what=f"CRD {crd_name}")
    template = get(env.cluster, "constrainttemplate", kind.lower())
    assert template is not None
    assert crd["spec"]["names"]["kind"] == kind
    assert crd["spec"]["names"]["categories"] == ["constraint", "constraints"]
    assert crd["metadata"]["labels"]["celkeeper.io/template"] == kind.lower()
    assert [o["uid"] for o in crd["metadata"]["ownerReferences"]] == [template["metadata"]["uid"]]
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert spec["parameters"]["properties"]["labels"]["type"] == "array"
    # the template's status says the CRD exists and this pod has loaded the template
    wait_for(
        lambda: status(env.cluster, "constrainttemplate", kind.lower()).get("created") is True,
        timeout=20,
        what="status.created",
    )
    entry = wait_for(
        lambda: by_pod(env.cluster, "constrainttemplate", kind.lower()).get(POD),
        timeout=20,
        what="the template's byPod entry",
    )
    assert entry["observedGeneration"] == 1
    assert entry["templateUID"] == template["metadata"]["uid"]
    assert "errors" not in entry


def test_a_constraint_denies_within_seconds_and_is_listed(env: Env, kind: str, namespace: str) -> None:
    template_ready(env, kind)
    apply(env.cluster, required_labels(kind, "need-owner", ["owner"], [namespace]))
    started = time.monotonic()
    bad = configmap("no-owner", namespace)
    wait_for(
        lambda: denied_with(env.cluster, bad, "[need-owner] missing labels: owner"),
        timeout=15,
        interval=0.2,
        what="the constraint to deny",
    )
    took = time.monotonic() - started
    assert took < 10, took
    assert allowed(env.cluster, configmap("with-owner", namespace, {"owner": "me"}))
    proc = env.cluster.kubectl("create", "-f", "-", input=bad, check=False)
    assert proc.returncode != 0
    assert 'admission webhook "validation.celkeeper.io" denied the request' in proc.stderr
    # kubectl get constraints lists it, with the enforcement action column
    table = env.cluster.kubectl("get", "constraints").stdout
    header, *rows = table.splitlines()
    assert header.split() == ["NAME", "ENFORCEMENT-ACTION", "TOTAL-VIOLATIONS", "ENFORCED"], table
    # kubectl prefixes a name with its resource only when the category lists more than one resource
    names = {f"{kind.lower()}.constraints.celkeeper.io/need-owner", "need-owner"}
    assert any(row.split()[0] in names and row.split()[1] == "deny" for row in rows), table
    wait_for(lambda: enforced(env, kind, "need-owner"), timeout=20, what="status.enforced")
    table = env.cluster.kubectl("get", f"{kind.lower()}.constraints.celkeeper.io", "need-owner").stdout
    assert table.splitlines()[1].split() == ["need-owner", "deny", "true"], table


def test_changing_parameters_changes_enforcement_without_restart(env: Env, kind: str, namespace: str) -> None:
    template_ready(env, kind)
    apply(env.cluster, required_labels(kind, "need", ["owner"], [namespace]))
    only_team = configmap("only-team", namespace, {"team": "a"})
    wait_for(
        lambda: denied_with(env.cluster, only_team, "missing labels: owner"),
        timeout=15,
        what="owner to be required",
    )
    informer = env.server.informer_pid()
    apply(env.cluster, required_labels(kind, "need", ["team"], [namespace]))
    wait_for(lambda: allowed(env.cluster, only_team), timeout=15, what="the new parameters")
    only_owner = configmap("only-owner", namespace, {"owner": "x"})
    assert denied_with(env.cluster, only_owner, "missing labels: team")
    assert env.server.informer_pid() == informer  # the same processes, no restart
    wait_for(lambda: enforced(env, kind, "need", generation=2), timeout=20, what="generation 2 enforced")
    statuses = [
        s
        for s in pod_statuses(env.cluster, env.pod_namespace)
        if s["metadata"]["labels"]["internal.celkeeper.io/constraint-kind"] == kind
    ]
    assert [(s["status"]["observedGeneration"], s["status"]["enforced"]) for s in statuses] == [(2, True)]


def test_deleting_the_template_removes_its_crd_constraints_and_enforcement(
    env: Env, kind: str, namespace: str
) -> None:
    template_ready(env, kind)
    apply(env.cluster, required_labels(kind, "gone-soon", ["owner"], [namespace]))
    bad = configmap("bad", namespace)
    wait_for(lambda: denied_with(env.cluster, bad, "[gone-soon]"), timeout=15, what="denial")
    wait_for(lambda: enforced(env, kind, "gone-soon"), timeout=20, what="status.enforced")
    env.cluster.kubectl("delete", "constrainttemplate", kind.lower())
    crd = f"{kind.lower()}.constraints.celkeeper.io"
    wait_for(lambda: get(env.cluster, "crd", crd) is None, timeout=20, what=f"CRD {crd} to go")
    assert env.cluster.kubectl("get", kind.lower(), check=False).returncode != 0  # no such kind any more
    wait_for(lambda: allowed(env.cluster, bad), timeout=15, what="enforcement to stop")

    def mine() -> list[object]:
        return [
            s
            for kind_ in ("constraintpodstatuses", "constrainttemplatepodstatuses")
            for s in pod_statuses(env.cluster, env.pod_namespace, kind_)
            if kind.lower() in s["metadata"]["name"]
        ]

    wait_for(lambda: mine() == [], timeout=20, what="this pod's status objects of the template to go")


def test_a_cel_error_shows_in_the_template_status_with_line_and_column(env: Env, kind: str) -> None:
    template = required_labels_template(kind)
    source = template["spec"]["targets"][0]["code"][0]["source"]
    source["validations"].append({"expression": "object.metadata.name == 'a' &&\n  object.metadata.nope(1)"})
    apply(env.cluster, template)

    def errors() -> list[dict[str, str]]:
        entry = by_pod(env.cluster, "constrainttemplate", kind.lower()).get(POD) or {}
        return list(entry.get("errors") or [])

    found = wait_for(errors, timeout=20, what="the compile error in status.byPod")
    assert len(found) == 1, found
    assert found[0]["code"] == "compile_error"
    assert found[0]["location"] == "spec.targets[0].code[0].source.validations[1].expression:2:23"
    assert "undeclared reference to 'nope'" in found[0]["message"]
    # the pod's own status object says the same
    own = get(env.cluster, "constrainttemplatepodstatus", f"pod--a-{kind.lower()}", "-n", env.pod_namespace)
    assert own is not None
    assert own["status"]["errors"] == found


def test_pod_status_is_written_only_after_the_workers_load_the_snapshot(
    env: Env, kind: str, namespace: str
) -> None:
    template_ready(env, kind)
    wait_for(
        lambda: by_pod(env.cluster, "constrainttemplate", kind.lower()).get(POD),
        timeout=20,
        what="the template loaded",
    )
    workers = sorted(env.server.worker_pids())
    assert len(workers) == 2
    published = env.server.published_generation()
    for pid in workers:
        os.kill(pid, signal.SIGSTOP)  # the workers cannot load anything new
    try:
        apply(env.cluster, required_labels(kind, "frozen", ["owner"], [namespace]))
        wait_for(
            lambda: env.server.published_generation() > published,
            timeout=15,
            what="the informer to publish the constraint",
        )
        time.sleep(2.0)  # the informer has had every chance to write a status it must not write yet
        assert not by_pod(env.cluster, kind.lower(), "frozen")
        assert status(env.cluster, kind.lower(), "frozen").get("enforced") is not True
        assert not [
            s
            for s in pod_statuses(env.cluster, env.pod_namespace)
            if s["metadata"]["labels"]["internal.celkeeper.io/constraint-name"] == "frozen"
        ]
    finally:
        for pid in workers:
            os.kill(pid, signal.SIGCONT)
    wait_for(lambda: enforced(env, kind, "frozen"), timeout=20, what="the status once the workers loaded it")
    assert env.server.loaded() >= by_pod(env.cluster, kind.lower(), "frozen")[POD]["snapshotGeneration"]


def test_status_writes_do_not_grow_with_requests(env: Env, kind: str, namespace: str) -> None:
    template_ready(env, kind)
    apply(env.cluster, required_labels(kind, "quiet", ["owner"], [namespace]))
    wait_for(lambda: enforced(env, kind, "quiet"), timeout=20, what="status.enforced")
    time.sleep(1.0)  # let the last status writes settle

    def versions() -> dict[str, str]:
        found = {
            s["metadata"]["name"]: s["metadata"]["resourceVersion"]
            for s in pod_statuses(env.cluster, env.pod_namespace)
        }
        constraint = get(env.cluster, kind.lower(), "quiet")
        assert constraint is not None
        found["constraint"] = constraint["metadata"]["resourceVersion"]
        return found

    before = versions()
    for i in range(40):
        code, body = env.server.admit(review(configmap(f"cm-{i}", namespace)))
        assert code == 200 and body["response"]["allowed"] is False
    assert versions() == before


def test_a_new_pod_is_ready_only_with_everything_that_existed_at_its_start(
    env: Env, kind: str, namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    template_ready(env, kind)
    for i in range(3):
        apply(env.cluster, required_labels(kind, f"pre-{i}", ["owner"], [namespace]))
    wait_for(lambda: enforced(env, kind, "pre-2"), timeout=20, what="the constraints enforced by pod-a")
    late = KubeServe(tmp_path_factory.mktemp("late"), env.server.kubeconfig, "pod-late", env.pod_namespace)
    late.start(wait_ready=False)
    try:
        seen: list[dict[str, object]] = []

        def ready() -> bool:
            response = late.get("/readyz")
            seen.append(response.json())
            return response.status_code == 200

        wait_for(ready, timeout=60, interval=0.05, what="the late pod to be ready")
        first_ready = seen[-1]
        assert all(d.get("ready") is False for d in seen[:-1])
        # the snapshot its worker became ready with holds the template and every constraint
        snapshot = late.snapshot()
        assert snapshot is not None and snapshot.synced
        assert snapshot.generation == first_ready["generation"]
        names = {item.name for item in snapshot.items}
        assert f"constrainttemplate/{kind.lower()}" in names
        assert {f"constraint/{kind}/pre-{i}" for i in range(3)} <= names
    finally:
        late.stop()


def test_an_informer_restart_never_publishes_a_partial_snapshot(env: Env, kind: str, namespace: str) -> None:
    template_ready(env, kind)
    apply(env.cluster, required_labels(kind, "before", ["owner"], [namespace]))
    wait_for(lambda: enforced(env, kind, "before"), timeout=20, what="the constraint enforced")
    snapshot = env.server.snapshot()
    assert snapshot is not None and snapshot.synced
    names = {item.name for item in snapshot.items}
    old = env.server.informer_pid()
    os.kill(old, signal.SIGKILL)  # the master forks a new informer, which lists everything again
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:  # until the new informer has run its first listings for a while
        current = env.server.snapshot()
        assert current is not None and current.synced
        assert names <= {item.name for item in current.items}  # nothing dropped, ever
        if env.server.informer_pid() != old:
            deadline = min(deadline, time.monotonic() + 3)
        time.sleep(0.02)
    assert env.server.informer_pid() != old
    apply(env.cluster, required_labels(kind, "after", ["team"], [namespace]))
    wait_for(
        lambda: denied_with(env.cluster, configmap("x", namespace, {"owner": "o"}), "[after]"),
        timeout=20,
        what="the new informer to publish",
    )
    wait_for(lambda: enforced(env, kind, "after"), timeout=20, what="its status")
    assert enforced(env, kind, "before")
