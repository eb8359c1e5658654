"""Decisions: Gatekeeper's K8sNativeValidation semantics, on each engine (AdmissionReview parsing:
test_request.py)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from celkeeper.cel.api import Engine
from celkeeper.errors import is_warning
from celkeeper.model import Action, Decision, EnforcementPoint
from celkeeper.policy import TemplateCompiler, build_policy_set
from celkeeper.review import AdmissionRequest, decide, parse_admission_review, request_for_object
from tests.support.policydocs import CountingEngine, admission_review, constraint_doc, pod, template_doc
from tests.support.samples import library, read_documents

WEBHOOK = EnforcementPoint.WEBHOOK
NAMESPACES = {
    "default": {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "default", "labels": {"team": "a"}, "managedFields": [{"x": 1}]},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    },
}


def lookup(name: str) -> dict[str, Any] | None:
    return NAMESPACES.get(name)


def run_template(
    engine: Engine,
    validations: list[dict[str, Any]],
    request: AdmissionRequest | None = None,
    *,
    parameters: Any = None,
    action: str | None = None,
    point: EnforcementPoint | str = WEBHOOK,
    **template: Any,
) -> list[tuple[str, str]]:
    """Decide one request against one template with one constraint; (action, message) of each result."""
    if parameters is not None:
        template.setdefault("schema", {"type": "object", "x-kubernetes-preserve-unknown-fields": True})
    policies = build_policy_set(
        [
            template_doc("K8sTest", validations, **template),
            constraint_doc("K8sTest", "test", parameters=parameters, action=action),
        ],
        TemplateCompiler(engine),
    )
    assert policies.errors == (), [str(e) for e in policies.errors]
    request = request or parse_admission_review(admission_review(pod()))
    decision = decide(request, policies, lookup, point)
    assert all(
        r.constraint_kind == "K8sTest" and r.constraint_name == "test" and r.template == "k8stest"
        for r in decision.results
    )
    return [(r.action.value, r.message) for r in decision.results]


run = run_template


# -- results and messages ---------------------------------------------------------------------------
def test_true_is_allowed_false_is_a_violation(engine: Engine) -> None:
    assert run(engine, [{"expression": "true"}]) == []
    assert run(engine, [{"expression": "false", "message": "no"}]) == [("deny", "no")]


def test_message_fallback_chain(engine: Engine) -> None:
    long = "x" * (5 * 1024 + 1)
    results = run(
        engine,
        [
            {"expression": "false", "messageExpression": "'  from expression  '", "message": "static"},
            {"expression": "false", "messageExpression": "'two\\nlines'", "message": "  static  "},
            {
                "expression": "false",
                "messageExpression": "string(variables.params.long)",
                "message": "too long",
            },
            {"expression": "false", "messageExpression": "'   '", "message": "blank"},
            {"expression": "false", "messageExpression": "string(object.nope)", "message": "errored"},
            {"expression": "  1 > 2  "},
            {"expression": "false", "message": "   "},
        ],
        parameters={"long": long},
    )
    assert [message for _, message in results] == [
        "from expression",
        "static",
        "too long",
        "blank",
        "errored",
        "failed expression: 1 > 2",
        "failed expression: false",
    ]
    exactly = "y" * (5 * 1024)
    assert run(
        engine,
        [{"expression": "false", "messageExpression": "string(variables.params.m)"}],
        parameters={"m": exactly},
    ) == [("deny", exactly)]


def test_evaluation_errors_follow_the_failure_policy(engine: Engine) -> None:
    validations = [{"expression": "object.spec.nope == 1", "message": "unused"}, {"expression": "false"}]
    failed = run(engine, validations)
    assert len(failed) == 2
    assert failed[0][1].startswith("expression 'object.spec.nope == 1' resulted in error: ")
    assert failed[1] == ("deny", "failed expression: false")
    assert run(engine, validations, failure_policy="Ignore") == [("deny", "failed expression: false")]


def test_compile_errors_fail_at_request_time_as_gatekeeper_does(engine: Engine) -> None:
    policies = build_policy_set(
        [
            template_doc("K8sTest", [{"expression": "object.spec"}, {"expression": "undefined == 1"}]),
            constraint_doc("K8sTest", "test"),
        ],
        TemplateCompiler(engine),
    )
    assert len(policies.errors) == 2  # reported when loaded, as warnings: the template loads
    assert all(is_warning(e) for e in policies.errors)
    decision = decide(parse_admission_review(admission_review(pod())), policies, lookup, WEBHOOK)
    # Kubernetes' words (plugin/cel/compile.go, activation.go), cel-go's issue format
    assert [r.message for r in decision.results] == [
        "compilation error: must evaluate to bool but got dyn",
        "compilation error: compilation failed: ERROR: <input>:1:1: undeclared reference to 'undefined' "
        "(in container '')\n | undefined == 1\n | ^",
    ]


def test_variables_params_anyobject_and_top_level_params(engine: Engine) -> None:
    assert run(engine, [{"expression": "variables.params == null"}]) == []
    assert run(engine, [{"expression": "variables.params.n == 3"}], parameters={"n": 3}) == []
    assert run(engine, [{"expression": "variables.params.n == 3"}], parameters={"n": 4}) == [
        ("deny", "failed expression: variables.params.n == 3")
    ]
    # Gatekeeper binds the whole constraint to the top-level `params`, which only variables may read
    # (driver.go compiles them with HasParams, the other parts without)
    assert (
        run(
            engine,
            [{"expression": "variables.p"}],
            parameters={"n": 1},
            variables=[
                {"name": "p", "expression": "params.metadata.name == 'test' && params.spec.parameters.n == 1"}
            ],
        )
        == []
    )
    policies = build_policy_set(
        [
            template_doc("K8sTest", [{"expression": "params.spec.parameters.n == 1"}]),
            constraint_doc("K8sTest", "test"),
        ],
        TemplateCompiler(engine),
    )
    assert [e.message for e in policies.errors] == [
        "template k8stest: validation does not compile: undeclared reference to 'params' (in container '') "
        "(at 1:1 in the expression)"
    ]
    delete = parse_admission_review(admission_review(None, operation="DELETE", old=pod(name="gone")))
    assert (
        run(engine, [{"expression": "object == null && variables.anyObject.metadata.name == 'gone'"}], delete)
        == []
    )
    assert run(engine, [{"expression": "variables.anyObject.metadata.name == 'web'"}]) == []


def test_has_on_null_is_false(engine: Engine) -> None:
    assert run(engine, [{"expression": "!has(variables.params.labels)"}]) == []


def test_user_variables_are_lazy(engine: Engine) -> None:
    variables = [
        {"name": "broken", "expression": "object.spec.nope.deeper"},
        {"name": "name", "expression": "object.metadata.name"},
    ]
    assert run(engine, [{"expression": "variables.name == 'web'"}], variables=variables) == []
    used = run(engine, [{"expression": "variables.broken == 'x'"}], variables=variables)
    assert len(used) == 1 and used[0][1].startswith(
        "expression 'variables.broken == 'x'' resulted in error: "
    )


def test_request_fields_and_namespace_object(engine: Engine) -> None:
    checks = [
        "request.kind.group == '' && request.kind.version == 'v1' && request.kind.kind == 'Pod'",
        "request.resource.resource == 'pods' && request.requestKind.kind == 'Pod'",
        "request.requestResource.resource == 'pods'",
        "request.name == 'web' && request.namespace == 'default' && request.operation == 'CREATE'",
        "request.userInfo.username == 'alice' && 'system:authenticated' in request.userInfo.groups",
        "request.dryRun == false && request.options.kind == 'CreateOptions'",
        "!has(request.subResource)",
        "namespaceObject.metadata.name == 'default' && namespaceObject.metadata.labels.team == 'a'",
        "namespaceObject.status.phase == 'Active' && namespaceObject.spec.finalizers == ['kubernetes']",
    ]
    assert run(engine, [{"expression": check} for check in checks]) == []


def test_no_namespace_object_for_unknown_namespaces(engine: Engine) -> None:
    request = parse_admission_review(admission_review(pod(namespace="elsewhere")))
    assert run(engine, [{"expression": "namespaceObject == null"}], request) == []


def test_match_conditions(engine: Engine) -> None:
    deny = [{"expression": "false", "message": "denied"}]
    run = run_template
    assert run(engine, deny, conditions=[{"name": "pods", "expression": "request.kind.kind == 'Pod'"}]) == [
        ("deny", "denied")
    ]
    assert (
        run(engine, deny, conditions=[{"name": "no", "expression": "request.kind.kind == 'Service'"}]) == []
    )
    erroring = {"name": "err", "expression": "object.spec.nope == 1"}
    failed = run(engine, deny, conditions=[erroring])
    assert len(failed) == 1 and failed[0][1].startswith(
        "expression 'object.spec.nope == 1' resulted in error: "
    )
    assert run(engine, deny, conditions=[erroring], failure_policy="Ignore") == []
    # a false condition wins over an error
    assert run(engine, deny, conditions=[erroring, {"name": "no", "expression": "false"}]) == []
    two = run(engine, deny, conditions=[erroring, {"name": "e2", "expression": "1/0 == 1"}])
    assert len(two) == 1 and two[0][1].startswith("[expression 'object.spec.nope == 1' resulted in error: ")
    assert "expression '1/0 == 1' resulted in error: " in two[0][1]


def test_template_operations_apply_to_admission_requests(engine: Engine) -> None:
    deny = [{"expression": "false"}]
    update = parse_admission_review(admission_review(pod(), operation="UPDATE", old=pod()))
    assert run(engine, deny, update, operations=["CREATE"]) == []
    assert len(run(engine, deny, update, operations=["CREATE", "UPDATE"])) == 1
    assert len(run(engine, deny, update, operations=["*"])) == 1
    # a plain object (audit, CLI) has no operation to filter on
    assert len(run(engine, deny, request_for_object(pod()), operations=["UPDATE"])) == 1


@pytest.mark.parametrize(
    ("action", "point", "expected"),
    [
        ("warn", WEBHOOK, ["warn"]),
        ("dryrun", EnforcementPoint.AUDIT, ["dryrun"]),
        (None, EnforcementPoint.CLI, ["deny"]),
    ],
)
def test_enforcement_actions_in_results(
    engine: Engine, action: str | None, point: EnforcementPoint, expected: list[str]
) -> None:
    assert [a for a, _ in run(engine, [{"expression": "false"}], action=action, point=point)] == expected


def test_scoped_enforcement_actions_resolve_for_the_point(engine: Engine) -> None:
    scoped = [
        {"action": "deny", "enforcementPoints": [{"name": "validation.gatekeeper.sh"}]},
        {"action": "warn", "enforcementPoints": [{"name": "*"}]},
    ]
    documents = [
        template_doc("K8sTest", [{"expression": "false", "message": "m"}]),
        constraint_doc("K8sTest", "test", action="scoped", scoped=scoped),
    ]
    policies = build_policy_set(documents, TemplateCompiler(engine))
    request = parse_admission_review(admission_review(pod()))
    webhook = decide(request, policies, lookup, WEBHOOK)
    assert [(r.action, r.message) for r in webhook.results] == [(Action.DENY, "m"), (Action.WARN, "m")]
    assert not webhook.allowed and webhook.deny_message() == "[test] m"
    audit = decide(request, policies, lookup, EnforcementPoint.AUDIT)
    assert [r.action for r in audit.results] == [Action.WARN]
    only_audit = [{"action": "deny", "enforcementPoints": [{"name": "audit.gatekeeper.sh"}]}]
    documents[1] = constraint_doc("K8sTest", "test", action="scoped", scoped=only_audit)
    policies = build_policy_set(documents, TemplateCompiler(engine))
    assert decide(request, policies, lookup, WEBHOOK) == Decision()


def test_match_errors_are_violations(engine: Engine) -> None:
    documents = [
        template_doc("K8sTest", [{"expression": "true"}]),
        constraint_doc(
            "K8sTest",
            "by-namespace",
            action="warn",
            match={"namespaceSelector": {"matchLabels": {"team": "a"}}},
        ),
    ]
    policies = build_policy_set(documents, TemplateCompiler(engine))
    known = parse_admission_review(admission_review(pod(namespace="default")))
    assert decide(known, policies, lookup, WEBHOOK).results == ()
    unknown = parse_admission_review(admission_review(pod(namespace="nowhere")))
    (result,) = decide(unknown, policies, lookup, WEBHOOK).results
    assert (result.action, result.message) == (
        Action.WARN,
        "unable to match constraints: error matching the requested object: web :failed to run Match "
        "criteria: "
        "namespace selector for namespace-scoped object but missing Namespace",
    )


def test_matching_uses_object_and_old_object(engine: Engine) -> None:
    documents = [
        template_doc("K8sTest", [{"expression": "false", "message": "m"}]),
        constraint_doc("K8sTest", "labelled", match={"labelSelector": {"matchLabels": {"app": "web"}}}),
        constraint_doc("K8sTest", "services", match={"kinds": [{"apiGroups": [""], "kinds": ["Service"]}]}),
    ]
    policies = build_policy_set(documents, TemplateCompiler(engine))
    relabel = parse_admission_review(
        admission_review(pod(labels={"app": "db"}), operation="UPDATE", old=pod(labels={"app": "web"}))
    )
    assert [r.constraint_name for r in decide(relabel, policies, lookup, WEBHOOK).results] == ["labelled"]
    other = parse_admission_review(admission_review(pod(labels={"app": "db"})))
    assert decide(other, policies, lookup, WEBHOOK).results == ()


def test_one_engine_call_per_request(default_engine: Engine) -> None:
    counting = CountingEngine(default_engine)
    documents = [
        template_doc("K8sTest", [{"expression": "object.metadata.name != ''"}, {"expression": "false"}])
    ]
    documents += [constraint_doc("K8sTest", f"c{i}") for i in range(5)]
    policies = build_policy_set(documents, TemplateCompiler(counting))
    decision = decide(parse_admission_review(admission_review(pod())), policies, lookup, WEBHOOK)
    assert len(decision.results) == 5
    assert counting.validated == [5]  # every constraint in one call
    # nothing to evaluate: no engine call at all
    decide(
        parse_admission_review(
            admission_review({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}})
        ),
        build_policy_set(
            [
                template_doc("K8sTest", [{"expression": "false"}]),
                constraint_doc("K8sTest", "pods", match={"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}]}),
            ],
            TemplateCompiler(counting),
        ),
        lookup,
        WEBHOOK,
    )
    assert counting.validated == [5]


def test_results_are_ordered_and_timed(default_engine: Engine) -> None:
    documents = [
        template_doc("K8sB", [{"expression": "false", "message": "b"}]),
        template_doc("K8sA", [{"expression": "false", "message": "a"}]),
        constraint_doc("K8sB", "z"),
        constraint_doc("K8sA", "y"),
        constraint_doc("K8sA", "x"),
    ]
    policies = build_policy_set(documents, TemplateCompiler(default_engine))

    def ticks() -> Iterator[float]:
        t = 0.0
        while True:
            t += 0.5
            yield t

    clock = ticks().__next__
    decision = decide(parse_admission_review(admission_review(pod())), policies, lookup, WEBHOOK, clock=clock)
    assert [(r.constraint_kind, r.constraint_name) for r in decision.results] == [
        ("K8sA", "x"),
        ("K8sA", "y"),
        ("K8sB", "z"),
    ]
    # seconds per kind, as the engine measured each constraint (a clock only asks for them)
    timings = dict(decision.timings)
    assert sorted(timings) == ["K8sA", "K8sB"] and all(0 < t < 1 for t in timings.values())
    assert decide(parse_admission_review(admission_review(pod())), policies, lookup, WEBHOOK).timings == ()


def test_decide_does_not_change_its_inputs(default_engine: Engine) -> None:
    body = admission_review(pod(labels={"a": "b"}))
    original = copy.deepcopy(body)
    policies = build_policy_set(
        [template_doc("K8sTest", [{"expression": "false"}]), constraint_doc("K8sTest", "test")],
        TemplateCompiler(default_engine),
    )
    decide(parse_admission_review(body), policies, lookup, WEBHOOK)
    assert body == original


def test_gatekeeper_library_samples(engine: Engine) -> None:
    root = library() / "general" / "requiredlabels"
    samples = root / "samples" / "all-must-have-owner"
    policies = build_policy_set(
        read_documents(root / "template.yaml") + read_documents(samples / "constraint.yaml"),
        TemplateCompiler(engine),
    )
    assert policies.errors == ()

    def messages(name: str) -> list[str]:
        (obj,) = read_documents(samples / name)
        return [
            r.message
            for r in decide(request_for_object(obj.data), policies, lookup, EnforcementPoint.CLI).results
        ]

    assert messages("example_allowed.yaml") == []
    assert messages("example_disallowed.yaml") == [
        "missing required label, requires all of: owner",
        "regex mismatch",
    ]
    assert messages("example_disallowed_label_value.yaml") == ["regex mismatch"]
