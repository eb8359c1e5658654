"""celkeeper.admissionpolicy.explain: AdmissionPolicies.explain's answer (the API server's, the same as
review's) and its trace, policy by policy and binding by binding, and the trace as text. The policies are
tests/admissionpolicy/explain/policies.yaml."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from celkeeper.admissionpolicy import AdmissionPolicies, Explained, trace_lines
from celkeeper.documents import Document, parse_documents
from celkeeper.errors import AdmissionPolicyError
from tests.support.native import require_celgo

EXAMPLES = Path(__file__).resolve().parent / "explain"


def _documents(name: str) -> list[Document]:
    parsed = parse_documents((EXAMPLES / name).read_text(), name)
    assert not parsed.errors
    return list(parsed.documents)


def _object(name: str) -> dict[str, Any]:
    data = _documents(name)[0].data
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def policies() -> Iterator[AdmissionPolicies]:
    require_celgo()
    documents = _documents("policies.yaml")
    kinds = ("ConfigMap", "Namespace")
    with AdmissionPolicies.build(
        [d for d in documents if d.kind not in kinds],
        params=[d for d in documents if d.kind == "ConfigMap"],
        namespaces=[d for d in documents if d.kind == "Namespace"],
    ) as built:
        assert not built.problems
        yield built


def _binding(traces: tuple[Any, ...], policy: str, binding: str = "") -> Any:
    found = [t for t in traces if t["policy"] == policy and t.get("binding", "") == binding]
    assert len(found) == 1, traces
    return found[0]


def test_the_answer_is_reviews_and_the_trace_says_which_validation_failed(
    policies: AdmissionPolicies,
) -> None:
    request = {"operation": "CREATE", "object": _object("deployment-8.yaml")}
    explained = policies.explain(request)
    assert explained.answer == policies.review(request)
    assert not explained.answer.allowed and explained.validated
    assert explained.answer.message.endswith(
        "with binding 'replica-limit-all' denied request: replicas must be at most 5, not 8"
    )
    applied = _binding(explained.validating, "replica-limit", "replica-limit-all")
    assert applied["applied"] and applied["validationActions"] == ["Deny"]
    (param,) = applied["params"]
    assert param["param"] == "policy-params/replica-limits" and param["matched"]
    assert [(v["result"], v.get("message")) for v in param["validations"]] == [
        ("failed", "replicas must be at most 5, not 8"),
        ("passed", None),
    ]
    assert param["auditAnnotations"] == [{"key": "replicas", "result": "published", "value": "8"}]


def test_excluded_bindings_and_policies_name_the_criterion(policies: AdmissionPolicies) -> None:
    explained = policies.explain({"operation": "CREATE", "object": _object("deployment-8.yaml")})
    prod = _binding(explained.validating, "replica-limit", "replica-limit-prod")
    assert not prod["applied"]
    assert prod["excluded"] == "binding spec.matchResources.namespaceSelector"
    assert prod["reason"] == (
        '{"matchLabels":{"env":"prod"}} does not select namespace shop '
        "(labels kubernetes.io/metadata.name=shop,team=payments)"
    )
    update_only = _binding(explained.validating, "no-scale-down")
    assert update_only["excluded"] == "policy spec.matchConstraints.resourceRules"
    assert update_only["reason"] == 'no rule matches CREATE apps/v1 deployments "web"'


def test_a_false_match_condition_and_a_mutation(policies: AdmissionPolicies) -> None:
    explained = policies.explain({"operation": "CREATE", "object": _object("deployment-exempt.yaml")})
    assert explained.answer.allowed and explained.answer.patched is not None
    (param,) = _binding(explained.validating, "replica-limit", "replica-limit-all")["params"]
    assert not param["matched"] and param["failedCondition"] == "not-exempt"
    assert "validations" not in param
    (mutated,) = _binding(explained.mutating, "team-label", "team-label")["params"]
    assert mutated["mutations"] == [
        {"index": 0, "patchType": "JSONPatch", "patch": {"metadata": {"labels": {"team": "platform"}}}}
    ]


def test_an_update_sees_the_old_object(policies: AdmissionPolicies) -> None:
    explained = policies.explain(
        {
            "operation": "UPDATE",
            "object": _object("deployment-3.yaml"),
            "oldObject": _object("deployment-8.yaml"),
        }
    )
    (param,) = _binding(explained.validating, "no-scale-down", "no-scale-down")["params"]
    assert param["validations"][0]["result"] == "failed"
    assert param["validations"][0]["message"] == "scaling down from 8 is not allowed"
    assert not explained.answer.allowed


def test_the_trace_as_text(policies: AdmissionPolicies) -> None:
    explained = policies.explain({"operation": "CREATE", "object": _object("deployment-8.yaml")})
    lines = trace_lines(explained)
    assert (
        lines[0] == "  MutatingAdmissionPolicy/team-label binding team-label  applied  (failurePolicy Fail)"
    )
    assert "      validation[0]  failed: replicas must be at most 5, not 8" in lines
    assert '      auditAnnotation replicas  "8"' in lines
    assert isinstance(explained, Explained) and explained.to_json()["validated"] is True


def test_a_request_it_cannot_decode_is_an_error(policies: AdmissionPolicies) -> None:
    with pytest.raises(AdmissionPolicyError, match="an UPDATE needs the oldObject"):
        policies.explain({"operation": "UPDATE", "object": _object("deployment-8.yaml")})
