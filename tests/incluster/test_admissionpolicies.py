"""`celkeeper serve --source kubernetes --enforce-admission-policies` on a real kube-apiserver: the
informer watches ValidatingAdmissionPolicies, MutatingAdmissionPolicies, their bindings and the objects of
the kinds the policies take as parameters (a ConfigMap here, its resource found by discovery), and the
webhook answers as Kubernetes' own code answers for those documents (celkeeper.admissionpolicy, proven
against kube-apiserver in tests/admissionpolicy); the pod reports what it enforces of each policy and
binding (AdmissionPolicyPodStatus); a changed parameter is followed without a restart, and the policies
generated from templates are not enforced twice."""

from __future__ import annotations

import base64
import json
import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import jsonpatch
import pytest

from celkeeper.admissionpolicy import AdmissionPolicies
from celkeeper.documents import Document
from tests.incluster.support import KubeServe, install_crds, pod_statuses
from tests.support.apiserver import ControlPlane
from tests.support.kubectl import apply
from tests.support.native import require_celgo
from tests.support.waiting import wait_for

pytestmark = pytest.mark.kube

GROUP = "admissionregistration.k8s.io/v1"


def _documents(suffix: str, namespace: str, params_namespace: str) -> list[dict[str, Any]]:
    """A VAP with a ConfigMap parameter and a MAP, bound only in this test's namespace."""
    only_here = {"namespaceSelector": {"matchLabels": {"celkeeper-test": suffix}}}
    rules = [
        {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}
    ]
    return [
        {
            "apiVersion": GROUP,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": f"replicas-{suffix}"},
            "spec": {
                "failurePolicy": "Fail",
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": {"resourceRules": rules},
                "validations": [
                    {
                        "expression": "object.spec.replicas <= int(params.data.maxReplicas)",
                        "messageExpression": "'at most ' + params.data.maxReplicas + ' replicas'",
                    }
                ],
            },
        },
        {
            "apiVersion": GROUP,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": f"replicas-{suffix}"},
            "spec": {
                "policyName": f"replicas-{suffix}",
                "validationActions": ["Deny"],
                "paramRef": {
                    "name": "limits",
                    "namespace": params_namespace,
                    "parameterNotFoundAction": "Deny",
                },
                "matchResources": only_here,
            },
        },
        {
            "apiVersion": GROUP,
            "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": f"team-{suffix}"},
            "spec": {
                "reinvocationPolicy": "Never",
                "matchConstraints": {"resourceRules": rules},
                "mutations": [
                    {
                        "patchType": "ApplyConfiguration",
                        "applyConfiguration": {
                            "expression": 'Object{metadata: Object.metadata{labels: {"team": "payments"}}}'
                        },
                    }
                ],
            },
        },
        {
            "apiVersion": GROUP,
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": f"team-{suffix}"},
            "spec": {"policyName": f"team-{suffix}", "matchResources": only_here},
        },
    ]


def _limits(namespace: str, most: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "limits", "namespace": namespace},
        "data": {"maxReplicas": str(most)},
    }


def _namespace(name: str, suffix: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"celkeeper-test": suffix}},
    }


def _review(namespace: str, replicas: int) -> dict[str, Any]:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        },
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "name": "web",
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": deployment,
        },
    }


@pytest.fixture(scope="module")
def setting(kube_cluster: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    require_celgo()
    install_crds(kube_cluster)
    suffix = secrets.token_hex(3)
    namespace, params, pods = f"shop-{suffix}", f"params-{suffix}", f"celkeeper-{suffix}"
    for name in (namespace, params, pods):
        apply(kube_cluster, _namespace(name, suffix))
    apply(kube_cluster, _limits(params, 5))
    documents = _documents(suffix, namespace, params)
    for obj in documents:
        apply(kube_cluster, obj)
    server = KubeServe(
        tmp_path_factory.mktemp("enforce-kube"),
        kube_cluster.kubeconfig_path,
        "pod-a",
        pods,
        args=["--enforce-admission-policies"],
    ).start()
    try:
        yield {
            "cluster": kube_cluster,
            "server": server,
            "suffix": suffix,
            "namespace": namespace,
            "params": params,
            "pods": pods,
            "documents": documents,
        }
    finally:
        server.stop()
        for obj in reversed(documents):
            kube_cluster.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found")
        for name in (namespace, params, pods):
            kube_cluster.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found")


def _kubernetes(setting: dict[str, Any], most: int) -> AdmissionPolicies:
    """Kubernetes' own answer for the same documents (the offline tools' code)."""
    return AdmissionPolicies.build(
        [Document.from_object(d) for d in setting["documents"]],
        params=[Document.from_object(_limits(setting["params"], most))],
        namespaces=[Document.from_object(_namespace(setting["namespace"], setting["suffix"]))],
    )


def test_the_cluster_s_policies_are_enforced_with_their_parameters(setting: dict[str, Any]) -> None:
    server: KubeServe = setting["server"]
    review = _review(setting["namespace"], 8)
    with _kubernetes(setting, 5) as kubernetes:
        expected = kubernetes.review(review["request"])
    assert not expected.allowed and "at most 5 replicas" in expected.message

    _, body = server.admit(review)
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["message"] == expected.message
    assert body["response"]["status"]["code"] == expected.code

    response = server.post("/v1/mutate", json.dumps(_review(setting["namespace"], 2)).encode()).json()[
        "response"
    ]
    patched = jsonpatch.apply_patch(
        _review(setting["namespace"], 2)["request"]["object"], json.loads(base64.b64decode(response["patch"]))
    )
    assert patched["metadata"]["labels"] == {"team": "payments"}

    # elsewhere (a namespace the bindings do not select) nothing applies
    _, body = server.admit(_review("default", 8))
    assert body["response"]["allowed"] is True


def test_a_changed_parameter_is_followed(setting: dict[str, Any]) -> None:
    server: KubeServe = setting["server"]
    apply(setting["cluster"], _limits(setting["params"], 10))

    def allowed() -> bool:
        _, body = server.admit(_review(setting["namespace"], 8))
        return bool(body["response"]["allowed"])

    wait_for(allowed, timeout=30, interval=0.3, what="the new maxReplicas to be enforced")
    _, body = server.admit(_review(setting["namespace"], 12))
    assert "at most 10 replicas" in body["response"]["status"]["message"]
    items = {i.name for i in server.snapshot().items} if server.snapshot() else set()
    assert f"admissionparam/v1/ConfigMap/{setting['params']}/limits" in items
    assert f"admissionpolicy/validatingadmissionpolicy/replicas-{setting['suffix']}" in items


def test_the_pod_reports_each_policy_and_binding_it_enforces(setting: dict[str, Any]) -> None:
    cluster: ControlPlane = setting["cluster"]
    stored = {
        (d["kind"], d["metadata"]["name"]): json.loads(
            cluster.kubectl("get", d["kind"].lower(), d["metadata"]["name"], "-o", "json").stdout
        )["metadata"]
        for d in setting["documents"]
    }

    def reported() -> dict[tuple[str, str], dict[str, Any]]:
        found = pod_statuses(cluster, setting["pods"], "admissionpolicypodstatuses.status.celkeeper.io")
        labels = "internal.celkeeper.io/admission-policy-kind", "internal.celkeeper.io/admission-policy-name"
        return {
            (s["metadata"]["labels"][labels[0]], s["metadata"]["labels"][labels[1]]): s["status"]
            for s in found
            if s["metadata"]["labels"].get("internal.celkeeper.io/pod") == "pod-a"
        }

    wait_for(lambda: set(stored) <= set(reported()), timeout=60, interval=0.5, what="the pod's statuses")
    found = reported()
    for key, metadata in stored.items():
        status = found[key]
        assert status["enforced"] is True and "errors" not in status, (key, status)
        assert status["policyUID"] == metadata["uid"]
        assert status["observedGeneration"] == metadata["generation"]
        assert status["id"] == "pod-a"
        assert status["operations"] == ["mutation-webhook" if key[0].startswith("Mutating") else "webhook"]
