"""Prepared evaluation plans (PolicySet.prepare, what a server does when it loads policies): the
validations of several constraints of one template evaluated at once, their parameters folded in.
Decisions must be exactly those of evaluating each constraint on its own."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from celkeeper.cel import appends
from celkeeper.cel.api import Engine
from celkeeper.cel.cpp_engine import CelExprPythonEngine, CppProgram
from celkeeper.cel.specialise import NotFoldable, literal, specialise
from celkeeper.documents import Document
from celkeeper.model import Decision, EnforcementPoint
from celkeeper.policy import PolicySet, TemplateCompiler, build_policy_set
from celkeeper.review import AdmissionRequest, decide, parse_admission_review, request_for_object
from tests.support.samples import read_documents

from .helpers import admission_review, constraint_doc, pod, template_doc

WEBHOOK = EnforcementPoint.WEBHOOK
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ANY = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _both(engine: Engine, documents: list[Document]) -> tuple[PolicySet, PolicySet]:
    """The same policies twice: evaluated one by one, and prepared."""
    plain = build_policy_set(documents, TemplateCompiler(engine))
    assert plain.errors == (), [str(e) for e in plain.errors]
    prepared = build_policy_set(documents, TemplateCompiler(engine))
    assert prepared.prepare() > 0
    return plain, prepared


def _same(
    plain: PolicySet, prepared: PolicySet, request: AdmissionRequest, namespaces: Any = None
) -> Decision:
    lookup = (namespaces or {}).get
    expected = decide(request, plain, lookup, WEBHOOK)
    assert decide(request, prepared, lookup, WEBHOOK) == expected
    return expected


def _review(obj: dict[str, Any], **options: Any) -> AdmissionRequest:
    return parse_admission_review(admission_review(obj, **options))


def _messages(decision: Decision) -> list[tuple[str, str]]:
    return [(r.constraint_name, r.message) for r in decision.results]


# -- the examples ---------------------------------------------------------------------------------------


def _example_policies() -> list[Document]:
    documents: list[Document] = []
    for template in sorted(EXAMPLES.glob("*/template.yaml")):
        documents += read_documents(template)
        for constraint in sorted(template.parent.glob("constraint*.yaml")):
            documents += read_documents(constraint)
    return documents


def _example_objects() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The examples' objects, and their Namespaces by name."""
    objects = [d.data for p in sorted(EXAMPLES.glob("*/objects/*.yaml")) for d in read_documents(p)]
    return objects, {o["metadata"]["name"]: o for o in objects if o.get("kind") == "Namespace"}


def test_the_examples_decide_the_same_prepared(cpp_engine: Engine) -> None:
    documents = _example_policies()
    plain, prepared = _both(cpp_engine, documents)
    objects, namespaces = _example_objects()
    violations = 0
    for obj in objects:
        older = copy.deepcopy(obj)
        older.setdefault("metadata", {}).setdefault("labels", {})["older"] = "yes"
        for request in (
            request_for_object(obj),
            _review(obj),
            _review(obj, operation="UPDATE", old=older),
            _review(None, operation="DELETE", old=obj),
        ):
            violations += len(_same(plain, prepared, request, namespaces).results)
    assert violations > 20  # the examples' objects break their policies in many ways


# -- constraints of one template ------------------------------------------------------------------------


def _names_allowed(
    engine: Engine, *allowed: list[str] | None, **template: Any
) -> tuple[PolicySet, PolicySet]:
    validations = template.pop(
        "validations",
        [
            {
                "expression": "object.metadata.name in variables.params.names",
                "messageExpression": "'name ' + object.metadata.name + ' not in ' "
                "+ variables.params.names.join(',')",
            }
        ],
    )
    documents = [template_doc("K8sNames", validations, schema=ANY, **template)]
    for i, names in enumerate(allowed):
        documents.append(
            constraint_doc("K8sNames", f"c{i}", parameters=None if names is None else {"names": names})
        )
    return _both(engine, documents)


def test_each_constraint_keeps_its_own_parameters(cpp_engine: Engine) -> None:
    plain, prepared = _names_allowed(cpp_engine, ["web"], ["db"], ["web"], ["web", "db"])
    run = prepared.runs("", "Pod")[0]
    assert run.plan is not None and run.plan.distinct == 3  # equal parameters share their values
    decision = _same(plain, prepared, _review(pod(name="web")))
    assert _messages(decision) == [("c1", "name web not in db")]
    decision = _same(plain, prepared, _review(pod(name="cache")))
    assert [name for name, _ in _messages(decision)] == ["c0", "c1", "c2", "c3"]


def test_what_does_not_read_the_parameters_is_computed_once(cpp_engine: Engine) -> None:
    variables = [
        {"name": "names", "expression": "object.spec.containers.map(c, c.name)"},  # no parameters
        {"name": "allowed", "expression": "variables.params.names"},
        {"name": "bad", "expression": "variables.names.filter(n, !(n in variables.allowed))"},
    ]
    validations = [{"expression": "size(variables.bad) == 0", "messageExpression": "variables.bad.join(',')"}]
    plain, prepared = _names_allowed(
        cpp_engine, ["c0"], ["c1"], ["c0", "c1"], variables=variables, validations=validations
    )
    (run,) = prepared.runs("", "Pod")
    program = run.template.validations[0].expression.program
    assert isinstance(program, CppProgram) and program.bound is not None
    bindings = [(c.parameters, c.document.data) for c in run.constraints]
    spec = specialise(program.bound, 1, bindings)
    assert spec is not None and spec.distinct == 3
    block = spec.checked.expr
    slots = block.args[0].elements  # type: ignore[attr-defined]
    # `names` once; `params`, `allowed` and `bad` for each constraint
    assert len(slots) == 1 + 3 * 3
    decision = _same(plain, prepared, _review(pod(images=("a", "b"))))
    assert _messages(decision) == [("c0", "c1"), ("c1", "c0")]


def test_constraints_without_parameters(cpp_engine: Engine) -> None:
    plain, prepared = _names_allowed(
        cpp_engine, None, None, validations=[{"expression": "variables.params == null"}]
    )
    (run,) = prepared.runs("", "Pod")
    assert run.plan is not None and run.plan.distinct == 1
    assert _same(plain, prepared, _review(pod())).results == ()


def test_templates_reading_the_constraint_object(cpp_engine: Engine) -> None:
    # Gatekeeper binds the constraint itself to `params`: equal parameters are not enough to share
    validations = [{"expression": "params.metadata.name != 'c1'", "message": "c1 denies everything"}]
    plain, prepared = _names_allowed(cpp_engine, ["web"], ["web"], ["web"], validations=validations)
    (run,) = prepared.runs("", "Pod")
    assert run.plan is not None and run.plan.distinct == 3
    assert _messages(_same(plain, prepared, _review(pod()))) == [("c1", "c1 denies everything")]


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_errors_are_those_of_one_by_one(cpp_engine: Engine, policy: str) -> None:
    validations = [
        {"expression": "object.metadata.name in variables.params.names", "message": "not allowed"},
        {"expression": "variables.params.limit > 1", "message": "limit"},  # no such key: an error
    ]
    plain, prepared = _names_allowed(
        cpp_engine, ["web"], ["db"], validations=validations, failure_policy=policy
    )
    decision = _same(plain, prepared, _review(pod(name="web")))
    error = "expression 'variables.params.limit > 1' resulted in error: "
    if policy == "Ignore":
        assert _messages(decision) == [("c1", "not allowed")]
    else:
        assert [(name, m.startswith(error) or m) for name, m in _messages(decision)] == [
            ("c0", True),
            ("c1", "not allowed"),
            ("c1", True),
        ]


def test_only_some_constraints_match(cpp_engine: Engine) -> None:
    documents = [
        template_doc(
            "K8sNames",
            [{"expression": "object.metadata.name in variables.params.names", "message": "not allowed"}],
            schema=ANY,
        ),
        constraint_doc("K8sNames", "everywhere", parameters={"names": ["web"]}),
        constraint_doc(
            "K8sNames", "elsewhere", parameters={"names": ["db"]}, match={"namespaces": ["other"]}
        ),
        constraint_doc("K8sNames", "scoped", parameters={"names": ["db"]}, action="warn"),
    ]
    plain, prepared = _both(cpp_engine, documents)
    decision = _same(plain, prepared, _review(pod(name="cache")))
    assert [(r.constraint_name, r.action.value) for r in decision.results] == [
        ("everywhere", "deny"),
        ("scoped", "warn"),
    ]
    decision = _same(plain, prepared, _review(pod(name="db", namespace="other")))
    assert _messages(decision) == [("everywhere", "not allowed")]


def test_match_conditions_come_first(cpp_engine: Engine) -> None:
    conditions = [{"name": "not-skipped", "expression": "object.metadata.name != variables.params.names[0]"}]
    plain, prepared = _names_allowed(cpp_engine, ["skip"], ["web"], conditions=conditions)
    assert _messages(_same(plain, prepared, _review(pod(name="skip")))) == [("c1", "name skip not in web")]
    assert _messages(_same(plain, prepared, _review(pod(name="web")))) == [("c0", "name web not in skip")]


def test_parameters_that_cannot_be_folded_keep_one_by_one(cpp_engine: Engine) -> None:
    # 2**63 reaches CEL as a uint through the Python call; a literal would be an int: not prepared
    validations = [{"expression": "type(variables.params.n) == uint", "message": "uint"}]
    documents = [
        template_doc("K8sBig", validations, schema=ANY),
        constraint_doc("K8sBig", "big", parameters={"n": 2**63}),
        constraint_doc("K8sBig", "small", parameters={"n": 1}),
    ]
    plain, prepared = _both(cpp_engine, documents)
    (run,) = prepared.runs("", "Pod")
    assert run.plan is None and prepared.plan(run.constraints[1:]) is not None
    assert _messages(_same(plain, prepared, _review(pod()))) == [("small", "uint")]


# -- parameters as literals -----------------------------------------------------------------------------

VALUES = [
    None,
    True,
    False,
    0,
    -1,
    (1 << 63) - 1,
    -(1 << 63),
    1.5,
    -0.0,
    float("inf"),
    "",
    "ünïcode",
    [],
    {},
    [1, "a", None, [2.5]],
    {"a": {"b": [1, {"c": True}]}},
    {"1": "string key"},
    {1: "int key"},
]
PROBES = [
    f"type(variables.params) == {t}"
    for t in ("null_type", "bool", "int", "uint", "double", "string", "list", "map")
] + [
    "variables.params == variables.params",
    "string(variables.params) == 'x'",
    "size(variables.params) == 2",
    "has(variables.params.a) && variables.params.a.b[1].c",
    "1 in variables.params",
    "'1' in variables.params",
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_a_folded_literal_is_the_value_the_call_gives(cpp_engine: Engine, value: Any) -> None:
    programs = [cpp_engine.compile(p) for p in PROBES]
    activation = cpp_engine.activation(object=pod(), old_object=None, request={})
    expected = [cpp_engine.evaluate(p, activation, value, None) for p in programs]
    for program, want in zip(programs, expected, strict=True):
        prepared = cpp_engine.prepare([program], [(value, None)])
        assert prepared is not None
        got = cpp_engine.evaluate_prepared(prepared, activation)
        if isinstance(want, bool):
            assert got == [[want]], program.source
        else:  # an error: the prepared program says so, and is then evaluated one by one
            assert got is None, program.source


@pytest.mark.parametrize("value", [1 << 63, -(1 << 63) - 1, (1, 2), b"bytes", "\ud800", {(1,): 2}, {2.5: 1}])
def test_values_that_are_not_folded(value: Any) -> None:
    with pytest.raises(NotFoldable):
        literal(value, [0])


def _scaled(obj: dict[str, Any], n: int) -> dict[str, Any] | None:
    """A copy of a Pod (or a workload's pod template) with its containers repeated up to `n`."""
    scaled = copy.deepcopy(obj)
    spec = scaled.get("spec") or {}
    pod_spec = spec.get("template", {}).get("spec") if isinstance(spec.get("template"), dict) else spec
    containers = (pod_spec or {}).get("containers")
    if not isinstance(containers, list) or not containers:
        return None
    pod_spec["containers"] = [
        dict(containers[i % len(containers)], name=f"c{i}") for i in range(n)
    ]
    return scaled


def test_large_objects_decide_as_cel_cpps_own_comprehensions(
    cpp_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pods with many containers take the chunked comprehensions (celkeeper.cel.appends), one by one
    and prepared; the decisions are those of cel-cpp's own comprehensions."""
    documents = _example_policies()
    plain, prepared = _both(cpp_engine, documents)
    with monkeypatch.context() as mp:
        mp.setattr(appends, "linear_appends", lambda checked: checked)
        own = build_policy_set(documents, TemplateCompiler(CelExprPythonEngine()))
    objects, namespaces = _example_objects()
    checked = violations = 0
    for obj in objects:
        for n in (appends.THRESHOLD + 1, 100):
            scaled = _scaled(obj, n)
            if scaled is None:
                continue
            request = _review(scaled)
            expected = decide(request, own, namespaces.get, WEBHOOK)
            assert _same(plain, prepared, request, namespaces) == expected
            checked += 1
            violations += len(expected.results)
    assert checked > 20 and violations > 20
