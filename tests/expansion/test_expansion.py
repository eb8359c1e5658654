"""ExpansionTemplates (celkeeper.expansion) and their decisions (review.decide): what Gatekeeper v3.23.1's
pkg/expansion does - generated names, namespaces, owner references, recursion, cycles, errors - and the
results of generated objects (match source, `[Implied by]` prefix, enforcementAction override, the
request's operation and oldObject on DELETE)."""

from __future__ import annotations

from typing import Any

import pytest

from celkeeper.cel.api import Engine
from celkeeper.documents import Document
from celkeeper.errors import CelkeeperError
from celkeeper.expansion import (
    MAX_DEPTH,
    ExpansionError,
    Expansions,
    parse_expansion_template,
    read_expansion_templates,
)
from celkeeper.model import Action, EnforcementPoint
from celkeeper.policy import PolicySet, build_policy_set
from celkeeper.review import admission_review_for, decide, parse_admission_review, request_for_object
from celkeeper.templates import TemplateCompiler
from tests.support.policydocs import constraint_data, doc, template_data
from tests.support.policydocs import expansion_doc as expansion

WORKLOADS = expansion("expand-deployments", [("apps", "v1", "Deployment")])
JOBS = expansion("expand-jobs", [("batch", "v1", "Job")], action="warn")
CRONJOBS = expansion(
    "expand-cronjobs", [("batch", "v1", "CronJob")], ("batch", "v1", "Job"), "spec.jobTemplate"
)


def expansions(*documents: Document) -> Expansions:
    templates, errors = read_expansion_templates(documents)
    assert not errors, [str(e) for e in errors]
    return Expansions(templates)


def deployment(privileged: bool = True, namespace: str | None = "shop", **meta: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "web", "labels": {"team": "a"}, **meta}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": 2,
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {"name": "app", "image": "nginx", "securityContext": {"privileged": privileged}}
                    ]
                },
            },
        },
    }


# -- reading ExpansionTemplates ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "message", "path"),
    [
        (lambda d: d["metadata"].pop("name"), "ExpansionTemplate has empty name field", "metadata.name"),
        (
            lambda d: d["metadata"].update(name="x" * 64),
            "name must be less than 64 characters",
            "metadata.name",
        ),
        (
            lambda d: d["spec"].pop("templateSource"),
            "ExpansionTemplate t has empty source field",
            "spec.templateSource",
        ),
        (
            lambda d: d["spec"].pop("generatedGVK"),
            "ExpansionTemplate t has empty generatedGVK field",
            "spec.generatedGVK",
        ),
        (lambda d: d["spec"].pop("applyTo"), "ExpansionTemplate t must specify ApplyTo", "spec.applyTo"),
        (
            lambda d: d["spec"].update(generatedGVK={"group": "apps", "version": "v1", "kind": "Deployment"}),
            "ExpansionTemplate t generates GVK apps/v1, Kind=Deployment, but also applies to that same GVK",
            "spec.generatedGVK",
        ),
        (
            lambda d: d["spec"].update(enforcementAction="block"),
            "enforcementAction 'block' is not one of",
            "spec.enforcementAction",
        ),
        (
            lambda d: d["spec"].update(applyTo=[{"groups": "apps"}]),
            "groups must be a list of strings",
            "spec.applyTo[0].groups",
        ),
        (lambda d: d.update(apiVersion="expansion.gatekeeper.sh/v2"), "unsupported apiVersion", "apiVersion"),
    ],
)
def test_what_gatekeeper_refuses_is_reported_where_it_is(change: Any, message: str, path: str) -> None:
    data = dict(WORKLOADS.data, metadata={"name": "t"}, spec=dict(WORKLOADS.data["spec"]))
    change(data)
    template, errors = parse_expansion_template(Document.from_object(data, file="e.yaml"))
    assert template is None
    assert any(message in e.message and e.location.path == path for e in errors), [str(e) for e in errors]


def test_a_template_is_read_with_positions() -> None:
    document = doc(
        """
        apiVersion: expansion.gatekeeper.sh/v1alpha1
        kind: ExpansionTemplate
        metadata: {name: e}
        spec:
          applyTo: [{groups: [apps], versions: [v1], kinds: [Deployment, StatefulSet]}]
          templateSource: spec.template
          generatedGVK: {kind: Pod, group: "", version: v1}
          enforcementAction: bogus
        """
    )
    _, errors = parse_expansion_template(document)
    (error,) = errors
    assert (error.location.line, error.location.column) == (8, 22)
    document = doc(document.lines and "\n".join(document.lines).replace("bogus", "dryrun"))
    template, errors = parse_expansion_template(document)
    assert not errors and template is not None
    assert template.applies_to == {("apps", "v1", "Deployment"), ("apps", "v1", "StatefulSet")}
    assert template.enforcement_action == "dryrun"


# -- expanding --------------------------------------------------------------------------------------------
def test_the_generated_pod_is_the_template_named_after_its_parent() -> None:
    parent = deployment(uid="123")
    (resultant,) = expansions(WORKLOADS).expand(parent)
    assert resultant.template == "expand-deployments" and resultant.enforcement_action == ""
    assert resultant.object == {
        "apiVersion": "v1",
        "kind": "Pod",
        # the template's own metadata; nothing else of the parent but its namespace and an owner reference
        "metadata": {
            "labels": {"app": "web"},
            "namespace": "shop",
            "name": "web-pod",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": ""}],
        },
        "spec": parent["spec"]["template"]["spec"],
    }
    assert parent == deployment(uid="123")  # the parent is not changed


def test_namespaces_and_owner_references() -> None:
    found = expansions(WORKLOADS)
    (cluster,) = found.expand(deployment(namespace=None))
    assert "namespace" not in cluster.object["metadata"]
    (placed,) = found.expand(deployment(), namespace="other")
    assert placed.object["metadata"]["namespace"] == "other"
    parent = deployment()
    parent["spec"]["template"]["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "u", "controller": True}
    ]
    (owned,) = found.expand(parent)  # already owned by its parent: left as it is
    assert (
        owned.object["metadata"]["ownerReferences"]
        == parent["spec"]["template"]["metadata"]["ownerReferences"]
    )


def test_cronjob_to_job_to_pod_children_first() -> None:
    cronjob = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "shop"},
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "job"}]}}}}},
    }
    pod, job = expansions(WORKLOADS, JOBS, CRONJOBS).expand(cronjob)
    assert (pod.template, pod.object["metadata"]["name"], pod.enforcement_action) == (
        "expand-jobs",
        "nightly-job-pod",
        "warn",
    )
    assert (job.template, job.object["kind"], job.object["metadata"]["name"]) == (
        "expand-cronjobs",
        "Job",
        "nightly-job",
    )
    assert pod.object["metadata"]["ownerReferences"][0]["name"] == "nightly-job"


def test_objects_that_cannot_be_expanded() -> None:
    found = expansions(WORKLOADS)
    broken = deployment()
    del broken["spec"]["template"]
    missing = r'^could not find source field "spec\.template" in resource web$'
    with pytest.raises(ExpansionError, match=missing):
        found.expand(broken)
    broken["spec"]["template"] = "text"
    with pytest.raises(ExpansionError, match=r"\.spec\.template accessor error: text is of the type string"):
        found.expand(broken)
    assert found.expand({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}) == []


def test_recursion_depth_and_cycles() -> None:
    chain = [
        expansion(f"e{i}", [("x", "v1", f"K{i}")], ("x", "v1", f"K{i + 1}"), "spec")
        for i in range(MAX_DEPTH + 1)
    ]
    obj = {"apiVersion": "x/v1", "kind": "K0", "metadata": {"name": "o"}, "spec": {"spec": {}}}
    nested: dict[str, Any] = {}
    for _ in range(MAX_DEPTH + 2):
        nested = {"spec": nested}
    obj["spec"] = nested
    with pytest.raises(ExpansionError, match=f"maximum recursion depth of {MAX_DEPTH} reached"):
        expansions(*chain).expand(obj)
    a = expansion("a", [("x", "v1", "A")], ("x", "v1", "B"))
    b = expansion("b", [("x", "v1", "B")], ("x", "v1", "A"))
    c = expansion("c", [("x", "v1", "B")], ("", "v1", "Pod"))
    found = expansions(a, b, c)
    assert found.cycles == {"a": "b", "b": "b"}  # b closed the cycle; both are left out
    assert found.templates_for(("x", "v1", "A")) == ()
    assert [t.name for t in found.templates_for(("x", "v1", "B"))] == ["c"]


def test_a_cycle_is_a_located_error_of_the_policy_set(default_engine: Engine) -> None:
    a = expansion("a", [("x", "v1", "A")], ("x", "v1", "B"))
    b = expansion("b", [("x", "v1", "B")], ("x", "v1", "A"))
    policies = build_policy_set([a, b, WORKLOADS], TemplateCompiler(default_engine))
    assert [str(e) for e in policies.errors] == [
        "a.yaml: document 1: spec.generatedGVK: ExpansionTemplate a: template forms expansion cycle "
        "(with b); every template of the cycle is ignored",
        "b.yaml: document 1: spec.generatedGVK: ExpansionTemplate b: template forms expansion cycle "
        "(with a); every template of the cycle is ignored",
    ]
    assert policies.expansions.group_kinds == {("apps", "Deployment")}


# -- deciding generated objects -----------------------------------------------------------------------------
PRIVILEGED = template_data(
    "K8sPrivileged",
    [
        {
            "expression": "!object.spec.containers.exists(c, c.?securityContext.?privileged.orValue(false))",
            "messageExpression": "'privileged: ' + object.kind + ' ' + object.metadata.name"
            " + ' op=' + request.operation",
        }
    ],
)


def constraint(
    name: str, action: str = "deny", source: str | None = None, scoped: list[dict[str, Any]] | None = None
) -> Document:
    match: dict[str, Any] = {"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}]}
    if source is not None:
        match["source"] = source
    data = constraint_data("K8sPrivileged", name, match=match, action=action, scoped=scoped)
    return Document.from_object(data, file=f"{name}.yaml")


def policy_set(engine: Engine, *documents: Document, template: dict[str, Any] = PRIVILEGED) -> PolicySet:
    policies = build_policy_set(
        [Document.from_object(template, file="t.yaml"), *documents], TemplateCompiler(engine)
    )
    assert not policies.errors, [str(e) for e in policies.errors]
    return policies


def webhook(obj: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None) -> Any:
    return parse_admission_review(admission_review_for(obj, operation=operation, old_object=old))


def test_a_deployment_is_denied_for_its_pod(engine: Engine) -> None:
    policies = policy_set(engine, constraint("no-privileged"), WORKLOADS)
    decision = decide(webhook(deployment()), policies, lambda _: None, EnforcementPoint.WEBHOOK)
    (result,) = decision.results
    assert result.message == "[Implied by expand-deployments] privileged: Pod web-pod op=CREATE"
    assert (result.action, result.implied_by, result.constraint_name) == (
        Action.DENY,
        "expand-deployments",
        "no-privileged",
    )
    assert decide(
        webhook(deployment(privileged=False)), policies, lambda _: None, EnforcementPoint.WEBHOOK
    ).allowed
    # gator reviews a plain object without an operation; an AdmissionReview is not expanded there
    plain = decide(request_for_object(deployment()), policies, lambda _: None, EnforcementPoint.CLI)
    assert [r.message for r in plain.results] == [
        "[Implied by expand-deployments] privileged: Pod web-pod op="
    ]
    assert decide(webhook(deployment()), policies, lambda _: None, EnforcementPoint.CLI, expand=False).allowed


def test_the_template_action_overrides_the_constraints(engine: Engine) -> None:
    warn = expansion("expand-deployments", [("apps", "v1", "Deployment")], action="warn")
    scoped = constraint(
        "scoped",
        "scoped",
        scoped=[{"action": "deny", "enforcementPoints": [{"name": "*"}]}],
    )
    policies = policy_set(engine, constraint("no-privileged"), scoped, warn)
    decision = decide(webhook(deployment()), policies, lambda _: None, EnforcementPoint.WEBHOOK)
    assert sorted((r.constraint_name, r.action, r.expansion_action) for r in decision.results) == [
        ("no-privileged", Action.WARN, "warn"),
        ("scoped", Action.WARN, "warn"),
    ]
    assert decision.allowed
    as_scoped = expansion("expand-deployments", [("apps", "v1", "Deployment")], action="scoped")
    policies = policy_set(engine, constraint("no-privileged"), scoped, as_scoped)
    decision = decide(webhook(deployment()), policies, lambda _: None, EnforcementPoint.WEBHOOK)
    # "scoped" keeps a scoped constraint's actions; a constraint that is not scoped has none (dropped)
    assert [(r.constraint_name, r.action) for r in decision.results] == [("scoped", Action.DENY)]


def test_match_source(engine: Engine) -> None:
    policies = policy_set(
        engine,
        constraint("original", source="Original"),
        constraint("generated", source="Generated"),
        WORKLOADS,
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "shop"},
        "spec": deployment()["spec"]["template"]["spec"],
    }
    on_pod = decide(webhook(pod), policies, lambda _: None, EnforcementPoint.WEBHOOK)
    assert [r.constraint_name for r in on_pod.results] == ["original"]
    on_deployment = decide(webhook(deployment()), policies, lambda _: None, EnforcementPoint.WEBHOOK)
    assert [r.constraint_name for r in on_deployment.results] == ["generated"]


def test_the_webhook_expands_what_the_request_says(engine: Engine) -> None:
    reads_old = template_data(
        "K8sPrivileged",
        [
            {
                "expression": "false",
                "messageExpression": "request.operation + ' ' + (object == null ? 'no object' : 'object')"
                " + ' ' + variables.anyObject.metadata.name"
                " + ' in ' + variables.anyObject.metadata.namespace",
            }
        ],
    )
    policies = policy_set(engine, constraint("c"), WORKLOADS, template=reads_old)
    # DELETE: the old object is expanded; the generated Pod is reviewed as deleted (its oldObject)
    request = webhook(deployment(), operation="DELETE", old=deployment())
    (result,) = decide(request, policies, lambda _: None, EnforcementPoint.WEBHOOK).results
    assert result.message == "[Implied by expand-deployments] DELETE no object web-pod in shop"
    # the request's namespace is the generated object's, whatever the object says
    review = admission_review_for(deployment(namespace=None), namespace="team-a")
    (result,) = decide(
        parse_admission_review(review), policies, lambda _: None, EnforcementPoint.WEBHOOK
    ).results
    assert result.message == "[Implied by expand-deployments] CREATE object web-pod in team-a"


def test_template_operations_select_generated_objects_by_the_requests(engine: Engine) -> None:
    updates_only = dict(PRIVILEGED, spec=dict(PRIVILEGED["spec"]))
    updates_only["spec"]["targets"] = [dict(PRIVILEGED["spec"]["targets"][0], operations=["UPDATE"])]
    policies = policy_set(engine, constraint("no-privileged"), WORKLOADS, template=updates_only)
    assert decide(webhook(deployment()), policies, lambda _: None, EnforcementPoint.WEBHOOK).allowed
    update = webhook(deployment(), operation="UPDATE", old=deployment())
    assert not decide(update, policies, lambda _: None, EnforcementPoint.WEBHOOK).allowed


def test_an_object_that_cannot_be_expanded_fails_the_decision(default_engine: Engine) -> None:
    policies = policy_set(default_engine, constraint("no-privileged"), WORKLOADS)
    broken = deployment()
    del broken["spec"]["template"]
    with pytest.raises(CelkeeperError, match="could not find source field"):
        decide(webhook(broken), policies, lambda _: None, EnforcementPoint.WEBHOOK)
