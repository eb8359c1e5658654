"""`serve --enforce-admission-policies` POST /v1/mutate answers as the API server's mutating chain would
with Gatekeeper's mutation webhook in it: the MutatingAdmissionPolicies, then Gatekeeper's mutators, then
the policies with reinvocationPolicy IfNeeded once more when the mutators changed the object.

The differential: a kube-apiserver at the native library's Kubernetes version runs the policies itself
and calls a celkeeper webhook that enforces only Gatekeeper's mutator (registered as Gatekeeper's chart
registers its mutation webhook, reinvocationPolicy Never); each object's server-side dry run gives the
object it would store. A second celkeeper, with the same mutator and the policies (and no API server
behind it), answers /v1/mutate for the same object; its JSONPatch applied to the object must give the
same object. The policies count the object's labels, so whether (and when) each one ran shows in its
label: the expected values are also worked out here, and differ from one pass of the policies before the
mutator (what /v1/mutate answered before).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from celkeeper.admissionpolicy import AdmissionPolicies
from celkeeper.documents import Document
from tests.admissionpolicy.differential import (
    DRY_RUN,
    Server,
    native_binaries,
    start_control_plane,
    strip_server_fields,
    wait_ready,
)
from tests.support.binaries import BinariesUnavailable
from tests.support.gatekeeper import mutating_webhook
from tests.support.native import require_celgo
from tests.support.requirements import KUBE
from tests.support.serve import ServeProcess

pytestmark = pytest.mark.kube

LABEL = "reinvocation-test"
GROUP = "admissionregistration.k8s.io/v1"
CLUSTER_ROLES = "/apis/rbac.authorization.k8s.io/v1/clusterroles"

OWNER = """\
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: owner-label}
spec:
  match:
    scope: Cluster
    kinds: [{apiGroups: [rbac.authorization.k8s.io], kinds: [ClusterRole]}]
  location: metadata.labels.owner
  parameters:
    assign: {value: platform}
"""


def counting(name: str, reinvocation: str, other: str) -> list[dict[str, Any]]:
    """A MutatingAdmissionPolicy that sets the label `<name>` to the number of labels it sees but the
    `other` policy's (the plugin runs the policies in no fixed order: the API server's answer does not
    depend on it), and its binding."""
    seen = f'object.metadata.labels.filter(k, k != "{other}").size()'
    expression = f'Object{{metadata: Object.metadata{{labels: {{"{name}": string({seen})}}}}}}'
    return [
        {
            "apiVersion": GROUP,
            "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "reinvocationPolicy": reinvocation,
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["rbac.authorization.k8s.io"],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["clusterroles"],
                        }
                    ],
                    "objectSelector": {"matchLabels": {LABEL: "yes"}},
                },
                "mutations": [
                    {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}
                ],
            },
        },
        {
            "apiVersion": GROUP,
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name},
        },
    ]


POLICIES = [*counting("a-if-needed", "IfNeeded", "b-never"), *counting("b-never", "Never", "a-if-needed")]


def cluster_role(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {LABEL: "yes", **labels}},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
    }


# the objects, and the labels the chain leaves, worked out: each policy counts the labels it sees (but
# the other's); the policies changed the object, so the IfNeeded one runs once more, after the mutator
# (Kubernetes' reinvoker), and sees the mutator's `owner` and its own label too. One pass of the policies
# before the mutator (what /v1/mutate answered before) would leave a-if-needed one less where the mutator
# adds `owner`.
CASES = [
    # b sees 1 label; a 1, then (test, a, owner) 3
    (cluster_role("plain"), {"a-if-needed": "3", "b-never": "1", "owner": "platform"}),
    # the mutator leaves an owner alone: b sees 2; a 2, then (test, owner, a) 3
    (cluster_role("owned", owner="team"), {"a-if-needed": "3", "b-never": "2", "owner": "team"}),
    # b sees 2; a 2, then (test, extra, a, owner) 4
    (cluster_role("two", extra="x"), {"a-if-needed": "4", "b-never": "2", "owner": "platform"}),
]


@dataclass
class World:
    api: Server
    enforcing: ServeProcess


def _serve(workdir: Path, documents: list[dict[str, Any]], *args: str) -> ServeProcess:
    policies = workdir / "policies"
    policies.mkdir(parents=True)
    (policies / "owner.yaml").write_text(OWNER)
    if documents:
        (policies / "admission-policies.yaml").write_text(yaml.safe_dump_all(documents))
    return ServeProcess(workdir, policies, workers=1, args=list(args)).start()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_celgo()
    try:
        binaries = native_binaries()
    except BinariesUnavailable as err:
        KUBE.unavailable("the API server at the native library's version", err)
    workdir = tmp_path_factory.mktemp("reinvocation")
    gatekeeper = _serve(workdir / "gatekeeper", [])
    enforcing = _serve(workdir / "enforcing", POLICIES, "--enforce-admission-policies")
    cluster = start_control_plane(binaries, workdir / "cluster")
    api = Server(cluster)
    try:
        for document in POLICIES:
            kind = document["kind"].lower()
            plural = kind.removesuffix("y") + "ies" if kind.endswith("policy") else kind + "s"
            reply = api.call("POST", f"/apis/admissionregistration.k8s.io/v1/{plural}", document)
            assert reply.code == 201, reply.body
        webhook = mutating_webhook(
            "celkeeper-mutation",
            f"https://127.0.0.1:{gatekeeper.port}/v1/mutate",
            gatekeeper.certs.ca_cert.read_bytes(),
            object_selector={"matchLabels": {LABEL: "yes"}},
        )
        reply = api.call(
            "POST", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", webhook
        )
        assert reply.code == 201, reply.body

        def settled() -> bool:  # the policies and the webhook in force
            reply = api.call("POST", CLUSTER_ROLES, cluster_role("probe"), DRY_RUN)
            labels = (reply.body or {}).get("metadata", {}).get("labels", {})
            return reply.code == 201 and {"a-if-needed", "b-never", "owner"} <= set(labels)

        wait_ready(settled, "the policies and the webhook in force")
        yield World(api, enforcing)
    finally:
        api.close()
        cluster.stop()
        enforcing.stop()
        gatekeeper.stop()


def _review(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "rbac.authorization.k8s.io", "version": "v1", "kind": "ClusterRole"},
            "resource": {"group": "rbac.authorization.k8s.io", "version": "v1", "resource": "clusterroles"},
            "name": obj["metadata"]["name"],
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": obj,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


@pytest.mark.parametrize(("obj", "expected"), CASES, ids=[c[0]["metadata"]["name"] for c in CASES])
def test_the_patch_gives_the_object_the_api_server_stores_with_the_policies_reinvoked(
    world: World, obj: dict[str, Any], expected: dict[str, str]
) -> None:
    reply = world.api.call("POST", CLUSTER_ROLES, obj, DRY_RUN)
    assert reply.code == 201, reply.body
    stored = strip_server_fields(reply.body)
    assert stored is not None
    assert stored["metadata"]["labels"] == {**obj["metadata"]["labels"], **expected}

    response = world.enforcing.post("/v1/mutate", json.dumps(_review(obj)).encode())
    assert response.status_code == 200, response.text
    answer = response.json()["response"]
    assert answer["allowed"] is True and answer["patchType"] == "JSONPatch"
    patched = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(answer["patch"])))
    assert patched == stored


def test_one_pass_of_the_policies_before_the_mutator_would_answer_otherwise() -> None:
    """What the cases tell apart: the policies' answer without the webhook, then the mutator's label."""
    require_celgo()
    with AdmissionPolicies.build([Document.from_object(d) for d in POLICIES]) as policies:
        for obj, expected in CASES:
            answer = policies.review({"operation": "CREATE", "object": obj})
            assert answer.patched is not None
            once = answer.patched["metadata"]["labels"]["a-if-needed"]
            adds_owner = "owner" not in obj["metadata"]["labels"]
            assert (once != expected["a-if-needed"]) is adds_owner


BROKEN = """\
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: broken}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - apiGroups: [rbac.authorization.k8s.io]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [clusterroles]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"x": object.metadata.annotations.missing}}}'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: broken}
spec: {policyName: broken}
"""


def test_a_request_a_policy_refuses_is_refused_with_the_api_server_s_status(tmp_path: Path) -> None:
    require_celgo()
    documents = list(yaml.safe_load_all(BROKEN))
    obj = cluster_role("any")
    obj["metadata"]["annotations"] = {"a": "b"}
    with AdmissionPolicies.build([Document.from_object(d) for d in documents]) as policies:
        expected = policies.review({"operation": "CREATE", "object": obj})
    assert not expected.allowed and "resulted in error: no such key: missing" in expected.message

    proc = _serve(tmp_path, documents, "--enforce-admission-policies")
    try:
        response = proc.post("/v1/mutate", json.dumps(_review(obj)).encode())
    finally:
        proc.stop()
    answer = response.json()["response"]
    assert answer["allowed"] is False and "patch" not in answer
    assert answer["status"] == {"code": expected.code, "reason": expected.reason, "message": expected.message}
