"""What celkeeper says before generating: templates the API server would refuse as a policy (with the
reason and where), constraints whose binding cannot be made, and where the policy's verdicts will differ
from the webhook's. The API server's side of each rule is checked in tests/vap/test_plan_kube.py."""

from __future__ import annotations

from typing import Any

import pytest

from celkeeper.cel.api import Engine
from celkeeper.documents import Document
from celkeeper.model import Action, EnforcementPoint
from celkeeper.policy import TemplateCompiler, build_policy_set
from celkeeper.review import decide, parse_admission_review
from celkeeper.vap.check import is_qualified_name, references_variables
from celkeeper.vap.plan import VapOptions, VapPlan, plan_vap
from tests.support.policydocs import admission_review, constraint_data, expansion_data, pod, template_data
from tests.vap import cases

ALWAYS = VapOptions(default_generate_vap=True)


def _plan(engine: Engine, *objects: dict[str, Any], options: VapOptions = ALWAYS) -> VapPlan:
    documents = [Document.from_object(o, file=f"{i}.yaml") for i, o in enumerate(objects)]
    policies = build_policy_set(documents, TemplateCompiler(engine))
    return plan_vap(policies, options)


def _template(**options: Any) -> dict[str, Any]:
    validations = options.pop("validations", [{"expression": "true", "message": "m"}])
    return template_data("K8sVap", validations, api_version="templates.celkeeper.io/v1", **options)


def _errors(plan: VapPlan) -> list[str]:
    return [e.message for e in plan.errors]


def test_a_template_that_compiles_becomes_a_policy_without_findings(engine: Engine) -> None:
    plan = _plan(
        engine, _template(), constraint_data("K8sVap", "c", api_version="constraints.celkeeper.io/v1")
    )
    assert not plan.errors and not plan.warnings
    assert [o["kind"] for o in plan.objects()] == [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]


@pytest.mark.parametrize(("options", "path", "words"), cases.REFUSED_TEMPLATES)
def test_templates_the_api_server_would_refuse_are_reported_and_left_out(
    engine: Engine, options: dict[str, Any], path: str, words: str
) -> None:
    plan = _plan(engine, _template(**options))
    (template,) = plan.templates
    assert template.policy is None and plan.objects() == []
    (error,) = template.errors
    assert error.message.startswith("template k8svap: cannot be a ValidatingAdmissionPolicy: ")
    assert words in error.message
    assert error.location.path == f"spec.targets[0].code[0].source.{path}"
    assert error.location.file == "0.yaml"


def test_generate_vap_and_the_default_decide(engine: Engine) -> None:
    on, off = _template(), _template()
    on["spec"]["targets"][0]["code"][0]["source"]["generateVAP"] = True
    off["spec"]["targets"][0]["code"][0]["source"]["generateVAP"] = False
    assert _plan(engine, on, options=VapOptions()).templates[0].policy is not None
    assert _plan(engine, off).templates[0].policy is None
    assert _plan(engine, _template(), options=VapOptions()).templates[0].policy is None
    broken = _template(validations=[{"expression": "1 +", "message": "m"}])
    assert not _plan(engine, broken, options=VapOptions()).errors  # not asked for: nothing to report


def test_operations_the_default_match_ignores_are_warned_about(engine: Engine) -> None:
    plan = _plan(engine, _template(operations=["CREATE", "DELETE"]))
    (warning,) = plan.warnings
    assert "DELETE requests are not validated" in warning.message
    assert "UPDATE requests are validated although the template leaves them out" in warning.message
    assert plan.templates[0].policy is not None
    assert not _plan(engine, _template(operations=["UPDATE", "CREATE"])).warnings


@pytest.mark.parametrize(
    ("match", "words"),
    [
        ({"scope": "Namespaced"}, "scope Namespaced is not expressed"),
        ({"source": "Generated"}, "source Generated is not expressed"),
        ({"excludedNamespaces": ["kube-*"]}, "validates every Namespace"),
        (
            {"kinds": [{"apiGroups": [""], "kinds": ["Namespace"]}], "namespaces": ["a"]},
            "validates every Namespace",
        ),
    ],
)
def test_matches_the_binding_cannot_express_are_warned_about(
    engine: Engine, match: dict[str, Any], words: str
) -> None:
    constraint = constraint_data("K8sVap", "c", match=match, api_version="constraints.celkeeper.io/v1")
    plan = _plan(engine, _template(), constraint)
    (warning,) = plan.warnings
    assert words in warning.message and warning.message.startswith("constraint K8sVap/c: its binding: ")
    assert plan.constraints[0].binding is not None


def test_namespaces_of_kinds_that_are_not_namespaces_need_no_warning(engine: Engine) -> None:
    match = {"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}], "namespaces": ["a"]}
    constraint = constraint_data("K8sVap", "c", match=match, api_version="constraints.celkeeper.io/v1")
    assert not _plan(engine, _template(), constraint).warnings


WORKLOADS = expansion_data("expand-workloads", [("apps", "v1", "Deployment"), ("apps", "v1", "StatefulSet")])
CRONJOBS = expansion_data(
    "expand-cronjobs", [("batch", "v1", "CronJob")], ("batch", "v1", "Job"), "spec.jobTemplate"
)


@pytest.mark.parametrize(
    ("kinds", "made"),
    [
        (None, "Job from CronJob; Pod from Deployment, StatefulSet"),
        ([{"apiGroups": [""], "kinds": ["Pod"]}], "Pod from Deployment, StatefulSet"),
        ([{"apiGroups": ["*"], "kinds": ["Job"]}], "Job from CronJob"),
    ],
)
def test_constraints_that_select_generated_objects_are_warned_about(
    engine: Engine, kinds: list[dict[str, Any]] | None, made: str
) -> None:
    match = {"kinds": kinds} if kinds is not None else None
    constraint = constraint_data("K8sVap", "c", match=match, api_version="constraints.celkeeper.io/v1")
    plan = _plan(engine, _template(), constraint, WORKLOADS, CRONJOBS)
    (warning,) = plan.warnings
    assert warning.message.startswith("constraint K8sVap/c: its binding: ")
    assert f"objects ExpansionTemplates generate ({made}) are checked by the webhook" in warning.message
    assert warning.location.path == "spec.match.kinds"
    assert plan.constraints[0].binding is not None


def test_constraints_that_select_no_generated_kind_need_no_expansion_warning(engine: Engine) -> None:
    match = {"kinds": [{"apiGroups": ["apps"], "kinds": ["Deployment"]}]}
    constraint = constraint_data("K8sVap", "c", match=match, api_version="constraints.celkeeper.io/v1")
    assert not _plan(engine, _template(), constraint, WORKLOADS, CRONJOBS).warnings


@pytest.mark.parametrize(
    ("scoped", "words"),
    [
        (
            [
                {"action": "deny", "enforcementPoints": [{"name": "vap.k8s.io"}]},
                {"action": "deny", "enforcementPoints": [{"name": "*"}]},
            ],
            "would repeat Deny",
        ),
        (
            [
                {
                    "action": "deny",
                    "enforcementPoints": [{"name": "vap.k8s.io"}, {"name": "validation.gatekeeper.sh"}],
                },
                {"action": "warn", "enforcementPoints": [{"name": "*"}]},
            ],
            "both Deny and Warn",
        ),
    ],
)
def test_bindings_the_api_server_would_refuse_are_reported(
    engine: Engine, scoped: list[Any], words: str
) -> None:
    constraint = constraint_data(
        "K8sVap", "c", action="scoped", scoped=scoped, api_version="constraints.celkeeper.io/v1"
    )
    plan = _plan(engine, _template(), constraint)
    (error,) = plan.errors
    assert words in error.message and error.location.path == "spec.scopedEnforcementActions"
    assert plan.constraints[0].binding is None and len(plan.objects()) == 1


VAP_ONLY = [{"action": "deny", "enforcementPoints": [{"name": "vap.k8s.io"}]}]


def test_a_constraint_scoped_to_vap_only_is_skipped_by_the_webhook_and_bound(engine: Engine) -> None:
    template = _template(validations=[{"expression": "false", "message": "no"}])
    vap_only = constraint_data("K8sVap", "api-server", action="scoped", scoped=VAP_ONLY)
    everywhere = constraint_data(
        "K8sVap",
        "everywhere",
        action="scoped",
        scoped=[{"action": "warn", "enforcementPoints": [{"name": "*"}]}],
    )
    documents = [Document.from_object(o) for o in (template, vap_only, everywhere)]
    policies = build_policy_set(documents, TemplateCompiler(engine))
    request = parse_admission_review(admission_review(pod()))
    webhook = decide(request, policies, lambda _: None, EnforcementPoint.WEBHOOK)
    assert [(r.constraint_name, r.action) for r in webhook.results] == [("everywhere", Action.WARN)]
    at_vap = decide(request, policies, lambda _: None, EnforcementPoint.VAP)
    assert {(r.constraint_name, r.action) for r in at_vap.results} == {
        ("api-server", Action.DENY),
        ("everywhere", Action.WARN),
    }
    plan = plan_vap(policies, ALWAYS)
    assert {c.name: c.actions for c in plan.constraints} == {"api-server": ("Deny",), "everywhere": ("Warn",)}


def test_a_constraint_scoped_to_vap_without_a_policy_is_an_error(engine: Engine) -> None:
    vap_only = constraint_data("K8sVap", "c", action="scoped", scoped=VAP_ONLY)
    plan = _plan(engine, _template(), vap_only, options=VapOptions())
    (error,) = plan.errors
    assert "scoped to vap.k8s.io" in error.message
    assert "generates no ValidatingAdmissionPolicy" in error.message
    deny = constraint_data("K8sVap", "d", action="deny")
    assert not _plan(engine, _template(), deny, options=VapOptions()).errors  # the webhook enforces it


def test_constraints_of_a_template_that_cannot_be_a_policy_get_no_binding(engine: Engine) -> None:
    broken = _template(validations=[{"expression": "1 +", "message": "m"}])
    plan = _plan(engine, broken, constraint_data("K8sVap", "d", action="deny"))
    (constraint,) = plan.constraints
    assert constraint.binding is None
    (error,) = constraint.errors
    assert error.message == (
        "constraint K8sVap/d: no ValidatingAdmissionPolicyBinding: its template k8svap cannot be a "
        "ValidatingAdmissionPolicy (see its errors)"
    )


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("variables.x", True),
        ("size(variables) > 0", True),
        ("object.variables == 1", False),
        ("object . variables", False),
        ("'variables.x' == \"variables\"", False),
        ("r'var\\'  == variables.x", True),
        ("'''variables\n''' == x // variables.y", False),
        ("myvariables.x || variables_x", False),
        ('b"variables" + "\\"variables"', False),
    ],
)
def test_references_to_variables_are_found_outside_strings_and_comments(source: str, expected: bool) -> None:
    assert references_variables(source) is expected


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("a", True),
        ("has-name", True),
        ("example.com/a_b.c", True),
        ("a b", False),
        ("-a", False),
        ("/a", False),
        ("x" * 63, True),
        ("x" * 64, False),
        ("Bad_Prefix/a", False),
    ],
)
def test_qualified_names(name: str, ok: bool) -> None:
    assert is_qualified_name(name) is ok
