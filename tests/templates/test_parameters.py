"""Parameter schemas: OpenAPI v3 value checks and Gatekeeper's unknown-field rule."""

from __future__ import annotations

from typing import Any

import pytest

from celkeeper.templates import ParameterSchema, SchemaProblem

LABELS = {
    "type": "object",
    "properties": {
        "message": {"type": "string"},
        "labels": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"key": {"type": "string"}, "allowedRegex": {"type": "string"}},
                "required": ["key"],
            },
        },
    },
}


def test_valid_parameters_have_no_errors() -> None:
    schema = ParameterSchema(LABELS)
    assert schema.errors({"labels": [{"key": "owner", "allowedRegex": "^[a-z]+$"}], "message": "hi"}) == []
    assert schema.errors({}) == []


def test_value_errors_name_the_field() -> None:
    schema = ParameterSchema(LABELS)
    assert schema.errors({"labels": [{"key": 5}, {"allowedRegex": "x"}], "message": ["a"]}) == [
        ("spec.parameters.labels[0].key", "must be of type string, not integer (5)"),
        ("spec.parameters.labels[1].key", "required field is missing"),
        ("spec.parameters.message", "must be of type string, not array (['a'])"),
    ]
    assert schema.errors("text") == [("spec.parameters", 'must be of type object, not string ("text")')]


def test_unknown_fields_are_rejected_where_properties_are_listed() -> None:
    schema = ParameterSchema(LABELS)
    assert schema.errors({"labels": [{"key": "a", "regex": "x"}], "mesage": "typo"}) == [
        ("spec.parameters.labels[0].regex", 'unknown field "spec.parameters.labels[0].regex"'),
        ("spec.parameters.mesage", 'unknown field "spec.parameters.mesage"'),
    ]


def test_object_without_properties_knows_no_fields_as_in_kubernetes_pruning() -> None:
    schema = ParameterSchema({"type": "object", "properties": {"settings": {"type": "object"}}})
    assert schema.errors({"settings": {"a": 1}}) == [
        ("spec.parameters.settings.a", 'unknown field "spec.parameters.settings.a"'),
    ]


def test_preserve_unknown_fields_and_additional_properties_keep_fields() -> None:
    schema = ParameterSchema(
        {
            "type": "object",
            "properties": {
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "limits": {"type": "object", "additionalProperties": {"type": "integer"}},
                "nested": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}},
                },
            },
        }
    )
    assert schema.errors({"free": {"anything": [1, {"x": 2}]}, "limits": {"cpu": 2}}) == []
    assert schema.errors({"limits": {"cpu": "2"}}) == [
        ("spec.parameters.limits.cpu", 'must be of type integer, not string ("2")'),
    ]
    # preserving keeps unknown keys, but known properties are still pruned inside
    assert schema.errors({"nested": {"other": 1, "known": {"a": "x", "b": 2}}}) == [
        ("spec.parameters.nested.known.b", 'unknown field "spec.parameters.nested.known.b"'),
    ]


def test_nullable() -> None:
    schema = ParameterSchema(
        {
            "type": "object",
            "properties": {
                "maybe": {"type": "string", "nullable": True},
                "never": {"type": "string"},
                "choice": {"type": "string", "enum": ["a", "b"], "nullable": True},
            },
        }
    )
    assert schema.errors({"maybe": None, "choice": None}) == []
    assert schema.errors({"never": None, "choice": "c"}) == [
        ("spec.parameters.choice", 'must be one of "a", "b", None; got "c"'),
        ("spec.parameters.never", "must be of type string, not null (None)"),
    ]


def test_int_or_string_and_numbers() -> None:
    schema = ParameterSchema(
        {
            "type": "object",
            "properties": {
                "port": {"x-kubernetes-int-or-string": True},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                "ratio": {"type": "number", "exclusiveMaximum": True, "maximum": 1},
                "flag": {"type": "boolean"},
            },
        }
    )
    assert schema.errors({"port": 80, "replicas": 3, "ratio": 0.5, "flag": False}) == []
    assert schema.errors({"port": "http"}) == []
    errors = schema.errors({"port": 1.5, "replicas": 0, "ratio": 1, "flag": "yes"})
    assert [path for path, _ in errors] == [
        "spec.parameters.flag",
        "spec.parameters.port",
        "spec.parameters.ratio",
        "spec.parameters.replicas",
    ]
    assert errors[0][1] == 'must be of type boolean, not string ("yes")'
    assert errors[3][1] == "0 is less than the minimum of 1"


def test_legacy_schema_preserves_unknown_fields_everywhere() -> None:
    # v1beta1 templates default to legacySchema: true (frameworks AddPreserveUnknownFields)
    schema = ParameterSchema(
        {"properties": {"labels": {"type": "array", "items": {"type": "string"}}}}, legacy=True
    )
    assert schema.errors({"labels": ["a"], "other": {"x": 1}}) == []
    assert schema.errors({"labels": [1]}) == [
        ("spec.parameters.labels[0]", "must be of type string, not integer (1)")
    ]
    anything = ParameterSchema(None, legacy=True)
    assert anything.errors({"whatever": [1, 2]}) == []


def test_no_schema_means_no_parameters() -> None:
    schema = ParameterSchema(None)
    assert schema.errors({"a": 1}) == [
        ("spec.parameters", 'unknown field "spec.parameters": the template defines no parameters'),
    ]


@pytest.mark.parametrize(
    ("schema", "path", "message"),
    [
        ({"type": "object", "properties": {"a": {"type": "strin"}}}, "properties.a.type", "is not valid"),
        ({"type": "object", "properties": []}, "properties", "properties must be a map"),
        ({"type": "array", "items": [{"type": "string"}]}, "items", "items must be one schema, not a list"),
    ],
)
def test_invalid_schemas_are_reported(schema: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(SchemaProblem) as caught:
        ParameterSchema(schema)
    assert caught.value.path == path
    assert message in caught.value.message
