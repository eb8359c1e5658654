"""review.decide with mutators: the objects ExpansionTemplates generate are mutated before they are decided
or expanded in turn (source Generated, no operation), as Gatekeeper's expansion System does in its
validating webhook and audit; gator test's expander also mutates the object it expands first
(mutate_before_expanding). gator test itself is compared in tests/e2e/gator/test_testcmd.py."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from celkeeper.cel.api import Engine
from celkeeper.documents import parse_documents
from celkeeper.expansion import ExpansionError
from celkeeper.model import EnforcementPoint, JsonObject
from celkeeper.policy import PolicySet, build_policy_set
from celkeeper.review import admission_review_for, decide, inventory_lookup, parse_admission_review
from celkeeper.templates import TemplateCompiler
from tests.support.native import require_celgo

SUITE = Path(__file__).resolve().parents[1] / "e2e" / "gator" / "suites" / "expansion"
GENERATED_PRIVILEGED = """\
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: privileged-generated}
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  match: {source: Generated}
  location: "spec.containers[name:*].securityContext.privileged"
  parameters: {assign: {value: true}}
"""
UNPRIVILEGED_ORIGINAL = """\
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: unprivileged-original}
spec:
  applyTo: [{groups: [apps], versions: [v1], kinds: [Deployment]}]
  match: {source: Original}
  location: "spec.template.spec.containers[name:*].securityContext.privileged"
  parameters: {assign: {value: false}}
"""
DEPLOYMENT: JsonObject = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]},
        }
    },
}


def policies(engine: Engine, *mutators: str) -> PolicySet:
    require_celgo()
    sources = [(SUITE / name).read_text() for name in ("template.yaml", "constraint.yaml", "expansion.yaml")]
    text = "\n---\n".join([*sources, *mutators])
    built = build_policy_set(parse_documents(text, "policies.yaml").documents, TemplateCompiler(engine))
    assert not built.errors, [str(e) for e in built.errors]
    return built


def messages(policy_set: PolicySet, obj: JsonObject, *, mutate_before_expanding: bool = False) -> list[str]:
    request = parse_admission_review(admission_review_for(obj, operation="CREATE"))
    decision = decide(
        request,
        policy_set,
        inventory_lookup({}, complete=False),
        EnforcementPoint.WEBHOOK,
        mutate_before_expanding=mutate_before_expanding,
    )
    return sorted(r.message for r in decision.results)


def test_generated_objects_are_mutated_before_they_are_decided(default_engine: Engine) -> None:
    assert messages(policies(default_engine), DEPLOYMENT) == []
    mutated = messages(policies(default_engine, GENERATED_PRIVILEGED), DEPLOYMENT)
    assert mutated == ["[Implied by expand-deployments] privileged container in Pod web-pod (shop, 1 owners)"]


def test_the_object_itself_is_decided_as_sent(default_engine: Engine) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "shop"},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]},
    }
    # the mutator applies to generated objects only, and the webhook does not mutate what it validates
    assert messages(policies(default_engine, GENERATED_PRIVILEGED), pod) == []


def test_gators_expander_mutates_the_object_before_expanding_it(default_engine: Engine) -> None:
    both = policies(default_engine, GENERATED_PRIVILEGED, UNPRIVILEGED_ORIGINAL)
    # the webhook expands the Deployment as sent: the generated Pod is made privileged
    assert len(messages(both, DEPLOYMENT)) == 1
    # gator test's expander first mutates the Deployment (its template made unprivileged), then the Pod:
    # the Generated mutator sets the field again (an Assign overwrites), so the Pod is privileged still
    assert len(messages(both, DEPLOYMENT, mutate_before_expanding=True)) == 1


def test_a_generated_object_that_cannot_be_mutated_cannot_be_expanded(default_engine: Engine) -> None:
    failing = (
        GENERATED_PRIVILEGED.replace("kind: Assign\n", "kind: AssignImage\n")
        .replace("mutations.gatekeeper.sh/v1\n", "mutations.gatekeeper.sh/v1alpha1\n")
        .replace(
            '"spec.containers[name:*].securityContext.privileged"\n  parameters: {assign: {value: true}}',
            '"spec.containers[name:*].securityContext"\n  parameters: {assignTag: ":v2"}',
        )
    )
    deployment = copy.deepcopy(DEPLOYMENT)
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"runAsNonRoot": True}
    with pytest.raises(ExpansionError, match=r"^failed to mutate resultant resource web-pod: mutation "):
        messages(policies(default_engine, failing), deployment)
