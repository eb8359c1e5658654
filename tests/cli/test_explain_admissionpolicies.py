"""`celkeeper explain` on Kubernetes' admission policies (ValidatingAdmissionPolicy,
MutatingAdmissionPolicy): the API server's answer in its words, then why, binding by binding; -o json;
an UPDATE with --old; beside Gatekeeper's constraints; errors located. The policies are
tests/admissionpolicy/explain/policies.yaml; the answers themselves are Kubernetes' plugins'."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import EXAMPLES
from tests.support.native import require_celgo

FILES = Path(__file__).resolve().parents[1] / "admissionpolicy" / "explain"
POLICIES = str(FILES / "policies.yaml")
NOT_PROD = (
    "  ValidatingAdmissionPolicy/replica-limit binding replica-limit-prod  not applied (binding "
    'spec.matchResources.namespaceSelector): {"matchLabels":{"env":"prod"}} does not select namespace shop '
    "(labels kubernetes.io/metadata.name=shop,team=payments)"
)


@pytest.fixture(autouse=True)
def _library() -> None:
    require_celgo()


def test_a_denial_explained_binding_by_binding(cli) -> None:
    run = cli("explain", "-f", str(FILES / "deployment-8.yaml"), POLICIES)
    assert run.code == 1, run.err
    assert run.err == ""
    assert run.out.splitlines() == [
        "Deployment shop/web (at the API server's admission policies): DENIED",
        '  denied (422 Invalid): deployments.apps "web" is forbidden: ValidatingAdmissionPolicy '
        "'replica-limit' with binding 'replica-limit-all' denied request: replicas must be at most 5, not 8",
        "  audit annotation replica-limit/replicas: 8",
        "",
        "  MutatingAdmissionPolicy/team-label binding team-label  applied  (failurePolicy Fail)",
        '    mutation[0] JSONPatch  {"metadata":{"labels":{"team":"platform"}}}',
        "  ValidatingAdmissionPolicy/no-scale-down  not applied "
        '(policy spec.matchConstraints.resourceRules): no rule matches CREATE apps/v1 deployments "web"',
        "  ValidatingAdmissionPolicy/replica-limit binding replica-limit-all  applied  "
        "(validationActions Deny; failurePolicy Fail)",
        "    param policy-params/replica-limits",
        "      validation[0]  failed: replicas must be at most 5, not 8",
        "        object.spec.replicas <= int(params.data.maxReplicas)",
        "        messageExpression: 'replicas must be at most ' + params.data.maxReplicas + ', not ' + "
        "string(object.spec.replicas)",
        "      validation[1]  passed",
        "        'team' in object.metadata.labels",
        '      auditAnnotation replicas  "8"',
        NOT_PROD,
    ]


def test_a_false_match_condition_and_a_mutation_allowed(cli) -> None:
    run = cli("explain", "-f", str(FILES / "deployment-exempt.yaml"), POLICIES)
    assert run.code == 0, run.out + run.err
    lines = run.out.splitlines()
    assert lines[:2] == [
        "Deployment shop/web (at the API server's admission policies): allowed",
        '  mutated: {"metadata":{"labels":{"team":"platform"}}}',
    ]
    assert "      matchCondition 'not-exempt'  false: not evaluated further" in lines


def test_an_update_with_the_stored_object(cli) -> None:
    run = cli(
        "explain",
        "-f",
        str(FILES / "deployment-3.yaml"),
        "--operation",
        "UPDATE",
        "--old",
        str(FILES / "deployment-8.yaml"),
        POLICIES,
    )
    assert run.code == 1, run.err
    assert "denied request: scaling down from 8 is not allowed" in run.out.splitlines()[1]
    assert (
        "  MutatingAdmissionPolicy/team-label  not applied (policy spec.matchConstraints.resourceRules): "
        in (run.out)
    )
    assert "    validation[0]  failed: scaling down from 8 is not allowed" in run.out.splitlines()


def test_as_json(cli) -> None:
    run = cli("explain", "-f", str(FILES / "deployment-exempt.yaml"), POLICIES, "-o", "json")
    assert run.code == 0, run.err
    (entry,) = json.loads(run.out)
    explained = entry["admissionPolicies"]
    assert explained["answer"]["allowed"] is True
    assert explained["answer"]["patch"] == {"metadata": {"labels": {"team": "platform"}}}
    assert explained["validated"] is True
    (mutating,) = explained["mutating"]
    assert mutating["params"][0]["mutations"][0]["patch"] == {"metadata": {"labels": {"team": "platform"}}}
    prod = [b for b in explained["validating"] if b.get("binding") == "replica-limit-prod"]
    assert prod[0]["excluded"] == "binding spec.matchResources.namespaceSelector"


def test_beside_gatekeepers_constraints(cli) -> None:
    run = cli("explain", "-f", str(FILES / "deployment-8.yaml"), POLICIES, str(EXAMPLES / "replica-limits"))
    assert run.code == 1, run.err  # Gatekeeper allows, the API server's policies deny
    lines = run.out.splitlines()
    assert lines[0] == "Deployment shop/web (CREATE at validation.gatekeeper.sh): allowed"
    assert "Deployment shop/web (at the API server's admission policies): DENIED" in lines
    assert NOT_PROD in lines
    run = cli(
        "explain",
        "-f",
        str(FILES / "deployment-8.yaml"),
        POLICIES,
        str(EXAMPLES / "replica-limits"),
        "-o",
        "json",
    )
    (entry,) = json.loads(run.out)
    assert entry["allowed"] is True and entry["admissionPolicies"]["answer"]["allowed"] is False


def test_errors_are_located(cli) -> None:
    run = cli("explain", "-f", str(FILES / "deployment-3.yaml"), "--operation", "UPDATE", POLICIES)
    assert run.code != 0
    assert "deployment-3.yaml: document 1: an UPDATE needs the oldObject" in run.err
    refused = str(FILES.parent / "suite" / "refused.yaml")
    run = cli("explain", "-f", str(FILES / "deployment-3.yaml"), refused, POLICIES)
    assert run.code == 0, run.out
    assert "refused.yaml:13:36: document 1: spec.validations[0].expression:" in run.err
