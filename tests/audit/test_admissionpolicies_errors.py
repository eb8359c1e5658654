"""What Kubernetes' admission policies cannot answer in the audit is counted as the constraints' audit
counts an object a constraint cannot evaluate (RunResults.add_error): an object refused by a binding whose
parameter does not exist (parameterNotFoundAction Deny), an object the API server would not decode, a
policy or binding the API server would refuse, policies that cannot be read. Kubernetes' own code answers
(the native library); what is expected follows from the documents written here."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from celkeeper.admissionpolicy import AdmissionPolicies
from celkeeper.audit import Evaluator, RunResults
from celkeeper.audit.admissionpolicies import ALL_POLICIES, AdmissionAudit, RunProblems, problem_key
from celkeeper.audit.results import ConstraintKey, ObjectRef, Violation
from celkeeper.audit.run import audit_objects
from celkeeper.documents import Document
from celkeeper.errors import AdmissionPolicyError, CelkeeperError
from celkeeper.kube.discovery import ApiResource
from tests.audit.test_evaluate import policies
from tests.support.native import require_celgo

GROUP = "admissionregistration.k8s.io/v1"
DEPLOYMENTS = [
    {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}
]


@pytest.fixture(autouse=True)
def _library() -> None:
    require_celgo()


def validating(
    name: str, expression: str = "object.spec.replicas <= 3", param: bool = False
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": DEPLOYMENTS},
        "validations": [{"expression": expression, "message": "too many replicas"}],
    }
    if param:
        spec["paramKind"] = {"apiVersion": "v1", "kind": "ConfigMap"}
    return {
        "apiVersion": GROUP,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def binding(name: str, policy: str, **more: Any) -> dict[str, Any]:
    return {
        "apiVersion": GROUP,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": policy, "validationActions": ["Deny"], **more},
    }


MISSING_PARAM = binding(
    "missing",
    "limit",
    paramRef={"name": "absent", "namespace": "params", "parameterNotFoundAction": "Deny"},
)


def deployment(name: str, replicas: Any = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "app:1"}]},
            },
        },
    }


class Said:
    """The problems, as the offline tool's inputs take them."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.notes: list[str] = []

    def error(self, problem: str | CelkeeperError) -> None:
        self.errors.append(str(problem))

    def note(self, text: str) -> None:
        self.notes.append(text)


class Recorded:
    """What a run reports (audit.run.Reporter): the violations and the objects' errors."""

    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self.errors: list[tuple[ConstraintKey, ObjectRef, str]] = []

    def violation(self, violation: Violation) -> None:
        self.violations.append(violation)

    def error(self, constraint: ConstraintKey, ref: ObjectRef, message: str) -> None:
        self.errors.append((constraint, ref, message))

    def page(self, resource: ApiResource, objects: int) -> None:
        del resource, objects

    def change(self, change: Violation) -> None:
        del change


def audit_of(problems: Any, *data: dict[str, Any]) -> AdmissionAudit:
    documents = [Document.from_object(d, file=f"{d['metadata']['name']}.yaml") for d in data]
    built = AdmissionPolicies.build(documents)
    return AdmissionAudit.of(problems, built, documents)


def test_each_object_a_binding_cannot_be_configured_for_is_its_error_said_once_at_the_binding() -> None:
    said = Said()
    admission = audit_of(said, validating("limit", "object.spec.replicas <= 3", param=True), MISSING_PARAM)
    try:
        found = [admission.take(admission.submit(deployment(n))) for n in ("a", "b")]
        assert [f.violations for f in found] == [(), ()]
        assert [f.errors for f in found] == [(), ()]
        message = (
            "failed to configure binding: no params found for policy binding with `Deny` "
            "parameterNotFoundAction"
        )
        assert [f.refused for f in found] == [
            ((("ValidatingAdmissionPolicy", "limit/missing"), message),)
        ] * 2
        assert [f.ref.name for f in found] == ["a", "b"]
        [unconfigured] = admission.finish()
        assert isinstance(unconfigured, AdmissionPolicyError)
        assert str(unconfigured) == (
            "missing.yaml: document 1: spec.paramRef: "
            'ValidatingAdmissionPolicyBinding "missing" (policy "limit"): '
            f"{message}: the API server refuses every request the binding matches (2 object(s) here)"
        )
        assert admission.finish() == []  # said once
        assert said.errors == []  # the AdmissionAudit says nothing itself: its callers count and say
    finally:
        admission.close()


def test_an_object_the_api_server_would_not_decode_is_an_error_of_every_policy() -> None:
    admission = audit_of(Said(), validating("limit"), binding("limit", "limit"))
    try:
        found = admission.take(admission.submit(deployment("odd", replicas="many")))
        [(key, message)] = found.errors
        assert key == ALL_POLICIES == ("AdmissionPolicy", "*")
        assert message.startswith("not reviewed by the admission policies: object: json: cannot unmarshal")
        assert "spec.replicas" in message
        assert found.violations == () and found.refused == ()
    finally:
        admission.close()


def test_a_run_counts_them_as_the_errors_of_the_objects() -> None:
    admission = audit_of(
        Said(),
        validating("limit"),
        binding("limit", "limit"),
        validating("param-limit", param=True),
        binding("missing", "param-limit", paramRef=MISSING_PARAM["spec"]["paramRef"]),
    )
    results = RunResults()
    report = Recorded()
    try:
        audited = audit_objects(
            Evaluator(policies()),
            [deployment("ok"), deployment("big", 5), deployment("odd", "many")],
            lambda name: None,
            results,
            report,
            skip_unknown_namespaces=False,
            admission=admission,
        )
    finally:
        admission.close()
    assert audited == 3
    assert [(v.constraint, v.ref.name) for v in report.violations] == [
        (("ValidatingAdmissionPolicy", "limit/limit"), "big")
    ]
    # refused by the binding without its parameter: "ok" ("big" is refused first by limit/limit, and the
    # API server answers with its first refusal); "odd" cannot be reviewed at all
    errors = sorted((key, ref.name) for key, ref, _ in report.errors)
    assert errors == [(ALL_POLICIES, "odd"), (("ValidatingAdmissionPolicy", "param-limit/missing"), "ok")]
    assert results.errors == 2 and results.total == 1
    assert results.constraints[("ValidatingAdmissionPolicy", "param-limit/missing")].errors == 1
    assert results.constraints[ALL_POLICIES].errors == 1


def test_in_the_cluster_a_refused_policy_or_binding_is_an_error_of_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    results = RunResults()
    problems = RunProblems(results)
    broken = validating("broken", "object.spec.replicas <")
    refused = binding("refused", "limit")
    refused["spec"]["validationActions"] = ["Bogus"]
    with caplog.at_level(logging.INFO, logger="celkeeper.audit"):
        admission = audit_of(problems, broken, binding("broken", "broken"), validating("limit"), refused)
        admission.close()
        problems.error("cannot read the cluster's admission policies (403): not audited in this run")
        problems.error("cannot read the cluster's admission policies (403): not audited in this run")
    counted = {key: found.errors for key, found in results.constraints.items()}
    assert counted == {
        ("ValidatingAdmissionPolicy", "broken"): 1,
        ("ValidatingAdmissionPolicy", "limit/refused"): 1,
        ALL_POLICIES: 1,  # said (and counted) once per run
    }
    assert results.errors == 3
    entries = results.status_fields(("ValidatingAdmissionPolicy", "limit/refused")).get("auditErrors")
    assert entries is not None
    assert (entries[0]["kind"], entries[0]["name"]) == ("ValidatingAdmissionPolicyBinding", "refused")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3 and all(w.startswith("admission policies: ") for w in warnings)
    assert any("broken.yaml" in w and "spec.validations[0].expression" in w for w in warnings)
    # the binding of the refused policy has no effect: a note, not an error
    assert any(
        "binds ValidatingAdmissionPolicy" in r.getMessage()
        for r in caplog.records
        if r.levelno == logging.INFO
    )


def test_problem_key() -> None:
    policy = AdmissionPolicyError("x")
    policy.subject = ("MutatingAdmissionPolicy", "m", "")
    assert problem_key(policy) == (
        ("MutatingAdmissionPolicy", "m"),
        ObjectRef("admissionregistration.k8s.io", "v1", "MutatingAdmissionPolicy", "", "m"),
    )
    bound = AdmissionPolicyError("x")
    bound.subject = ("MutatingAdmissionPolicyBinding", "b", "m")
    assert problem_key(bound)[0] == ("MutatingAdmissionPolicy", "m/b")
    assert problem_key("any")[0] == ALL_POLICIES
    assert problem_key(AdmissionPolicyError("of a parameter"))[0] == ALL_POLICIES
