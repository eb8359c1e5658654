"""AdmissionPolicies.mutate: the API server's mutating chain with a webhook after the policies (Kubernetes'
own plugin and reinvoker in the native library). A policy that counts the object's labels shows when it
ran; the values are worked out here."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest

from celkeeper.admissionpolicy import AdmissionPolicies
from celkeeper.documents import Document
from celkeeper.errors import AdmissionPolicyError
from tests.support.native import require_celgo

GROUP = "admissionregistration.k8s.io/v1"
COUNT = 'Object{metadata: Object.metadata{labels: {"count": string(size(object.metadata.labels))}}}'
OBJECT = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "x", "namespace": "d", "labels": {"app": "a"}},
}
OWNER = orjson.dumps([{"op": "add", "path": "/metadata/labels/owner", "value": "me"}])


def policies(reinvocation: str) -> AdmissionPolicies:
    rules = [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}
    ]
    documents: list[dict[str, Any]] = [
        {
            "apiVersion": GROUP,
            "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": "count"},
            "spec": {
                "reinvocationPolicy": reinvocation,
                "matchConstraints": {"resourceRules": rules},
                "mutations": [
                    {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": COUNT}}
                ],
            },
        },
        {
            "apiVersion": GROUP,
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": "count"},
            "spec": {"policyName": "count"},
        },
    ]
    return AdmissionPolicies.build([Document.from_object(d) for d in documents])


@pytest.fixture(autouse=True)
def _library() -> None:
    require_celgo()


@pytest.mark.parametrize(
    ("reinvocation", "count"),
    [
        # once, before the webhook: (app) 1
        ("Never", "1"),
        # its own change makes it run again, after the webhook: (app, count, owner) 3
        ("IfNeeded", "3"),
    ],
)
def test_the_webhook_is_sent_the_object_the_policies_left_and_an_ifneeded_policy_runs_after_it(
    reinvocation: str, count: str
) -> None:
    sent: list[dict[str, Any]] = []

    def webhook(obj: dict[str, Any]) -> bytes:
        sent.append(obj)
        return OWNER

    with policies(reinvocation) as set_:
        answer = set_.mutate({"operation": "CREATE", "object": OBJECT}, webhook)
    assert [s["metadata"]["labels"] for s in sent] == [{"app": "a", "count": "1"}]
    assert answer.allowed and answer.patched is not None
    assert answer.patched["metadata"]["labels"] == {"app": "a", "count": count, "owner": "me"}


def test_without_a_change_by_the_webhook_the_answer_is_the_policies_own() -> None:
    with policies("IfNeeded") as set_:
        answer = set_.mutate({"operation": "CREATE", "object": OBJECT}, lambda obj: b"")
        reviewed = set_.review({"operation": "CREATE", "object": OBJECT})
    # (the first request assumed the Namespace, which the set then holds)
    assert answer.assumed_namespace == "d"
    assert dataclasses.replace(answer, assumed_namespace="") == reviewed


def test_what_the_webhook_raises_is_raised_and_a_request_kubernetes_would_not_decode_is_an_error() -> None:
    with policies("IfNeeded") as set_:
        with pytest.raises(ZeroDivisionError):
            set_.mutate({"operation": "CREATE", "object": OBJECT}, lambda obj: bytes(1 // 0))
        # the set goes on answering
        assert set_.mutate({"operation": "CREATE", "object": OBJECT}, lambda obj: b"").allowed
        with pytest.raises(AdmissionPolicyError, match="not a Kubernetes object"):
            set_.mutate({"operation": "CREATE", "object": {"kind": 1}}, lambda obj: b"")
