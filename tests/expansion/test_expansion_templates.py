"""ExpansionTemplates on their own (celkeeper.expansion; compared with gator in
tests/e2e/gator/suites/expansion): generated objects, Gatekeeper's checks and cycles, mutators told apart."""

from __future__ import annotations

import pytest

from celkeeper.documents import parse_documents
from celkeeper.expansion import (
    ExpansionError,
    Expansions,
    ExpansionTemplate,
    parse_expansion_template,
)
from celkeeper.model import JsonObject


def _expansion(
    name: str, applies: str, generates: str, source: str = "spec.template", extra: str = ""
) -> str:
    group, _, rest = applies.partition("/")
    version, _, kind = rest.partition("/")
    g_group, _, g_rest = generates.partition("/")
    g_version, _, g_kind = g_rest.partition("/")
    return f"""\
apiVersion: expansion.gatekeeper.sh/v1alpha1
kind: ExpansionTemplate
metadata: {{name: {name}}}
spec:
  applyTo: [{{groups: ["{group}"], versions: ["{version}"], kinds: ["{kind}"]}}]
  templateSource: {source}
  generatedGVK: {{group: "{g_group}", version: "{g_version}", kind: "{g_kind}"}}
{extra}"""


def _template(text: str) -> ExpansionTemplate:
    (document,) = parse_documents(text, "e.yaml").documents
    template, errors = parse_expansion_template(document)
    if errors:
        raise errors[0]
    assert template is not None
    return template


def test_expansion_generates_named_owned_objects_in_the_parents_namespace() -> None:
    expander = Expansions([_template(_expansion("deploy", "apps/v1/Deployment", "/v1/Pod"))])
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "Web", "namespace": "shop"},
        "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}},
    }
    (resultant,) = expander.expand(deployment, None)
    assert resultant.template == "deploy" and resultant.enforcement_action == ""
    assert resultant.object == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "labels": {"app": "web"},
            "namespace": "shop",
            "name": "web-pod",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "Web", "uid": ""}],
        },
        "spec": {"containers": []},
    }
    assert deployment["spec"]["template"]["metadata"] == {"labels": {"app": "web"}}  # the parent is unchanged
    assert expander.expand({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}, None) == []
    with pytest.raises(ExpansionError, match=r'could not find source field "spec\.template" in resource x'):
        expander.expand({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}}, None)


def test_expansion_templates_are_checked_as_gatekeeper_checks_them() -> None:
    with pytest.raises(ExpansionError, match="has empty source field"):
        _template(_expansion("e", "apps/v1/Deployment", "/v1/Pod", source='""'))
    with pytest.raises(ExpansionError, match="but also applies to that same GVK"):
        _template(_expansion("e", "apps/v1/Deployment", "apps/v1/Deployment"))
    cycle = [
        _template(_expansion("a-to-b", "x/v1/A", "x/v1/B")),
        _template(_expansion("b-to-a", "x/v1/B", "x/v1/A")),
        _template(_expansion("b-to-c", "x/v1/B", "x/v1/C", extra="  enforcementAction: warn\n")),
    ]
    expander = Expansions(cycle)  # templates on a cycle are left out, as Gatekeeper's database does
    parent = {"apiVersion": "x/v1", "kind": "B", "metadata": {"name": "b"}, "spec": {"template": {}}}
    found = expander.expand(parent, None)
    assert [(r.template, r.object["kind"], r.enforcement_action) for r in found] == [("b-to-c", "C", "warn")]
    assert sorted(expander.cycles) == ["a-to-b", "b-to-a"]


def test_generated_objects_are_mutated_before_they_are_expanded() -> None:
    """Gatekeeper's expansion mutates each generated object before expanding it in turn (review.decide
    passes the policy set's mutators)."""
    expander = Expansions(
        [
            _template(_expansion("a-to-b", "g/v1/A", "g/v1/B")),
            _template(_expansion("b-to-c", "g/v1/B", "g/v1/C")),
        ]
    )
    seen: list[str] = []

    def mutate(obj: JsonObject) -> JsonObject:
        seen.append(obj["kind"])
        return {**obj, "spec": {"template": {"metadata": {"labels": {"marked": obj["kind"]}}}}}

    parent = {"apiVersion": "g/v1", "kind": "A", "metadata": {"name": "p"}, "spec": {"template": {}}}
    found = expander.expand(parent, mutate=mutate)
    assert seen == ["B", "C"]
    assert [(r.object["kind"], r.object["spec"]["template"]) for r in found] == [
        ("C", {"metadata": {"labels": {"marked": "C"}}}),
        ("B", {"metadata": {"labels": {"marked": "B"}}}),
    ]
