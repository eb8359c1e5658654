"""celkeeper.admissionpolicy.policies: a set of Kubernetes admission policies run by Kubernetes' own plugins
in the native library; problems located in the documents; answers in the API server's words.

The decisions are checked against the real kube-apiserver by tests/e2e/admissionpolicy (the differential);
these tests check what celkeeper adds around them: the documents in, the answers out, the locations."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from celkeeper.admissionpolicy import AdmissionPolicies, merge_patch
from celkeeper.documents import Document, parse_documents
from celkeeper.errors import AdmissionPolicyError, AdmissionPolicyNote
from tests.support.native import require_celgo

POLICY = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replicas
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  validations:
  - expression: object.spec.replicas <= 5
    messageExpression: "'replicas must be at most 5, not ' + string(object.spec.replicas)"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: replicas-binding
spec:
  policyName: replicas
  validationActions: [Deny]
"""

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "demo"},
    "spec": {
        "replicas": 7,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
        },
    },
}


def documents(text: str, name: str = "policies.yaml") -> list[Document]:
    parsed = parse_documents(text, name)
    assert not parsed.errors
    return list(parsed.documents)


@pytest.fixture
def replicas() -> Iterator[AdmissionPolicies]:
    require_celgo()
    with AdmissionPolicies.build(documents(POLICY)) as policies:
        yield policies


def test_a_denial_is_the_api_servers_status(replicas: AdmissionPolicies) -> None:
    answer = replicas.review({"operation": "CREATE", "object": DEPLOYMENT})
    assert not answer.allowed
    assert answer.code == 422 and answer.reason == "Invalid"
    assert answer.message == (
        "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'replicas' with binding "
        "'replicas-binding' denied request: replicas must be at most 5, not 7"
    )
    assert answer.assumed_namespace == "demo"


def test_an_object_the_policy_admits(replicas: AdmissionPolicies) -> None:
    fine = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "replicas": 2}}
    answer = replicas.review({"operation": "CREATE", "object": fine})
    assert answer.allowed and answer.status is None and answer.patched is None


def test_a_policy_the_api_server_refuses_is_located() -> None:
    require_celgo()
    text = POLICY.replace("object.spec.replicas <= 5", "object.spec.replicas <=")
    with AdmissionPolicies.build(documents(text)) as policies:
        errors = [p for p in policies.problems if not isinstance(p, AdmissionPolicyNote)]
        notes = [p for p in policies.problems if isinstance(p, AdmissionPolicyNote)]
    assert len(errors) == 1
    assert str(errors[0]).startswith(
        "policies.yaml:13:40: document 1: spec.validations[0].expression: "  # where the expression ends
        'ValidatingAdmissionPolicy.admissionregistration.k8s.io "replicas" is invalid: '
        "spec.validations[0].expression: Invalid value: "
    )
    assert "compilation failed" in str(errors[0])
    # the policy is not stored, as the API server would not store it: its binding does nothing
    assert [str(n) for n in notes] == [
        "policies.yaml:21:15: document 2: spec.policyName: ValidatingAdmissionPolicyBinding "
        '"replicas-binding" binds ValidatingAdmissionPolicy "replicas", which the API server would refuse '
        "(see its error): the binding has no effect (the API server skips a binding whose policy does not "
        "exist)"
    ]


def test_an_unknown_field_is_refused_as_kubectl_refuses_it() -> None:
    require_celgo()
    text = POLICY.replace("  validations:\n", "  validation:\n  - expression: 'true'\n  validations:\n", 1)
    with AdmissionPolicies.build(documents(text)) as policies:
        errors = [p for p in policies.problems if not isinstance(p, AdmissionPolicyNote)]
    assert len(errors) == 1
    assert errors[0].location.path == "spec.validation"
    assert (errors[0].location.line, errors[0].location.column) == (12, 3)
    assert 'strict decoding error: unknown field "spec.validation"' in errors[0].message


def test_a_request_that_cannot_be_decoded() -> None:
    require_celgo()
    with (
        AdmissionPolicies.build(documents(POLICY)) as policies,
        pytest.raises(AdmissionPolicyError, match="an UPDATE needs the oldObject"),
    ):
        policies.review({"operation": "UPDATE", "object": DEPLOYMENT})


def test_merge_patch() -> None:
    assert merge_patch({"a": 1, "b": {"c": 2, "d": 3}}, {"a": 1, "b": {"c": 4}, "e": [1]}) == {
        "b": {"c": 4, "d": None},
        "e": [1],
    }
