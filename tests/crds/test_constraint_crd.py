"""constraint_crd(template): the CRD of a template's constraints, for the gatekeeper-library samples,
celkeeper's examples and hand-made templates."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from celkeeper.crds import constraint_crd, legacy_schema, match_schema, parameters_schema, structural_errors
from celkeeper.errors import TemplateError
from tests.crds.helpers import constraints_of, example_dirs, library_dirs, schema_at, template_of, walk
from tests.support.samples import library

SAMPLE_DIRS = library_dirs() + example_dirs()


def make_template(
    kind: str = "K8sThing", api_version: str = "templates.celkeeper.io/v1", **validation: Any
) -> dict:
    spec: dict[str, Any] = {"names": {"kind": kind}}
    if validation:
        spec["validation"] = validation
    return {
        "apiVersion": api_version,
        "kind": "ConstraintTemplate",
        "metadata": {"name": kind.lower()},
        "spec": {"crd": {"spec": spec}, "targets": []},
    }


def versions(crd: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in crd["spec"]["versions"]}


def spec_schema(crd: dict[str, Any]) -> dict[str, Any]:
    return versions(crd)["v1beta1"]["schema"]["openAPIV3Schema"]


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


# --- legacy and open schemas ------------------------------------------------------------------------------


def test_v1_template_without_schema_has_no_parameters_as_in_gatekeeper() -> None:
    spec = schema_at(spec_schema(constraint_crd(make_template())), "spec")
    assert "parameters" not in spec["properties"]
    assert parameters_schema(make_template()) is None


@pytest.mark.parametrize(
    "api_version", ["templates.gatekeeper.sh/v1beta1", "templates.gatekeeper.sh/v1alpha1"]
)
def test_v1beta1_template_without_schema_takes_any_parameters(api_version: str) -> None:
    template = make_template(api_version=api_version)
    assert legacy_schema(template)
    assert parameters_schema(template) == {"x-kubernetes-preserve-unknown-fields": True}


def test_legacy_schema_is_opened_everywhere_like_frameworks_add_preserve_unknown_fields() -> None:
    written = {
        "properties": {
            "labels": {
                "type": "array",
                "items": {"type": "object", "properties": {"key": {"type": "string"}}},
            },
            "untyped": {},
            "list": {"type": "array"},
            "map": {"type": "object", "additionalProperties": {"type": "object"}},
        }
    }
    template = make_template(api_version="templates.gatekeeper.sh/v1beta1", openAPIV3Schema=written)
    assert parameters_schema(template) == {
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "labels": {
                "type": "array",
                "items": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"key": {"type": "string"}},
                },
            },
            "untyped": {"x-kubernetes-preserve-unknown-fields": True},
            "list": {"type": "array", "items": {"x-kubernetes-preserve-unknown-fields": True}},
            "map": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "additionalProperties": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
    }


def test_explicit_legacy_schema_overrides_the_version_default() -> None:
    written = {"type": "object", "properties": {"a": {"type": "object"}}}
    v1_legacy = make_template(openAPIV3Schema=written, legacySchema=True)
    assert parameters_schema(v1_legacy) == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {"a": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
    }
    beta_strict = make_template(
        api_version="templates.gatekeeper.sh/v1beta1", openAPIV3Schema=written, legacySchema=False
    )
    assert parameters_schema(beta_strict) == written


def test_non_legacy_schema_gets_open_nodes_only_where_a_type_is_missing() -> None:
    written = {
        "properties": {
            "typed": {"type": "string"},
            "untyped": {"description": "anything"},
            "list": {"type": "array"},
        }
    }
    assert parameters_schema(make_template(openAPIV3Schema=written)) == {
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "typed": {"type": "string"},
            "untyped": {"description": "anything", "x-kubernetes-preserve-unknown-fields": True},
            "list": {"type": "array", "items": {"x-kubernetes-preserve-unknown-fields": True}},
        },
    }


def test_generated_parameter_schemas_are_structural_for_any_legacy_setting() -> None:
    written = {"properties": {"a": {"items": {"properties": {"b": {}}}}, "c": {"additionalProperties": {}}}}
    for legacy in (True, False):
        schema = parameters_schema(make_template(openAPIV3Schema=written, legacySchema=legacy))
        assert structural_errors(schema) == []
        for path, node in walk(schema):
            assert node.get("type") or node.get("x-kubernetes-preserve-unknown-fields"), path


# --- templates that cannot make a CRD ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        (None, "the constraint kind is missing"),
        ("", "the constraint kind is missing"),
        (7, "the constraint kind is missing"),
        ("K8s_Thing", "cannot be a Kubernetes kind"),
        ("9Lives", "cannot be a Kubernetes kind"),
        ("K" * 64, "cannot be a Kubernetes kind"),
    ],
)
def test_a_kind_that_cannot_name_a_crd_is_an_error_at_its_field(kind: Any, message: str) -> None:
    template = make_template()
    template["spec"]["crd"]["spec"]["names"]["kind"] = kind
    with pytest.raises(TemplateError) as err:
        constraint_crd(template)
    assert err.value.location.path == "spec.crd.spec.names.kind"
    assert message in err.value.message


def test_a_template_without_spec_is_an_error() -> None:
    with pytest.raises(TemplateError) as err:
        constraint_crd({"kind": "ConstraintTemplate", "metadata": {"name": "x"}})
    assert err.value.location.path == "spec.crd.spec.names.kind"
    with pytest.raises(TemplateError) as err:
        constraint_crd({"kind": "ConstraintTemplate", "spec": {"crd": "nope"}})
    assert err.value.location.path == "spec.crd"


def test_a_bad_short_name_is_an_error_at_its_index() -> None:
    template = make_template()
    template["spec"]["crd"]["spec"]["names"]["shortNames"] = ["ok", "not ok"]
    with pytest.raises(TemplateError) as err:
        constraint_crd(template)
    assert err.value.location.path == "spec.crd.spec.names.shortNames[1]"


@pytest.mark.parametrize(
    ("schema", "path", "message"),
    [
        (
            {"type": "object", "properties": {"a": {"$ref": "#/x", "type": "string"}}},
            "spec.crd.spec.validation.openAPIV3Schema.properties.a.$ref",
            "$ref is not supported",
        ),
        (
            {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
            "spec.crd.spec.validation.openAPIV3Schema.properties.a.type",
            "single type name",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "additionalProperties": {"type": "string"},
            },
            "spec.crd.spec.validation.openAPIV3Schema.additionalProperties",
            "mutually exclusive",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "anyOf": [{"properties": {"a": {"type": "string"}}}],
            },
            "spec.crd.spec.validation.openAPIV3Schema.anyOf[0].properties.a.type",
            "must be undefined",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "array", "uniqueItems": True, "items": {"type": "string"}}},
            },
            "spec.crd.spec.validation.openAPIV3Schema.properties.a.uniqueItems",
            "quadratic",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=x)"}}},
            "spec.crd.spec.validation.openAPIV3Schema.properties.a.pattern",
            "RE2",
        ),
        ("not a schema", "spec.crd.spec.validation.openAPIV3Schema", "must be a mapping"),
    ],
)
def test_a_parameter_schema_kubernetes_refuses_is_an_error_at_the_offending_field(
    schema: Any, path: str, message: str
) -> None:
    with pytest.raises(TemplateError) as err:
        constraint_crd(make_template(openAPIV3Schema=schema))
    assert err.value.location.path == path
    assert message in err.value.message


def test_legacy_schema_must_be_a_boolean() -> None:
    with pytest.raises(TemplateError) as err:
        constraint_crd(make_template(legacySchema="yes"))
    assert err.value.location.path == "spec.crd.spec.validation.legacySchema"
