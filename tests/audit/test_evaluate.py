"""An existing object evaluated as Gatekeeper's audit evaluates it: object only, no operation, the
audit enforcement point (scoped actions), its Namespace for namespaceSelector and namespaceObject; an
object that breaks the evaluation is an error of the constraint that broke, the others still decided."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from celkeeper.audit import Evaluator, RunResults, Silent, audit_objects
from celkeeper.cel import DEFAULT_ENGINE, ENGINES, get_engine
from celkeeper.cel.api import (
    Activation,
    Binding,
    Engine,
    Outcome,
    Program,
    RequestInput,
    TemplateProgram,
    TemplateSource,
)
from celkeeper.documents import Document
from celkeeper.policy import PolicySet, TemplateCompiler, build_policy_set
from celkeeper.settings import EngineName
from tests.support.policydocs import constraint_data, pod, template_data

LABELS = template_data(
    "K8sLabels",
    [
        {
            "expression": "has(object.metadata.labels) && variables.params.key in object.metadata.labels",
            "messageExpression": "'missing label ' + variables.params.key",
        }
    ],
    schema={"type": "object", "properties": {"key": {"type": "string"}}},
)
TIER = template_data(  # reads namespaceObject, which the audit fills from the object's Namespace
    "K8sTier",
    [
        {
            "expression": "namespaceObject.metadata.labels.tier == 'gold'",
            "messageExpression": "'namespace ' + namespaceObject.metadata.name + ' is not gold'",
        }
    ],
)
OPERATION = template_data(  # request.operation is empty in audit: nothing else to see
    "K8sOperation",
    [{"expression": "request.operation != ''", "messageExpression": "'operation is ' + request.operation"}],
)
CREATE_ONLY = template_data(
    "K8sCreateOnly", [{"expression": "false", "message": "create-only template"}], operations=["CREATE"]
)

_ENGINE: list[Engine] = []


def engine() -> Engine:
    if not _ENGINE:
        _ENGINE.append(get_engine(DEFAULT_ENGINE))
    return _ENGINE[0]


def policies(*data: dict[str, Any], use: Engine | None = None) -> PolicySet:
    documents = [Document.from_object(d, file=f"{d['metadata']['name']}.yaml") for d in data]
    built = build_policy_set(documents, TemplateCompiler(use or engine()))
    assert not built.errors, [str(e) for e in built.errors]
    return built


def labels(name: str, key: str, **options: Any) -> dict[str, Any]:
    return constraint_data("K8sLabels", name, parameters={"key": key}, **options)


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def test_each_action_is_reported_with_the_constraint_s_own_action() -> None:
    evaluator = Evaluator(
        policies(
            LABELS,
            labels("deny-a", "a"),
            labels("warn-b", "b", action="warn"),
            labels("dryrun-c", "c", action="dryrun"),
        )
    )
    outcome = evaluator.evaluate(pod(labels={}), namespace("default"))
    found = sorted(
        (v.constraint[1], v.enforcement_action, v.enforcement_actions, v.message) for v in outcome.violations
    )
    assert found == [
        ("deny-a", "deny", (), "missing label a"),
        ("dryrun-c", "dryrun", (), "missing label c"),
        ("warn-b", "warn", (), "missing label b"),
    ]
    assert {v.ref.name for v in outcome.violations} == {"web"}


def test_a_scoped_constraint_is_one_violation_with_its_audit_actions() -> None:
    both = [
        {"action": "deny", "enforcementPoints": [{"name": "audit.gatekeeper.sh"}]},
        {"action": "warn", "enforcementPoints": [{"name": "*"}]},
        {"action": "dryrun", "enforcementPoints": [{"name": "validation.gatekeeper.sh"}]},
    ]
    webhook_only = [{"action": "deny", "enforcementPoints": [{"name": "validation.gatekeeper.sh"}]}]
    evaluator = Evaluator(
        policies(
            LABELS,
            labels("scoped-audit", "a", action="scoped", scoped=both),
            labels("scoped-webhook", "a", action="scoped", scoped=webhook_only),
        )
    )
    outcome = evaluator.evaluate(pod(labels={}), namespace("default"))
    assert [(v.constraint[1], v.enforcement_action, v.enforcement_actions) for v in outcome.violations] == [
        ("scoped-audit", "scoped", ("deny", "warn"))
    ]
    assert outcome.violations[0].denies
    # a constraint without the audit point is not audited at all (Gatekeeper's opt-out of audit)
    assert [c.constraint.name for c in evaluator.audited("", "Pod")] == ["scoped-audit"]


def test_namespace_object_and_namespace_selector_see_the_object_s_namespace() -> None:
    selected = constraint_data(
        "K8sTier", "prod-tier", match={"namespaceSelector": {"matchLabels": {"env": "prod"}}}
    )
    evaluator = Evaluator(policies(TIER, selected))
    bronze = namespace("shop", env="prod", tier="bronze")
    gold = namespace("vault", env="prod", tier="gold")
    dev = namespace("dev", env="dev", tier="bronze")
    assert [v.message for v in evaluator.evaluate(pod(namespace="shop"), bronze).violations] == [
        "namespace shop is not gold"
    ]
    assert evaluator.evaluate(pod(namespace="vault"), gold).violations == ()
    assert evaluator.evaluate(pod(namespace="dev"), dev).violations == ()  # not selected


def test_the_review_has_no_operation_and_operation_limited_templates_are_still_audited() -> None:
    evaluator = Evaluator(
        policies(
            OPERATION,
            CREATE_ONLY,
            constraint_data("K8sOperation", "op"),
            constraint_data("K8sCreateOnly", "create-only"),
        )
    )
    messages = sorted(v.message for v in evaluator.evaluate(pod(), namespace("default")).violations)
    # frameworks matches templates on operations only at the webhook enforcement point
    assert messages == ["create-only template", "operation is"]  # (messages are trimmed)


def test_objects_in_unknown_namespaces_are_skipped_in_the_cluster_but_not_in_files() -> None:
    evaluator = Evaluator(policies(LABELS, labels("deny-a", "a")))
    objects = [pod("p1", namespace="known"), pod("p2", namespace="gone"), namespace("known")]
    known = {"known": namespace("known")}
    cluster = RunResults()
    assert audit_objects(evaluator, objects, known.get, cluster, Silent()) == 2
    files = RunResults()
    assert audit_objects(evaluator, objects, known.get, files, Silent(), skip_unknown_namespaces=False) == 3
    assert cluster.total == 2 and files.total == 3  # the Namespace object itself violates too


def test_excluded_namespaces_are_skipped_and_a_namespace_by_its_own_name() -> None:
    evaluator = Evaluator(policies(LABELS, labels("deny-a", "a")))
    objects = [
        pod("p1", namespace="kube-system"),
        pod("p2", namespace="team-a"),
        namespace("kube-public"),
        namespace("team-a"),
    ]
    results = RunResults()
    spaces = {"kube-system": namespace("kube-system"), "team-a": namespace("team-a")}
    audited = audit_objects(
        evaluator, objects, spaces.get, results, Silent(), excluded_namespaces=frozenset({"kube-*"})
    )
    assert audited == 2
    assert results.objects == {("", "v1", "Pod"): 1, ("", "v1", "Namespace"): 1}


class Failing:
    """The real engine, except that deciding for constraint `boom` raises (as a bug would)."""

    def __init__(self, inner: Engine) -> None:
        self.inner = inner
        self.name = inner.name
        self.broken: set[int] = set()

    def compile_template(self, source: TemplateSource) -> TemplateProgram:
        return self.inner.compile_template(source)

    def bind(self, program: TemplateProgram, constraint: Mapping[str, Any]) -> Binding:
        binding = self.inner.bind(program, constraint)
        if constraint.get("metadata", {}).get("name") == "boom":
            self.broken.add(id(binding))
        return binding

    def validate(self, request: RequestInput, bindings: Sequence[Binding], timeout: float) -> list[Outcome]:
        if any(id(b) in self.broken for b in bindings):
            raise RuntimeError("engine fell over")
        return self.inner.validate(request, bindings, timeout)

    def compile(self, source: str, variables: Mapping[str, str] | None = None) -> Program:
        return self.inner.compile(source, variables)

    def activation(self, **values: Any) -> Activation:
        return self.inner.activation(**values)

    def evaluate(
        self, program: Program, activation: Activation, params: Any = None, constraint: Any = None
    ) -> Any:
        return self.inner.evaluate(program, activation, params, constraint)


def test_an_object_that_breaks_one_constraint_is_an_error_of_that_one_and_the_others_still_count() -> None:
    evaluator = Evaluator(policies(LABELS, labels("boom", "a"), labels("fine", "b"), use=Failing(engine())))
    outcome = evaluator.evaluate(pod(labels={}), namespace("default"))
    assert [(v.constraint[1], v.message) for v in outcome.violations] == [("fine", "missing label b")]
    assert outcome.errors == ((("K8sLabels", "boom"), "cannot be evaluated: RuntimeError: engine fell over"),)
    results = RunResults()
    audit_objects(evaluator, [pod(labels={})], {"default": namespace("default")}.get, results, Silent())
    assert results.status_fields(("K8sLabels", "boom"))["totalAuditErrors"] == 1
    assert results.status_fields(("K8sLabels", "fine"))["totalViolations"] == 1


@pytest.mark.parametrize("engine_name", ENGINES)
@pytest.mark.parametrize("levels", [1_100, 9_000])
def test_an_object_nested_as_deep_as_the_api_server_allows_is_audited(
    levels: int, engine_name: EngineName
) -> None:
    """The API server stores objects nested up to 10,000 levels; Gatekeeper's audit evaluates them."""
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(levels):
        node["a"] = {}
        node = node["a"]
    blob = {
        "apiVersion": "example.com/v1",
        "kind": "Blob",
        "metadata": {"name": "deep", "namespace": "default"},
        "spec": deep,
    }
    any_kind = labels("everything", "a", match={"kinds": [{"apiGroups": ["*"], "kinds": ["*"]}]})
    evaluator = Evaluator(policies(LABELS, any_kind, use=get_engine(engine_name)))
    results = RunResults()
    shallow = {**blob, "metadata": {"name": "shallow", "namespace": "default"}, "spec": {"a": {}}}
    audit_objects(evaluator, [blob, shallow], {"default": namespace("default")}.get, results, Silent())
    fields = results.status_fields(("K8sLabels", "everything"))
    assert fields["totalViolations"] == 2
    assert sorted(v["name"] for v in fields["violations"]) == ["deep", "shallow"]
    assert "totalAuditErrors" not in fields


def test_generated_objects_are_audited_as_the_mutators_leave_them() -> None:
    """Gatekeeper's audit expands a workload and mutates what it generates (source Generated) before it
    validates it, with the mutators the audit has: a label a mutator adds to generated Pods satisfies the
    constraint on the Deployment's Pod; the mutator does not touch the Pod audited itself (Original)."""
    from tests.support.native import require_celgo

    require_celgo()
    expansion = {
        "apiVersion": "expansion.gatekeeper.sh/v1alpha1",
        "kind": "ExpansionTemplate",
        "metadata": {"name": "expand-deployments"},
        "spec": {
            "applyTo": [{"groups": ["apps"], "kinds": ["Deployment"], "versions": ["v1"]}],
            "templateSource": "spec.template",
            "generatedGVK": {"kind": "Pod", "group": "", "version": "v1"},
        },
    }
    mutator = {
        "apiVersion": "mutations.gatekeeper.sh/v1",
        "kind": "AssignMetadata",
        "metadata": {"name": "owner"},
        "spec": {
            "match": {"source": "Generated"},
            "location": "metadata.labels.owner",
            "parameters": {"assign": {"value": "platform"}},
        },
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}},
    }
    owner = labels("owner", "owner", match={"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}]})
    shop = namespace("shop")
    without = Evaluator(policies(LABELS, owner, expansion))
    assert [v.message for v in without.evaluate(deployment, shop).violations] == [
        "[Implied by expand-deployments] missing label owner"
    ]
    with_mutator = Evaluator(policies(LABELS, owner, expansion, mutator))
    assert with_mutator.evaluate(deployment, shop).violations == ()
    assert [v.message for v in with_mutator.evaluate(pod("alone", "shop"), shop).violations] == [
        "missing label owner"
    ]
