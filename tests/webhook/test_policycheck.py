"""Templates and constraints checked when they are applied (POST /v1/admitpolicy): the pure check, then the
route on a real `celkeeper serve` over TLS, refusing (deny) or warning (warn)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from celkeeper.cel import get_engine
from celkeeper.documents import Document
from celkeeper.policy import PolicySet, build_policy_set
from celkeeper.templates import TemplateCompiler
from celkeeper.webhook.policycheck import check_policy_request
from tests.incluster.support import required_labels, required_labels_template
from tests.support.native import require_celgo
from tests.support.serve import ServeProcess

KIND = "CheckLabels"
EXPRESSION = "spec.targets[0].code[0].source.validations[0].expression"


@pytest.fixture(scope="module")
def compiler() -> TemplateCompiler:
    return TemplateCompiler(get_engine())


@pytest.fixture(scope="module")
def policies(compiler: TemplateCompiler) -> PolicySet:
    return build_policy_set([Document.from_object(required_labels_template(KIND))], compiler)


def request(
    obj: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None
) -> dict[str, Any]:
    group, _, version = obj["apiVersion"].rpartition("/")
    return {
        "uid": "u-1",
        "operation": operation,
        "name": obj["metadata"]["name"],
        "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "object": obj,
        "oldObject": old,
    }


def broken_template(expression: str) -> dict[str, Any]:
    template = required_labels_template(KIND)
    template["spec"]["targets"][0]["code"][0]["source"]["validations"][0]["expression"] = expression
    return template


def test_a_good_template_and_a_good_constraint_pass(compiler: TemplateCompiler, policies: PolicySet) -> None:
    assert check_policy_request(request(required_labels_template(KIND)), None, compiler) == ([], [])
    constraint = required_labels(KIND, "ok", ["owner"], ["default"])
    assert check_policy_request(request(constraint), policies, compiler) == ([], [])


def test_cel_that_does_not_compile_is_refused_with_its_path_and_position(compiler: TemplateCompiler) -> None:
    problems, _ = check_policy_request(request(broken_template("object.metadata.name ==")), None, compiler)
    assert len(problems) == 1
    assert problems[0].startswith(f"{EXPRESSION}: template checklabels: validation does not compile")
    assert "(at 1:" in problems[0]
    problems, _ = check_policy_request(request(broken_template("'a' + 'b'")), None, compiler)
    assert problems == [
        f"{EXPRESSION}: template checklabels: validation does not compile: "
        "must evaluate to bool but got string"
    ]


def test_a_template_whose_kind_does_not_match_its_name_is_refused(compiler: TemplateCompiler) -> None:
    template = required_labels_template(KIND)
    template["metadata"]["name"] = "another"
    problems, _ = check_policy_request(request(template), None, compiler)
    assert problems and "spec.crd.spec.names.kind" in " ".join(problems)


def test_a_schema_that_cannot_make_a_structural_crd_is_refused(compiler: TemplateCompiler) -> None:
    template = required_labels_template(KIND)
    schema = template["spec"]["crd"]["spec"]["validation"]["openAPIV3Schema"]
    schema["properties"]["labels"] = {
        "type": "array",
        "items": {"type": "string"},
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "string"}],
    }
    problems, _ = check_policy_request(request(template), None, compiler)
    assert problems, "a non-structural schema must be refused"
    assert all(p.startswith("spec.crd.spec.validation.openAPIV3Schema") for p in problems), problems


def test_changing_a_templates_kind_is_refused(compiler: TemplateCompiler) -> None:
    old = required_labels_template(KIND)
    new = copy.deepcopy(old)
    new["spec"]["crd"]["spec"]["names"]["kind"] = "CHECKLABELS"
    problems, _ = check_policy_request(request(new, "UPDATE", old), None, compiler)
    assert any(
        p.startswith("spec.crd.spec.names.kind: the kind cannot change (CheckLabels -> CHECKLABELS)")
        for p in problems
    ), problems


def test_constraint_parameters_and_match_are_checked(compiler: TemplateCompiler, policies: PolicySet) -> None:
    bad_parameters = required_labels(KIND, "bad", ["owner"], ["default"])
    bad_parameters["spec"]["parameters"] = {"labels": "owner"}
    problems, _ = check_policy_request(request(bad_parameters), policies, compiler)
    assert problems and problems[0].startswith("spec.parameters.labels:"), problems
    bad_match = required_labels(KIND, "bad", ["owner"], ["default"])
    bad_match["spec"]["match"]["labelSelector"] = {
        "matchExpressions": [{"key": "a", "operator": "Sometimes"}]
    }
    problems, _ = check_policy_request(request(bad_match), policies, compiler)
    assert problems and problems[0].startswith("spec.match.labelSelector.matchExpressions[0].operator"), (
        problems
    )
    bad_action = required_labels(KIND, "bad", ["owner"], ["default"], action="block")
    problems, _ = check_policy_request(request(bad_action), policies, compiler)
    assert problems and problems[0].startswith("spec.enforcementAction"), problems


def test_a_constraint_of_a_template_not_loaded_yet_passes_with_a_note(compiler: TemplateCompiler) -> None:
    problems, notes = check_policy_request(request(required_labels("Unknown", "x", [], [])), None, compiler)
    assert problems == [] and notes and "not loaded by this celkeeper pod yet" in notes[0]


def test_deletes_and_other_objects_are_not_checked(compiler: TemplateCompiler) -> None:
    assert check_policy_request(request(broken_template("1 +"), "DELETE"), None, compiler) == ([], [])
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    assert check_policy_request(request(configmap), None, compiler) == ([], [])


# --- the route, on a real server ------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["deny", "warn"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServeProcess]:
    workdir = tmp_path_factory.mktemp(f"policycheck-{request.param}")
    policy_dir = workdir / "policies"
    policy_dir.mkdir()
    (policy_dir / "template.json").write_text(json.dumps(required_labels_template(KIND)), encoding="utf-8")
    serve = ServeProcess(workdir, policy_dir, workers=1, args=["--policy-validation", request.param])
    serve.start()
    try:
        yield serve
    finally:
        serve.stop()


def review(obj: dict[str, Any]) -> bytes:
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request(obj)}
    ).encode()


@pytest.mark.server
def test_the_route_refuses_or_warns(server: ServeProcess) -> None:
    mode = server.args[-1]
    response = server.post("/v1/admitpolicy", review(broken_template("object.metadata.name ==")))
    assert response.status_code == 200
    answer = response.json()["response"]
    assert answer["uid"] == "u-1"
    if mode == "deny":
        assert answer["allowed"] is False
        assert answer["status"]["code"] == 422
        assert answer["status"]["message"].startswith(
            "ConstraintTemplate checklabels is invalid:\n- " + EXPRESSION
        )
    else:
        assert answer["allowed"] is True
        assert answer["warnings"][0].startswith(
            f"ConstraintTemplate checklabels would be refused by celkeeper's policy validation: {EXPRESSION}"
        )
    good = server.post("/v1/admitpolicy", review(required_labels(KIND, "fine", ["a"], ["default"]))).json()
    assert good["response"] == {"uid": "u-1", "allowed": True}
    assert server.post("/v1/admitpolicy", b"{not json").status_code == 400


def test_a_mutator_gatekeeper_refuses_is_refused_with_its_field(compiler: TemplateCompiler) -> None:
    require_celgo()
    mutator = {
        "apiVersion": "mutations.gatekeeper.sh/v1",
        "kind": "Assign",
        "metadata": {"name": "pull"},
        "spec": {
            "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
            "location": "spec.containers[name:*].imagePullPolicy",
            "parameters": {"assign": {"value": "Always"}},
        },
    }
    assert check_policy_request(request(mutator), None, compiler) == ([], [])
    mutator["spec"]["location"] = "metadata.labels.x"
    problems, _ = check_policy_request(request(mutator), None, compiler)
    assert problems == ["Assign pull: assign pull can't change metadata"]
    mutator["spec"]["location"] = "spec.containers[name:*"
    problems, _ = check_policy_request(request(mutator), None, compiler)
    assert len(problems) == 1 and problems[0].startswith(
        "spec.location: Assign pull: invalid location format"
    )
    mutator["spec"]["location"] = "spec.x"
    mutator["spec"]["parameters"] = {"assign": {"externalData": {"provider": "p"}}}
    problems, _ = check_policy_request(request(mutator), None, compiler)
    assert len(problems) == 1 and problems[0].startswith(
        "spec.parameters.assign.externalData: Assign pull: external data"
    )
