"""Constraints: kinds, names, parameters against the template's schema, enforcement actions."""

from __future__ import annotations

import pytest

from celkeeper.constraints import Constraint, is_constraint, parse_constraint
from celkeeper.documents import Document
from celkeeper.errors import ConstraintError
from celkeeper.model import Action, EnforcementPoint
from celkeeper.templates import ParameterSchema
from tests.support.policydocs import constraint_doc, doc

SCHEMA = ParameterSchema(
    {
        "type": "object",
        "properties": {"labels": {"type": "array", "items": {"type": "string"}}},
    }
)
VALIDATORS = {"K8sRequiredLabels": SCHEMA, "K8sBroken": None}


def parse(document: Document) -> tuple[Constraint | None, list[str]]:
    constraint, errors = parse_constraint(document, VALIDATORS)
    assert all(isinstance(e, ConstraintError) for e in errors)
    return constraint, [str(e) for e in errors]


def test_a_good_constraint() -> None:
    constraint, errors = parse(
        doc("""
        apiVersion: constraints.gatekeeper.sh/v1beta1
        kind: K8sRequiredLabels
        metadata:
          name: must-have-owner
        spec:
          match:
            kinds: [{apiGroups: [""], kinds: [Pod]}]
          parameters:
            labels: [owner]
        """)
    )
    assert errors == []
    assert constraint is not None
    assert (constraint.kind, constraint.name, constraint.enforcement_action) == (
        "K8sRequiredLabels",
        "must-have-owner",
        Action.DENY,
    )
    assert constraint.parameters == {"labels": ["owner"]}
    assert constraint.match == {"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}]}
    assert constraint.actions_for(EnforcementPoint.WEBHOOK) == (Action.DENY,)
    assert is_constraint(constraint.document)


@pytest.mark.parametrize(
    "api_version",
    [
        "constraints.gatekeeper.sh/v1alpha1",
        "constraints.celkeeper.io/v1beta1",
        "constraints.celkeeper.io/v1",
        "constraints.celkeeper.io/v1alpha1",
    ],
)
def test_api_versions(api_version: str) -> None:
    constraint, errors = parse(constraint_doc("K8sRequiredLabels", "x", api_version=api_version))
    assert errors == [] and constraint is not None
    assert constraint.parameters is None and constraint.match == {}


def test_unsupported_version() -> None:
    _, errors = parse(constraint_doc("K8sRequiredLabels", "x", api_version="constraints.gatekeeper.sh/v2"))
    assert errors == [
        "x.yaml: document 1: apiVersion: unsupported apiVersion 'constraints.gatekeeper.sh/v2' for a "
        "constraint; "
        "use one of constraints.gatekeeper.sh/v1beta1, constraints.gatekeeper.sh/v1alpha1, "
        "constraints.celkeeper.io/v1beta1, constraints.celkeeper.io/v1alpha1, constraints.celkeeper.io/v1"
    ]


def test_unknown_kind_and_broken_template() -> None:
    _, errors = parse(constraint_doc("K8sNothing", "x"))
    assert errors == [
        "x.yaml: document 1: kind: constraint K8sNothing/x: no ConstraintTemplate defines kind 'K8sNothing'"
    ]
    _, errors = parse(constraint_doc("K8sBroken", "x"))
    assert errors == [
        "x.yaml: document 1: kind: constraint K8sBroken/x: the ConstraintTemplate for kind "
        "'K8sBroken' is invalid (see its errors)"
    ]


def test_name_rules() -> None:
    _, errors = parse(constraint_doc("K8sRequiredLabels", "Not_Valid"))
    assert errors == [
        "Not_Valid.yaml: document 1: metadata.name: constraint K8sRequiredLabels/Not_Valid: invalid name "
        "'Not_Valid': a lowercase RFC 1123 subdomain of at most 63 characters (letters, digits, '-' and '.')"
    ]
    _, errors = parse(constraint_doc("K8sRequiredLabels", "a" * 64))
    assert len(errors) == 1 and "invalid name" in errors[0]


def test_parameter_errors_are_located() -> None:
    _, errors = parse(
        doc(
            """
        apiVersion: constraints.gatekeeper.sh/v1beta1
        kind: K8sRequiredLabels
        metadata:
          name: labels
        spec:
          parameters:
            labels: [owner, 7]
            lables: [typo]
          extra: true
        """,
            "c.yaml",
        )
    )
    assert errors == [
        'c.yaml:9:3: document 1: spec.extra: constraint K8sRequiredLabels/labels: unknown field "spec.extra"',
        "c.yaml:7:21: document 1: spec.parameters.labels[1]: constraint K8sRequiredLabels/labels: must be of "
        "type string, not integer (7)",
        "c.yaml:8:5: document 1: spec.parameters.lables: constraint K8sRequiredLabels/labels: unknown field "
        '"spec.parameters.lables"',
    ]


@pytest.mark.parametrize("action", ["deny", "dryrun", "warn"])
def test_enforcement_actions(action: str) -> None:
    constraint, errors = parse(constraint_doc("K8sRequiredLabels", "x", action=action))
    assert errors == [] and constraint is not None
    assert constraint.enforcement_action == Action(action)
    for point in EnforcementPoint:
        assert constraint.actions_for(point) == (Action(action),)


def test_unrecognized_enforcement_action() -> None:
    _, errors = parse(constraint_doc("K8sRequiredLabels", "x", action="Deny"))
    assert errors == [
        "x.yaml: document 1: spec.enforcementAction: constraint K8sRequiredLabels/x: unrecognized "
        "enforcementAction: 'Deny' is not within the supported list [deny dryrun warn scoped]"
    ]


def test_scoped_enforcement_actions_resolve_per_point() -> None:
    constraint, errors = parse(
        constraint_doc(
            "K8sRequiredLabels",
            "x",
            action="scoped",
            scoped=[
                {"action": "warn", "enforcementPoints": [{"name": "validation.gatekeeper.sh"}]},
                {
                    "action": "deny",
                    "enforcementPoints": [
                        {"name": "validation.gatekeeper.sh"},
                        {"name": "gator.gatekeeper.sh"},
                    ],
                },
                {"action": "dryrun", "enforcementPoints": [{"name": "*"}]},
            ],
        )
    )
    assert errors == [] and constraint is not None
    assert constraint.actions_for(EnforcementPoint.WEBHOOK) == (Action.DENY, Action.WARN, Action.DRYRUN)
    assert constraint.actions_for(EnforcementPoint.CLI) == (Action.DENY, Action.DRYRUN)
    assert constraint.actions_for(EnforcementPoint.AUDIT) == (Action.DRYRUN,)
    assert constraint.actions_for("*") == (Action.DENY, Action.WARN, Action.DRYRUN)


def test_scoped_without_the_point_is_not_evaluated_there() -> None:
    constraint, errors = parse(
        constraint_doc(
            "K8sRequiredLabels",
            "x",
            action="scoped",
            scoped=[
                {"action": "deny", "enforcementPoints": [{"name": "audit.gatekeeper.sh"}]},
            ],
        )
    )
    assert errors == [] and constraint is not None
    assert constraint.actions_for(EnforcementPoint.WEBHOOK) == ()
    assert constraint.actions_for(EnforcementPoint.AUDIT) == (Action.DENY,)


def test_scoped_enforcement_action_errors() -> None:
    _, errors = parse(constraint_doc("K8sRequiredLabels", "x", action="scoped"))
    assert errors == [
        "x.yaml: document 1: spec.scopedEnforcementActions: constraint K8sRequiredLabels/x: "
        "scopedEnforcementActions is required when enforcementAction is scoped"
    ]
    _, errors = parse(
        constraint_doc(
            "K8sRequiredLabels",
            "x",
            action="scoped",
            scoped=[
                {"action": "block", "enforcementPoints": [{"name": "webhook.example.com"}]},
                {"action": "warn", "enforcementPoints": []},
            ],
        )
    )
    assert errors == [
        "x.yaml: document 1: spec.scopedEnforcementActions[0].action: constraint K8sRequiredLabels/x: "
        "unrecognized enforcementAction: 'block' is not within the supported list [deny dryrun warn]",
        "x.yaml: document 1: spec.scopedEnforcementActions[0].enforcementPoints[0].name: constraint "
        "K8sRequiredLabels/x: unrecognized enforcement point 'webhook.example.com': constraint will not be "
        "enforced there; supported enforcement points are validation.gatekeeper.sh, audit.gatekeeper.sh, "
        "gator.gatekeeper.sh, vap.k8s.io and *",
        "x.yaml: document 1: spec.scopedEnforcementActions[1].enforcementPoints: constraint "
        "K8sRequiredLabels/x: "
        "enforcementPoints must list at least one enforcement point ({name: ...}); supported: "
        "validation.gatekeeper.sh, audit.gatekeeper.sh, gator.gatekeeper.sh, vap.k8s.io or *",
    ]
