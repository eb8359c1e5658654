"""`celkeeper test -f` on Kubernetes' admission policies (celkeeper.cli.admissionpolicies): the API server's
answers in its words, errors located, the exit code. The answers themselves are Kubernetes' (checked
against a real kube-apiserver by tests/admissionpolicy/test_policies_apiserver.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.native import require_celgo

SUITE = Path(__file__).resolve().parents[1] / "admissionpolicy" / "suite"


@pytest.fixture(autouse=True)
def _library() -> None:
    require_celgo()


def test_a_denial_and_the_audit_annotations_in_the_api_server_s_words(cli) -> None:
    run = cli(
        "test",
        "-f",
        str(SUITE / "policies.yaml"),
        "-f",
        str(SUITE / "namespace-prod.yaml"),
        "-f",
        str(SUITE / "deployment-8.yaml"),
    )
    assert run.code == 1, run.err
    assert run.out.splitlines() == [
        "apps/v1/Deployment shop/web: audit annotation replica-limit/replicas: 8",
        "apps/v1/Deployment shop/web: audit annotation "
        "validation.policy.admission.k8s.io/validation_failure: "
        '[{"message":"replicas must be at most 5, not 8","policy":"replica-limit",'
        '"binding":"replica-limit-prod","expressionIndex":0,"validationActions":["Deny","Audit"]}]',
        'apps/v1/Deployment shop/web: denied (422 Invalid): deployments.apps "web" is forbidden: '
        "ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-prod' denied request: "
        "replicas must be at most 5, not 8",
    ]
    # the parameter ConfigMap is reviewed too, in a namespace the inputs do not hold
    assert run.err.splitlines() == [
        "celkeeper test: note: Namespace policy-params is not among the inputs: the admission policies "
        "see it as the API server creates a Namespace without labels",
        "celkeeper test: summary: 7 objects read, 7 reviewed, 0 not reviewed, 0 errors",
    ]


def test_a_mutation_is_shown_as_what_changed(cli) -> None:
    run = cli(
        "test",
        "-f",
        str(SUITE / "policies.yaml"),
        "-f",
        str(SUITE / "namespace-prod.yaml"),
        "-f",
        str(SUITE / "deployment-2.yaml"),
    )
    assert run.code == 0, run.err
    assert (
        "apps/v1/Deployment shop/api: mutated: " + '{"metadata":{"labels":{"team":"payments"}}}'
        in run.out.splitlines()
    )


def test_json_output_carries_the_whole_answer(cli) -> None:
    run = cli(
        "test",
        "-f",
        str(SUITE / "policies.yaml"),
        "-f",
        str(SUITE / "namespace-prod.yaml"),
        "-f",
        str(SUITE / "deployment-2.yaml"),
        "-o",
        "json",
    )
    rows = json.loads(run.out)
    (row,) = [r for r in rows if "admissionPolicies" in r]
    assert row["object"]["metadata"] == {"name": "api", "namespace": "shop"}
    answer = row["admissionPolicies"]
    assert answer["allowed"] is True
    assert answer["patchedObject"]["metadata"]["labels"] == {"team": "payments"}
    # the API server's defaults are in the object it admits
    container = answer["patchedObject"]["spec"]["template"]["spec"]["containers"][0]
    assert container["imagePullPolicy"] == "IfNotPresent"


def test_a_policy_the_api_server_refuses_is_a_located_error(cli) -> None:
    run = cli("test", "-f", str(SUITE / "refused.yaml"))
    assert run.code == 1
    first = run.err.splitlines()[0]
    assert first.startswith(
        f"celkeeper test: {SUITE / 'refused.yaml'}:13:36: document 1: spec.validations[0].expression: "
        'ValidatingAdmissionPolicy.admissionregistration.k8s.io "broken" is invalid: '
    )
    assert "compilation failed: ERROR: <input>:1:19: Syntax error" in first


def test_without_the_namespace_the_binding_does_not_apply(cli) -> None:
    # no Namespace given: shop is taken as created without labels (not env: prod)
    run = cli("test", "-f", str(SUITE / "policies.yaml"), "-f", str(SUITE / "deployment-8.yaml"))
    assert run.code == 0, run.out
    assert run.out.splitlines() == [
        'apps/v1/Deployment shop/web: mutated: {"metadata":{"labels":{"team":"unowned"}}}'
    ]
    assert (
        "celkeeper test: note: Namespace shop is not among the inputs: the admission policies see it as the "
        "API server creates a Namespace without labels"
    ) in run.err.splitlines()


def test_each_object_gets_its_own_answer_across_batches(cli, tmp_path: Path) -> None:
    # more objects than one batch answers (cli.admissionpolicies.BATCH), several batches under way at once
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "few-keys"},
        "spec": {
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["configmaps"],
                    }
                ]
            },
            "validations": [
                {
                    "expression": "object.data.size() <= 3",
                    "messageExpression": "object.metadata.name + ' has ' + string(object.data.size())",
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "few-keys"},
        "spec": {"policyName": "few-keys", "validationActions": ["Deny"]},
    }
    sizes = {f"cm-{i}": 1 + (i * 7) % 5 for i in range(700)}
    items = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"},
            "data": {f"k{k}": "v" for k in range(size)},
        }
        for name, size in sizes.items()
    ]
    (tmp_path / "policy.json").write_text(
        json.dumps({"kind": "List", "apiVersion": "v1", "items": [policy, binding]})
    )
    (tmp_path / "objects.json").write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    run = cli("test", "-f", str(tmp_path / "policy.json"), "-f", str(tmp_path / "objects.json"))
    assert run.code == 1, run.err
    denied = {}
    for line in run.out.splitlines():
        head, _, message = line.partition(" denied request: ")
        denied[head.split(": ", 1)[0]] = message
    assert denied == {f"v1/ConfigMap default/{n}": f"{n} has {s}" for n, s in sizes.items() if s > 3}
    assert (
        run.err.splitlines()[-1]
        == "celkeeper test: summary: 702 objects read, 702 reviewed, 0 not reviewed, 0 errors"
    )


def test_a_namespace_spelled_with_escapes_is_found(cli, tmp_path: Path) -> None:
    # the pass that looks for Namespaces and parameters reads only files whose text may hold one: a kind
    # spelled with JSON escapes is such a text
    namespace = tmp_path / "namespace.json"
    namespace.write_text(
        '{"apiVersion": "v1", "kind": "Name\\u0073pace", '
        '"metadata": {"name": "shop", "labels": {"env": "prod", "team": "payments"}}}'
    )
    run = cli(
        "test",
        "-f",
        str(SUITE / "policies.yaml"),
        "-f",
        str(namespace),
        "-f",
        str(SUITE / "deployment-8.yaml"),
    )
    assert run.code == 1, run.err
    assert (
        'apps/v1/Deployment shop/web: denied (422 Invalid): deployments.apps "web" is forbidden: '
        "ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-prod' denied request: "
        "replicas must be at most 5, not 8"
    ) in run.out.splitlines()


def test_without_gatekeeper_s_policies_its_engine_is_not_loaded(cli, tmp_path: Path, monkeypatch) -> None:
    # only Kubernetes' admission policies among the files: Gatekeeper's engine is not loaded and no object
    # is decided by it; the output, the review that cannot be read among it, is what it is beside a
    # Gatekeeper policy that matches none of the objects
    from celkeeper.cli import testcmd

    loaded: list[str] = []
    engine = testcmd._engine
    monkeypatch.setattr(testcmd, "_engine", lambda name: loaded.append(name) or engine(name))
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u", "operation": "BREAK", "object": {"apiVersion": "v1", "kind": "ConfigMap"}},
    }
    (tmp_path / "review.json").write_text(json.dumps(review))
    (tmp_path / "kindless.json").write_text(json.dumps({"apiVersion": "v1", "metadata": {"name": "x"}}))
    files = ["-f", str(SUITE / "policies.yaml"), "-f", str(SUITE / "namespace-prod.yaml")]
    files += ["-f", str(SUITE / "deployment-8.yaml"), "-f", str(tmp_path / "review.json")]
    files += ["-f", str(tmp_path / "kindless.json")]
    alone = cli("test", *files)
    assert not loaded
    assert alone.code == 1, alone.err
    assert "denied request: replicas must be at most 5, not 8" in alone.out
    assert "2 not reviewed" in alone.err.splitlines()[-1]
    template = Path(__file__).resolve().parents[2] / "examples" / "required-labels" / "template.yaml"
    constraint = {
        "apiVersion": "constraints.celkeeper.io/v1beta1",
        "kind": "CKRequiredLabels",
        "metadata": {"name": "matches-nothing"},
        "spec": {"match": {"kinds": [{"apiGroups": ["example.com"], "kinds": ["Nothing"]}]}},
    }
    (tmp_path / "constraint.json").write_text(json.dumps(constraint))
    beside = cli("test", *files, "-f", str(template), "-f", str(tmp_path / "constraint.json"))
    assert loaded
    assert (beside.code, beside.out) == (alone.code, alone.out)
    # beside: the template and the constraint are reviewed too (their kinds' resources guessed)
    assert [line for line in beside.err.splitlines() if "no CRD among the inputs" not in line] == [
        line.replace("9 objects read, 7 reviewed", "11 objects read, 9 reviewed")
        for line in alone.err.splitlines()
    ]
    assert (
        "request.operation: operation must be one of CREATE, UPDATE, DELETE, CONNECT, not 'BREAK'"
        in alone.err
    )
