"""constraint_crd(template) for legacy and open parameter schemas, and templates that cannot make a CRD:
errors at the offending field."""

from __future__ import annotations

from typing import Any

import pytest

from celkeeper.crds import constraint_crd, legacy_schema, parameters_schema, structural_errors
from celkeeper.errors import TemplateError
from tests.crds.helpers import (
    make_template,
    schema_at,
    spec_schema,
    walk,
)

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
