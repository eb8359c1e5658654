"""constraint_crd(template): the CRD of a template's constraints, for the gatekeeper-library samples,
celkeeper's examples and hand-made templates."""

from __future__ import annotations

import copy
from pathlib import Path

import jsonschema
import pytest

from celkeeper.crds import constraint_crd, legacy_schema, match_schema, structural_errors
from tests.crds.helpers import (
    constraints_of,
    example_dirs,
    library_dirs,
    make_template,
    schema_at,
    spec_schema,
    template_of,
    versions,
)
from tests.support.samples import library

SAMPLE_DIRS = library_dirs() + example_dirs()


# --- samples --------------------------------------------------------------------------------------------


def test_there_are_samples_to_check() -> None:
    if not SAMPLE_DIRS:
        pytest.skip("neither the gatekeeper-library samples nor examples/ are present")
    assert all((d / "template.yaml").is_file() for d in SAMPLE_DIRS)


@pytest.mark.parametrize("directory", SAMPLE_DIRS, ids=lambda p: p.name)
def test_sample_templates_get_a_gatekeeper_shaped_constraint_crd(directory: Path) -> None:
    template = template_of(directory)
    kind = template["spec"]["crd"]["spec"]["names"]["kind"]
    crd = constraint_crd(template)

    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == f"{kind.lower()}.constraints.celkeeper.io"
    assert crd["metadata"]["labels"]["celkeeper.io/constraint"] == "yes"
    assert crd["metadata"]["labels"]["celkeeper.io/template"] == template["metadata"]["name"]
    assert "ownerReferences" not in crd["metadata"]  # a file has no uid
    spec = crd["spec"]
    assert spec["group"] == "constraints.celkeeper.io"
    assert spec["scope"] == "Cluster"
    assert spec["names"] == {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": kind.lower(),
        "singular": kind.lower(),
        "categories": ["constraint", "constraints"],
    }
    by_name = versions(crd)
    assert list(by_name) == ["v1beta1", "v1alpha1", "v1"]
    assert [(v["served"], v["storage"]) for v in by_name.values()] == [
        (True, True),
        (True, False),
        (True, False),
    ]
    for version in by_name.values():
        assert version["subresources"] == {"status": {}}
        assert version["additionalPrinterColumns"] == [
            {
                "name": "enforcement-action",
                "type": "string",
                "jsonPath": ".spec.enforcementAction",
                "description": "How violations are handled.",
            },
            {
                "name": "total-violations",
                "type": "integer",
                "jsonPath": ".status.totalViolations",
                "description": "Violations found by audit.",
            },
            {
                "name": "enforced",
                "type": "boolean",
                "jsonPath": ".status.enforced",
                "description": "Enforced by every expected celkeeper pod.",
            },
            {  # with -o wide: how long ago the last audit ran
                "name": "audited",
                "type": "date",
                "jsonPath": ".status.auditTimestamp",
                "description": "When the last audit ran.",
                "priority": 1,
            },
        ]
        assert version["schema"] == by_name["v1beta1"]["schema"]
        assert structural_errors(version["schema"]["openAPIV3Schema"], root=True) == []


@pytest.mark.parametrize("directory", SAMPLE_DIRS, ids=lambda p: p.name)
def test_v1_sample_parameter_schemas_are_kept_as_written(directory: Path) -> None:
    template = template_of(directory)
    written = template["spec"]["crd"]["spec"]["validation"]["openAPIV3Schema"]
    assert not legacy_schema(template)
    assert schema_at(spec_schema(constraint_crd(template)), "spec.parameters") == written


@pytest.mark.parametrize("directory", SAMPLE_DIRS, ids=lambda p: p.name)
def test_sample_constraints_validate_against_the_generated_schema(directory: Path) -> None:
    template = template_of(directory)
    kind = template["spec"]["crd"]["spec"]["names"]["kind"]
    constraints = constraints_of(directory, kind)
    if not constraints:
        pytest.skip(f"no {kind} constraint next to {directory}")
    validator = jsonschema.Draft4Validator(schema_at(spec_schema(constraint_crd(template)), "spec"))
    for path, constraint in constraints:
        errors = [e.message for e in validator.iter_errors(constraint.get("spec", {}))]
        assert errors == [], f"{path}: {errors}"


def test_the_parameter_schema_refuses_parameters_of_the_wrong_shape() -> None:
    template = template_of(library() / "general" / "requiredlabels")
    validator = jsonschema.Draft4Validator(schema_at(spec_schema(constraint_crd(template)), "spec"))
    good = {"parameters": {"labels": [{"key": "owner", "allowedRegex": "^a"}]}, "enforcementAction": "warn"}
    assert list(validator.iter_errors(good)) == []
    bad = {"parameters": {"labels": "owner"}}
    assert [list(e.absolute_path) for e in validator.iter_errors(bad)] == [["parameters", "labels"]]
    bad_match = {"match": {"scope": "Everywhere", "namespaces": ["Not_A_Namespace"]}}
    assert sorted(list(e.absolute_path) for e in validator.iter_errors(bad_match)) == [
        ["match", "namespaces", 0],
        ["match", "scope"],
    ]


# --- the shared part of every constraint ------------------------------------------------------------------


def test_spec_has_match_enforcement_action_scoped_actions_and_parameters() -> None:
    crd = constraint_crd(
        make_template(openAPIV3Schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    )
    schema = spec_schema(crd)
    assert set(schema["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
    assert schema_at(schema, "metadata.name") == {"type": "string", "maxLength": 63}
    spec = schema_at(schema, "spec")
    assert set(spec["properties"]) == {"match", "enforcementAction", "scopedEnforcementActions", "parameters"}
    assert (
        "x-kubernetes-preserve-unknown-fields" not in spec
    )  # unknown spec fields are pruned, as Gatekeeper's
    assert spec["properties"]["enforcementAction"]["default"] == "deny"
    assert spec["properties"]["match"] == match_schema()
    scoped = schema_at(schema, "spec.scopedEnforcementActions.[]")
    assert set(scoped["properties"]) == {"action", "enforcementPoints"}
    assert schema_at(schema, "spec.scopedEnforcementActions.[].enforcementPoints.[].name")["type"] == "string"
    status = schema_at(schema, "status")
    assert status["x-kubernetes-preserve-unknown-fields"] is True
    assert status["properties"]["totalViolations"]["type"] == "integer"
    assert status["properties"]["byPod"]["items"]["properties"]["enforced"]["type"] == "boolean"
    # what audit writes (Gatekeeper's StatusViolation, and celkeeper's audit errors)
    violation = status["properties"]["violations"]["items"]["properties"]
    assert set(violation) == {
        "group",
        "version",
        "kind",
        "namespace",
        "name",
        "message",
        "enforcementAction",
        "enforcementActions",
    }
    assert violation["enforcementActions"]["items"]["type"] == "string"
    assert status["properties"]["auditTimestamp"]["type"] == "string"
    assert status["properties"]["totalAuditErrors"]["type"] == "integer"
    assert set(status["properties"]["auditErrors"]["items"]["properties"]) == {
        "group",
        "version",
        "kind",
        "namespace",
        "name",
        "message",
    }


def test_match_schema_has_gatekeepers_fields() -> None:
    match = match_schema()
    assert set(match["properties"]) == {
        "kinds",
        "scope",
        "namespaces",
        "excludedNamespaces",
        "labelSelector",
        "namespaceSelector",
        "name",
        "source",
    }
    assert set(schema_at(match, "kinds.[]")["properties"]) == {"apiGroups", "kinds"}
    assert schema_at(match, "source")["enum"] == ["All", "Generated", "Original"]
    for selector in ("labelSelector", "namespaceSelector"):
        node = schema_at(match, selector)
        assert set(node["properties"]) == {"matchLabels", "matchExpressions"}
        assert node["properties"]["matchLabels"]["additionalProperties"] == {"type": "string"}
        assert schema_at(match, f"{selector}.matchExpressions.[]")["required"] == ["key", "operator"]
    assert structural_errors(match) == []


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("kube-system", True),
        ("kube-*", True),
        ("*-system", True),
        ("*system*", True),
        ("a:b", True),
        ("Kube", False),
        ("kube_system", False),
        ("ku*be", False),
        ("kube system", False),
    ],
)
def test_namespace_globs_follow_gatekeepers_pattern(value: str, ok: bool) -> None:
    validator = jsonschema.Draft4Validator(schema_at(match_schema(), "namespaces"))
    assert validator.is_valid([value]) is ok


def test_owner_reference_points_at_the_template_when_it_has_a_uid() -> None:
    template = make_template()
    template["metadata"].update(uid="0b9c1a2e-0000-4000-8000-000000000001", labels={"team": "platform"})
    crd = constraint_crd(template)
    assert crd["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "templates.celkeeper.io/v1",
            "kind": "ConstraintTemplate",
            "name": "k8sthing",
            "uid": "0b9c1a2e-0000-4000-8000-000000000001",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert crd["metadata"]["labels"] == {
        "team": "platform",
        "celkeeper.io/constraint": "yes",
        "celkeeper.io/template": "k8sthing",
    }
    gatekeeper = make_template(api_version="templates.gatekeeper.sh/v1")
    gatekeeper["metadata"]["uid"] = "u"
    assert (
        constraint_crd(gatekeeper)["metadata"]["ownerReferences"][0]["apiVersion"]
        == "templates.gatekeeper.sh/v1"
    )


def test_short_names_are_passed_on() -> None:
    template = make_template()
    template["spec"]["crd"]["spec"]["names"]["shortNames"] = ["thing", "th"]
    assert constraint_crd(template)["spec"]["names"]["shortNames"] == ["thing", "th"]


def test_the_template_is_not_changed() -> None:
    template = make_template(openAPIV3Schema={"properties": {"a": {}}})
    before = copy.deepcopy(template)
    constraint_crd(template)
    assert template == before
