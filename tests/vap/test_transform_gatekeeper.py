"""celkeeper's ValidatingAdmissionPolicies and bindings are Gatekeeper's, key for key and in the same order.

Gatekeeper v3.23.1's own transform (hack/vap: TemplateToPolicyDefinitionWithWebhookConfig,
ConstraintToBinding, ShouldGenerateVAP and the actions of its constraint controller, converted to v1 as its
controllers write them)
runs on every example and library template and constraint, on made-up corners (operations against webhook
rules, hashed names, scoped actions, selectors) and under several webhook scopes; celkeeper's objects must be
the same JSON text. The one intended difference: a template in celkeeper's group gets paramKind
`constraints.celkeeper.io/v1beta1` where Gatekeeper, reading it in its own group, says
`constraints.gatekeeper.sh/v1beta1`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from celkeeper.documents import Document
from celkeeper.templates import parse_template
from celkeeper.vap import (
    Scope,
    TransformError,
    WebhookScope,
    binding,
    binding_actions,
    should_generate_vap,
    validating_admission_policy,
)
from celkeeper.vap.transform import written_generate_vap
from tests.support.vapgen import run_vapgen
from tests.vap import cases


def _text(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)  # keys in the order built: the order is compared too


def _scope(raw: dict[str, Any]) -> Scope:
    webhook = raw.get("webhook")
    return Scope(
        webhook=WebhookScope.from_webhook(webhook) if webhook is not None else None,
        excluded_namespaces=tuple(raw.get("excluded") or ()),
        exempted_namespaces=tuple(raw.get("exempted") or ()),
    )


def _template_inputs() -> Iterator[tuple[str, dict[str, Any], str]]:
    """(id, template, scope name): examples and samples with the default scope and celkeeper's webhook,
    made-up templates with every scope."""
    for doc in cases.example_templates() + cases.library_templates():
        for scope in ("none", "celkeeper-webhook"):
            yield f"{doc.name}@{scope}", doc.data, scope
    for name, data in cases.made_up_templates().items():
        for scope in cases.scopes():
            yield f"{name}@{scope}", data, scope


def _ours_policy(data: dict[str, Any], scope: str) -> tuple[dict[str, Any] | None, str]:
    spec, errors = parse_template(Document.from_object(data))
    assert spec is not None, errors
    try:
        policy = validating_admission_policy(spec, _scope(cases.scopes()[scope]))
    except TransformError as err:
        return None, err.message
    return policy.object, policy.warning


def test_every_policy_is_gatekeepers() -> None:
    inputs = list(_template_inputs())
    assert len(inputs) >= 2 * 22 + 9 * 5
    scopes = cases.scopes()
    theirs = run_vapgen(
        [
            {"id": i, "template": cases.as_gatekeeper(data), "scope": scopes[scope]}
            for i, data, scope in inputs
        ]
    )
    compared = errors = 0
    for case_id, data, scope in inputs:
        expected = theirs[case_id]
        ours, message = _ours_policy(data, scope)
        if expected["object"] is None:
            assert ours is None, f"{case_id}: Gatekeeper refuses it ({expected['error']}), celkeeper does not"
            assert message == expected["error"], case_id
            errors += 1
            continue
        assert ours is not None, f"{case_id}: celkeeper refuses it ({message}), Gatekeeper does not"
        assert message == expected["error"], case_id  # the operation-mismatch warning, or nothing
        if data["apiVersion"].startswith("templates.celkeeper.io/"):
            assert ours["spec"]["paramKind"]["apiVersion"] == "constraints.celkeeper.io/v1beta1"
            ours["spec"]["paramKind"]["apiVersion"] = "constraints.gatekeeper.sh/v1beta1"
        assert _text(ours) == _text(expected["object"]), case_id
        compared += 1
    assert errors >= 2  # operations with nothing in common with the webhook's (two scopes)
    assert compared >= len(inputs) - errors


@pytest.mark.parametrize("default", [True, False])
def test_generating_follows_generate_vap_and_the_default(default: bool) -> None:
    templates = {d.name: d.data for d in cases.example_templates()} | cases.made_up_templates()
    theirs = run_vapgen(
        [
            {"id": k, "template": cases.as_gatekeeper(v), "defaultGenerateVAP": default}
            for k, v in templates.items()
        ]
    )
    for key, data in templates.items():
        spec, _ = parse_template(Document.from_object(data))
        assert spec is not None
        assert should_generate_vap(spec, default) is theirs[key]["generate"], key
        written = written_generate_vap(data)  # the planner's quick look, without parsing the template
        assert (default if written is None else written) is theirs[key]["generate"], key
    assert theirs["generate-true"]["generate"] and not theirs["generate-false"]["generate"]


def _constraint_inputs() -> dict[str, dict[str, Any]]:
    found = {f"{d.kind}/{d.name}": d.data for d in cases.example_constraints() + cases.library_constraints()}
    return found | cases.made_up_constraints()


@pytest.mark.parametrize("default_binding", [True, False])
def test_every_binding_is_gatekeepers(default_binding: bool) -> None:
    constraints = _constraint_inputs()
    theirs = run_vapgen(
        [
            {"id": k, "constraint": cases.as_gatekeeper(v), "defaultGenerateVAPB": default_binding}
            for k, v in constraints.items()
        ]
    )
    made = refused = 0
    for key, data in constraints.items():
        expected = theirs[key]
        try:
            actions = binding_actions(data, default_binding)
            ours = binding(data, actions) if actions else None
            message = ""
        except TransformError as err:
            ours, message = None, err.message
        assert bool(actions) is expected["generate"], key
        assert message == expected["error"], key
        assert _text(ours) == _text(expected["object"]), key
        made += ours is not None
        refused += bool(message)
    assert made >= (15 if default_binding else 2)
    assert refused == (1 if default_binding else 0)  # the unknown enforcement action
