"""`celkeeper audit` offline on Kubernetes' admission policies (celkeeper.audit.admissionpolicies): each
object audited is answered as the API server answers a CREATE of it (Kubernetes' own code), failed
validations are violations beside the constraints', what a MutatingAdmissionPolicy would change is a row
of its own, and the counts are what `celkeeper test -f` says of each object."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from celkeeper.audit import admissionpolicies as audit_admissionpolicies
from tests.cli.conftest import EXAMPLES
from tests.support.native import require_celgo

HERE = Path(__file__).resolve().parent / "audit_admissionpolicies"
POLICIES = str(HERE / "policies.yaml")
OBJECTS = str(HERE / "objects.yaml")
LATEST = EXAMPLES / "disallow-latest-tag"
FAILURE = "validation.policy.admission.k8s.io/validation_failure"


@pytest.fixture(autouse=True)
def _library() -> None:
    require_celgo()


def test_failed_bindings_are_violations_and_mutations_rows_of_their_own(cli) -> None:
    run = cli("audit", "--policy-dir", POLICIES, "--objects", OBJECTS)
    assert run.code == 1, run.err  # a Deny binding fails
    rows, totals, summary = run.out.split("\n\n")
    assert [line.split() for line in rows.splitlines()] == [
        ["CONSTRAINT", "ACTION", "OBJECT", "MESSAGE"],
        [
            "MutatingAdmissionPolicy/default-owner",
            "mutate",
            "v1/Service",
            "dev/web",
            "would",
            "change:",
            '{"metadata":{"labels":{"owner":"platform"}}}',
        ],
        [
            "MutatingAdmissionPolicy/default-owner",
            "mutate",
            "v1/Service",
            "prod/shop",
            "would",
            "change:",
            '{"metadata":{"labels":{"owner":"platform"}}}',
        ],
        [
            "ValidatingAdmissionPolicy/no-latest/no-latest-warn",
            "warn",
            "v1/Pod",
            "dev/latest",
            *["pod", "latest", "runs", "a", ":latest", "image"],
        ],
        [
            "ValidatingAdmissionPolicy/no-latest/no-latest-warn",
            "warn",
            "v1/Pod",
            "prod/both",
            *["pod", "both", "runs", "a", ":latest", "image"],
        ],
        [
            "ValidatingAdmissionPolicy/replica-limit/replica-limit-audit",
            "dryrun(audit)",
            "apps/v1/Deployment",
            "prod/big",
            *["replicas", "must", "be", "at", "most", "5,", "not", "8"],
        ],
        [
            "ValidatingAdmissionPolicy/require-team/require-team-prod",
            "deny",
            "v1/Pod",
            "prod/both",
            *["every", "pod", "needs", "a", "team", "label"],
        ],
        [
            "ValidatingAdmissionPolicy/require-team/require-team-prod",
            "deny",
            "v1/Pod",
            "prod/no-team",
            *["every", "pod", "needs", "a", "team", "label"],
        ],
    ]
    assert [line.split() for line in totals.splitlines()] == [
        ["CONSTRAINT", "ENFORCEMENT-ACTION", "TOTAL-VIOLATIONS"],
        ["ValidatingAdmissionPolicy/no-latest/no-latest-warn", "Warn", "2"],
        ["ValidatingAdmissionPolicy/replica-limit/replica-limit-audit", "Audit", "1"],
        ["ValidatingAdmissionPolicy/require-team/require-team-prod", "Deny", "2"],
        ["MutatingAdmissionPolicy/default-owner", "mutate", "2"],
    ]
    assert summary.strip() == (
        "5 violation(s) in 13 object(s), 0 constraint(s), 3 admission policy binding(s): 2 deny, 1 dryrun, "
        "2 warn; 2 object(s) a mutating admission policy would change"
    )
    assert run.err.splitlines() == [
        "celkeeper audit: summary: 13 objects read, 13 audited, 0 not audited, 0 errors"
    ]


def test_without_a_deny_binding_failing_the_exit_code_is_0(cli, tmp_path: Path) -> None:
    objects = tmp_path / "objects.yaml"
    text = Path(OBJECTS).read_text()
    objects.write_text(text.replace("{name: prod, labels: {env: prod}}", "{name: prod}"))
    run = cli("audit", "--policy-dir", POLICIES, "--objects", str(objects))
    assert run.code == 0, run.err
    assert "deny" not in run.out.split("\n\n")[0]
    assert "3 violation(s) in 13 object(s)" in run.out


def test_json_lists_each_binding_with_its_violations_and_what_would_change(cli) -> None:
    run = cli("audit", "--policy-dir", POLICIES, "--objects", OBJECTS, "-o", "json")
    assert run.code == 1, run.err
    out = json.loads(run.out)
    assert out["totalViolations"] == 5
    assert out["byEnforcementAction"] == {"deny": 2, "dryrun": 1, "warn": 2}
    bindings = {(c["name"], c["binding"]): c for c in out["constraints"]}
    assert set(bindings) == {
        ("no-latest", "no-latest-warn"),
        ("replica-limit", "replica-limit-audit"),
        ("require-team", "require-team-prod"),
    }
    audit = bindings["replica-limit", "replica-limit-audit"]
    assert audit["kind"] == "ValidatingAdmissionPolicy"
    assert audit["validationActions"] == ["Audit"]
    assert audit["status"]["totalViolations"] == 1
    assert audit["allViolations"] == [
        {
            "group": "apps",
            "version": "v1",
            "kind": "Deployment",
            "name": "big",
            "namespace": "prod",
            "message": "replicas must be at most 5, not 8",
            "enforcementAction": "dryrun",
            "enforcementActions": ["audit"],
        }
    ]
    denied = bindings["require-team", "require-team-prod"]["allViolations"]
    assert [(v["namespace"], v["name"], v["enforcementAction"]) for v in denied] == [
        ("prod", "both", "deny"),
        ("prod", "no-team", "deny"),
    ]
    assert out["wouldChange"] == [
        {
            "group": "",
            "version": "v1",
            "kind": "Service",
            "name": name,
            "namespace": namespace,
            "policies": ["default-owner"],
            "patch": {"metadata": {"labels": {"owner": "platform"}}},
        }
        for namespace, name in (("dev", "web"), ("prod", "shop"))
    ]


def _test_counts(cli, *files: str) -> dict[tuple[str, str, str], Counter[str]]:
    """What `celkeeper test -f` says of each object (by kind, namespace, name), counted by action: its
    refusal, each warning, each failure the audit annotation records for an Audit binding alone, and a
    mutation."""
    run = cli("test", *(a for f in files for a in ("-f", f)), "-o", "json")
    counts: dict[tuple[str, str, str], Counter[str]] = {}
    for row in json.loads(run.out):
        meta = row["object"]["metadata"]
        answer = row["admissionPolicies"]
        found = Counter[str]()
        if not answer["allowed"]:
            found["deny"] += 1
        found["warn"] += len(answer["warnings"])
        failures = json.loads(answer["auditAnnotations"].get(FAILURE, "[]"))
        found["dryrun"] += sum(1 for f in failures if f["validationActions"] == ["Audit"])
        if "patchedObject" in answer:
            found["mutate"] += 1
        counts[(row["object"]["kind"], meta.get("namespace", ""), meta["name"])] = found
    return counts


def _audit_counts(out: dict) -> dict[tuple[str, str, str], Counter[str]]:
    counts: dict[tuple[str, str, str], Counter[str]] = {}
    for constraint in out["constraints"]:
        for v in constraint["allViolations"]:
            key = (v["kind"], v.get("namespace", ""), v["name"])
            counts.setdefault(key, Counter())[v["enforcementAction"]] += 1
    for change in out["wouldChange"]:
        key = (change["kind"], change.get("namespace", ""), change["name"])
        counts.setdefault(key, Counter())["mutate"] += 1
    return counts


def test_the_counts_are_what_celkeeper_test_says_of_each_object(cli) -> None:
    audited = cli("audit", "--policy-dir", POLICIES, "--objects", OBJECTS, "-o", "json")
    tested = _test_counts(cli, POLICIES, OBJECTS)
    audit = _audit_counts(json.loads(audited.out))
    # test -f also reviews the policy file's objects (the parameter ConfigMap); the audit, the objects'
    tested = {k: c for k, c in tested.items() if +c and k[0] != "ConfigMap"}
    assert audit == tested
    assert sum(sum(c.values()) for c in audit.values()) == 7  # 5 violations, 2 changes


def test_constraints_and_admission_policies_together(cli) -> None:
    run = cli(
        "audit",
        *("--policy-dir", str(LATEST / "template.yaml"), "--policy-dir", str(LATEST / "constraint.yaml")),
        *("--policy-dir", POLICIES, "--objects", OBJECTS, "-o", "json"),
    )
    out = json.loads(run.out)
    constraint = next(c for c in out["constraints"] if c["kind"] == "CKDisallowedTags")
    assert [v["name"] for v in constraint["allViolations"]] == ["latest", "both"]
    assert out["totalViolations"] == 7
    assert out["byEnforcementAction"] == {"deny": 2, "dryrun": 1, "warn": 4}
    text = cli(
        "audit",
        *("--policy-dir", str(LATEST / "template.yaml"), "--policy-dir", str(LATEST / "constraint.yaml")),
        *("--policy-dir", POLICIES, "--objects", OBJECTS),
    )
    assert "7 violation(s) in 13 object(s), 1 constraint(s), 3 admission policy binding(s)" in text.out
    assert ["CKDisallowedTags/no-latest-images", "warn", "2"] in [
        line.split() for line in text.out.splitlines()
    ]


def test_in_one_set_of_files_the_policies_are_not_audited_as_objects(cli) -> None:
    together = cli("audit", "-f", POLICIES, "-f", OBJECTS, "-o", "json")
    apart = cli("audit", "--policy-dir", POLICIES, "--objects", OBJECTS, "-o", "json")
    assert _audit_counts(json.loads(together.out)) == _audit_counts(json.loads(apart.out))
    # the 4 policies and 4 bindings are policy documents; the parameter ConfigMap is an object audited
    assert together.err.splitlines()[-1] == (
        "celkeeper audit: summary: 22 objects read, 14 audited, 8 not audited (policy document: 8), 0 errors"
    )


def test_objects_answered_in_many_batches_as_they_stream(cli, monkeypatch, tmp_path: Path) -> None:
    # batches of 3; the Namespaces last, so that the constraints' pass reads the objects again (cli.inputs)
    monkeypatch.setattr(audit_admissionpolicies, "BATCH", 3)
    text = Path(OBJECTS).read_text()
    documents = text.split("\n---\n")
    namespaces = [d for d in documents if "kind: Namespace" in d]
    objects = tmp_path / "objects.yaml"
    objects.write_text("\n---\n".join([d for d in documents if d not in namespaces] + namespaces))
    moved = cli("audit", "--policy-dir", POLICIES, "--objects", str(objects), "-o", "json")
    monkeypatch.setattr(audit_admissionpolicies, "BATCH", 256)
    once = cli("audit", "--policy-dir", POLICIES, "--objects", OBJECTS, "-o", "json")
    assert _audit_counts(json.loads(moved.out)) == _audit_counts(json.loads(once.out))
    assert json.loads(moved.out)["objects"] == 13


def test_openreports_and_html_carry_the_bindings_rows(cli) -> None:
    run = cli("audit", "--policy-dir", POLICIES, "--objects", OBJECTS, "-o", "openreports")
    reports = json.loads(run.out)["items"]
    results = [r for report in reports for r in report["results"]]
    found = sorted(
        (r["policy"], r["rule"], r["properties"]["binding"], r["result"], r["resources"][0]["name"])
        for r in results
    )
    # the policy is the ValidatingAdmissionPolicy, its binding the rule (and property, as Kyverno's reports)
    assert found == [
        ("ValidatingAdmissionPolicy/no-latest", "no-latest-warn", "no-latest-warn", "warn", "both"),
        ("ValidatingAdmissionPolicy/no-latest", "no-latest-warn", "no-latest-warn", "warn", "latest"),
        (
            "ValidatingAdmissionPolicy/replica-limit",
            "replica-limit-audit",
            "replica-limit-audit",
            "warn",
            "big",
        ),
        ("ValidatingAdmissionPolicy/require-team", "require-team-prod", "require-team-prod", "fail", "both"),
        (
            "ValidatingAdmissionPolicy/require-team",
            "require-team-prod",
            "require-team-prod",
            "fail",
            "no-team",
        ),
    ]
    page = cli("audit", "--policy-dir", POLICIES, "--objects", OBJECTS, "-o", "html").out
    assert "ValidatingAdmissionPolicy/require-team/require-team-prod" in page
    assert '"total":2' in page.replace(" ", "")


BROKEN = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: broken}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations:
  - expression: "object.spec.containers.size() <"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: broken}
spec:
  policyName: broken
  validationActions: [Deny]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: dangling}
spec:
  policyName: nowhere
  validationActions: [Deny]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replica-limit-missing}
spec:
  policyName: replica-limit
  validationActions: [Deny]
  paramRef: {name: absent, namespace: policy-params, parameterNotFoundAction: Deny}
"""


def test_policy_errors_are_reported_once_located_and_every_object_is_accounted_for(
    cli, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(BROKEN)
    # without the Audit binding's parameter, the missing one is the only refusal of the Deployments
    policies = tmp_path / "policies.yaml"
    policies.write_text(Path(POLICIES).read_text().replace("replica-limit-audit", "replica-limit-audit-x"))
    run = cli("audit", "--policy-dir", str(policies), "--policy-dir", str(broken), "--objects", OBJECTS)
    assert run.code == 1
    errors = [line for line in run.err.splitlines() if "summary" not in line]
    compile_error = [e for e in errors if "spec.validations[0].expression" in e]
    assert len(compile_error) == 1, errors
    assert compile_error[0].startswith(f"celkeeper audit: {broken}:9:")
    assert any(f"{broken}:22:15:" in e and "nowhere" in e for e in errors), errors  # a note: no effect
    missing = [e for e in errors if "replica-limit-missing" in e]
    assert missing == [
        f"celkeeper audit: {broken}:31:13: document 4: spec.paramRef: "
        'ValidatingAdmissionPolicyBinding "replica-limit-missing" (policy "replica-limit"): '
        "failed to configure binding: no params found for policy binding "
        "with `Deny` parameterNotFoundAction: the API server refuses every request the binding matches (2 "
        "object(s) here)"
    ]
    assert run.err.splitlines()[-1] == (
        "celkeeper audit: summary: 13 objects read, 13 audited, 0 not audited, 2 errors"
    )
    # the refusals are the binding's error, not violations of each Deployment
    denied = [line.split()[2] for line in run.out.split("\n\n")[0].splitlines() if " deny " in line]
    assert denied == ["v1/Pod", "v1/Pod"]
    # and the errors of each Deployment it refused, in the binding's status
    found = json.loads(
        cli(
            "audit",
            "--policy-dir",
            str(policies),
            "--policy-dir",
            str(broken),
            "--objects",
            OBJECTS,
            "-o",
            "json",
        ).out
    )
    [missing_status] = [
        c["status"] for c in found["constraints"] if c.get("binding") == "replica-limit-missing"
    ]
    assert missing_status["totalAuditErrors"] == 2
    assert {e["kind"] for e in missing_status["auditErrors"]} == {"Deployment"}
    assert found["errors"] == 2


def test_an_object_the_api_server_would_not_decode_is_an_error(cli, tmp_path: Path) -> None:
    odd = tmp_path / "odd.yaml"
    odd.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: odd, namespace: prod}\n"
        "spec: {replicas: many}\n"
    )
    run = cli("audit", "--policy-dir", POLICIES, "--objects", str(odd))
    assert run.code == 1, run.err
    [error] = [line for line in run.err.splitlines() if "not reviewed" in line]
    assert error.startswith(f"celkeeper audit: {odd}") and "apps/v1/Deployment prod/odd" in error
    assert "cannot unmarshal string" in error
    assert run.err.splitlines()[-1].endswith(", 1 errors")
