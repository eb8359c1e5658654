"""In-cluster sync on a real kube-apiserver: two `celkeeper serve --source kubernetes` pods (only
the webhook's and VAP roles of deploy/celkeeper.yaml) keep each template's ValidatingAdmissionPolicy and each
constraint's binding as `celkeeper vap` makes them, owned by their template or constraint, written once
however many pods, with the outcome in the template's and constraint's status; no webhook is registered,
the API server enforces the policies itself. A template turning generateVAP off, one that cannot be a
policy and one deleted are followed too.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from celkeeper.cel import get_engine
from celkeeper.documents import Document
from celkeeper.kube.compare import covers
from celkeeper.policy import TemplateCompiler, build_policy_set
from celkeeper.vap.plan import VapOptions, plan_vap
from tests.incluster.support import (
    WEBHOOK_RBAC_NAME,
    KubeServe,
    by_pod,
    configmap,
    create_namespace,
    get,
    install_crds,
    rbac_kubeconfig,
)
from tests.support.apiserver import ControlPlane
from tests.support.binaries import KubeBinaries
from tests.support.kubectl import apply as apply_one
from tests.support.waiting import wait_for
from tests.vap.kube import start_cluster

pytestmark = pytest.mark.kube

VAP_ROLE = "celkeeper-vap"  # deploy/celkeeper.yaml: the webhook pods' rights on policies and bindings
PODS = ("pod-a", "pod-b")
KIND = "VapSynced"
NAME = KIND.lower()


@dataclass
class Env:
    cluster: ControlPlane
    servers: list[KubeServe]
    namespace: str  # where the test's ConfigMaps go


@pytest.fixture(scope="module")
def env(kube_binaries: KubeBinaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    workdir = tmp_path_factory.mktemp("vap-incluster")
    cluster = start_cluster(kube_binaries, workdir / "cluster")
    servers: list[KubeServe] = []
    try:
        install_crds(cluster)
        pod_namespace = create_namespace(cluster, "celkeeper-pods")
        user = f"celkeeper-{secrets.token_hex(3)}"
        kubeconfig = rbac_kubeconfig(cluster, pod_namespace, user, roles=(WEBHOOK_RBAC_NAME, VAP_ROLE))
        namespace = create_namespace(cluster, "vap")
        for pod in PODS:
            server = KubeServe(
                Path(workdir / pod),
                kubeconfig,
                pod,
                pod_namespace,
                expected_pods=len(PODS),
                args=["--default-wait-for-vapb-generation", "2"],
            )
            servers.append(server.start())
        yield Env(cluster, servers, namespace)
    finally:
        for server in servers:
            server.stop()
        cluster.stop()


def template(kind: str = KIND, generate: bool | None = True, condition: str | None = None) -> dict[str, Any]:
    source: dict[str, Any] = {
        "validations": [
            {
                "expression": "!has(object.metadata.labels) || "
                "!(variables.params.label in object.metadata.labels)",
                "messageExpression": "'%s %s must not have the label %s'.format([string(object.kind), "
                "string(object.metadata.name), string(variables.params.label)])",
            }
        ],
    }
    if generate is not None:
        source["generateVAP"] = generate
    if condition is not None:
        source["matchCondition"] = [{"name": "condition", "expression": condition}]
    return {
        "apiVersion": "templates.celkeeper.io/v1",
        "kind": "ConstraintTemplate",
        "metadata": {"name": kind.lower()},
        "spec": {
            "crd": {
                "spec": {
                    "names": {"kind": kind},
                    "validation": {
                        "openAPIV3Schema": {"type": "object", "properties": {"label": {"type": "string"}}}
                    },
                }
            },
            "targets": [
                {
                    "target": "admission.k8s.gatekeeper.sh",
                    "code": [{"engine": "K8sNativeValidation", "source": source}],
                }
            ],
        },
    }


def constraint(name: str, label: str, namespace: str, kind: str = KIND, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "constraints.celkeeper.io/v1beta1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {
            "match": {"kinds": [{"apiGroups": [""], "kinds": ["ConfigMap"]}], "namespaces": [namespace]},
            "parameters": {"label": label},
            **spec,
        },
    }


VAP_ONLY = {
    "enforcementAction": "scoped",
    "scopedEnforcementActions": [{"action": "deny", "enforcementPoints": [{"name": "vap.k8s.io"}]}],
}


def _objects(env: Env) -> list[dict[str, Any]]:
    return [
        template(),
        constraint("deny-red", "red", env.namespace),
        constraint("api-server-only", "blue", env.namespace, **VAP_ONLY),
    ]


def apply(cluster: ControlPlane, objects: list[dict[str, Any]]) -> None:
    """Templates, then their constraints once the pods have made the constraint CRD (retried until served)."""
    for obj in sorted(objects, key=lambda o: o["kind"] != "ConstraintTemplate"):
        apply_one(cluster, obj)


def _planned(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    policies = build_policy_set([Document.from_object(o) for o in objects], TemplateCompiler(get_engine()))
    return {o["metadata"]["name"]: o for o in plan_vap(policies, VapOptions()).objects()}


def _stored(env: Env, resource: str, name: str) -> dict[str, Any] | None:
    return get(env.cluster, resource, name)


def _denial(env: Env, obj: dict[str, Any]) -> str:
    proc = env.cluster.kubectl("create", "--dry-run=server", "-f", "-", input=obj, check=False)
    return proc.stderr if proc.returncode != 0 else ""


def test_pods_generate_the_policy_and_bindings_and_the_api_server_enforces_them(env: Env) -> None:
    objects = _objects(env)
    apply(env.cluster, objects)
    planned = _planned(objects)
    assert set(planned) == {
        "gatekeeper-vapsynced",
        "gatekeeper-vapsynced-deny-red",
        "gatekeeper-vapsynced-api-server-only",
    }

    def stored_as_planned() -> bool:
        for name, obj in planned.items():
            resource = (
                "validatingadmissionpolicy"
                if obj["kind"] == "ValidatingAdmissionPolicy"
                else "validatingadmissionpolicybinding"
            )
            found = _stored(env, resource, name)
            if found is None or not covers(found, obj):  # what the API server adds (defaults) aside
                return False
        return True

    wait_for(stored_as_planned, timeout=60, what="the policy and both bindings")
    policy = _stored(env, "validatingadmissionpolicy", "gatekeeper-vapsynced")
    assert policy is not None
    owner = get(env.cluster, "constrainttemplate", NAME)
    assert owner is not None
    assert policy["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "templates.celkeeper.io/v1",
            "kind": "ConstraintTemplate",
            "name": NAME,
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    binding = _stored(env, "validatingadmissionpolicybinding", "gatekeeper-vapsynced-deny-red")
    assert binding is not None and binding["metadata"]["ownerReferences"][0]["kind"] == KIND

    # the API server enforces them (no webhook is registered): the deny constraint, and the one scoped to
    # vap.k8s.io only (which celkeeper's webhook would skip)
    red = configmap("red", env.namespace, {"red": "1"})
    wait_for(lambda: "denied request" in _denial(env, red), timeout=60, what="the API server to enforce")
    assert (
        "ValidatingAdmissionPolicy 'gatekeeper-vapsynced' with binding 'gatekeeper-vapsynced-deny-red' "
        "denied request: ConfigMap red must not have the label red"
    ) in _denial(env, red)
    # each binding reaches the API server's admission through its own informer: wait for this one too
    blue = configmap("blue", env.namespace, {"blue": "1"})
    wait_for(
        lambda: "ConfigMap blue must not have the label blue" in _denial(env, blue),
        timeout=60,
        what="the API server to enforce the vap.k8s.io-scoped binding",
    )
    assert _denial(env, configmap("plain", env.namespace, {"green": "1"})) == ""

    # every pod reports what it generated, in Gatekeeper's status fields
    def reported() -> bool:
        templates = by_pod(env.cluster, "constrainttemplate", NAME)
        constraints = by_pod(env.cluster, f"{NAME}.constraints.celkeeper.io", "deny-red")
        return all(
            (templates.get(pod) or {}).get("vapGenerationStatus", {}).get("state") == "generated"
            and [p.get("state") for p in (constraints.get(pod) or {}).get("enforcementPointsStatus", [])]
            == ["generated"]
            for pod in PODS
        )

    wait_for(reported, timeout=60, what="both pods to report the generated policy and binding")


def test_the_cli_reads_the_cluster_and_says_what_the_pods_made(env: Env) -> None:
    import subprocess
    import sys

    apply(env.cluster, _objects(env))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "celkeeper",
            "vap",
            "--cluster",
            "--kubeconfig",
            str(env.cluster.kubeconfig_path),
            "--no-default-create-vap-for-templates",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    items = {i["metadata"]["name"]: i for i in json.loads(proc.stdout)["items"]}
    assert {"gatekeeper-vapsynced", "gatekeeper-vapsynced-deny-red"} <= set(items)
    for name, obj in items.items():
        resource = (
            "validatingadmissionpolicy"
            if obj["kind"] == "ValidatingAdmissionPolicy"
            else "validatingadmissionpolicybinding"
        )
        found = wait_for(lambda: _stored(env, resource, name), timeout=60, what=name)  # noqa: B023
        assert covers(found, obj), name


def test_two_pods_write_each_object_once(env: Env) -> None:
    """Leaderless and idempotent: once settled, nothing is rewritten (the resourceVersions stay)."""
    apply(env.cluster, _objects(env))
    names = list(_planned(_objects(env)))
    kinds = {
        n: "validatingadmissionpolicy" if n == "gatekeeper-vapsynced" else "validatingadmissionpolicybinding"
        for n in names
    }
    wait_for(lambda: all(_stored(env, kinds[n], n) for n in names), timeout=60, what="the objects")
    before = {n: _stored(env, kinds[n], n)["metadata"]["resourceVersion"] for n in names}  # type: ignore[index]
    time.sleep(5)  # several controller rounds in both pods
    after = {n: _stored(env, kinds[n], n)["metadata"]["resourceVersion"] for n in names}  # type: ignore[index]
    assert after == before
    policy = _stored(env, "validatingadmissionpolicy", "gatekeeper-vapsynced")
    assert policy is not None and policy["metadata"]["generation"] == 1


def test_a_template_that_cannot_be_a_policy_says_why_in_its_status(env: Env) -> None:
    kind = "VapRefused"
    apply(env.cluster, [template(kind, condition="variables.params != null")])

    def refused() -> list[str]:
        entries = by_pod(env.cluster, "constrainttemplate", kind.lower())
        return [
            (entries.get(pod) or {}).get("vapGenerationStatus", {}).get("warning", "")
            for pod in PODS
            if (entries.get(pod) or {}).get("vapGenerationStatus", {}).get("state") == "error"
        ]

    warnings = wait_for(
        lambda: len(refused()) == len(PODS) and refused(), timeout=60, what="the error status"
    )
    assert all("match condition 'condition' reads variables" in w for w in warnings)
    assert _stored(env, "validatingadmissionpolicy", "gatekeeper-vaprefused") is None


def test_generate_vap_off_and_a_deleted_template_remove_what_was_generated(env: Env) -> None:
    kind = "VapRemoved"
    policy, binding = (
        ("validatingadmissionpolicy", "gatekeeper-vapremoved"),
        ("validatingadmissionpolicybinding", "gatekeeper-vapremoved-c"),
    )

    def present() -> bool:
        return _stored(env, *binding) is not None

    def gone() -> bool:
        return _stored(env, *policy) is None and _stored(env, *binding) is None

    apply(env.cluster, [template(kind), constraint("c", "x", env.namespace, kind=kind)])
    wait_for(present, timeout=60, what="the binding")
    apply(env.cluster, [template(kind, generate=False)])
    wait_for(gone, timeout=60, what="the policy and binding to go")
    apply(env.cluster, [template(kind)])
    wait_for(present, timeout=60, what="the binding again")
    env.cluster.kubectl("delete", "constrainttemplate", kind.lower())
    wait_for(gone, timeout=60, what="the policy and binding of the deleted template to go")
