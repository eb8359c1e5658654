"""The structural-schema rules, written from Kubernetes' apiextensions validation, and the two repairs."""

from __future__ import annotations

from typing import Any

import pytest

from celkeeper.crds import add_preserve_unknown_fields, fill_missing_types, structural_errors

P = "x-kubernetes-preserve-unknown-fields"

STRUCTURAL = [
    {"type": "object", "properties": {"a": {"type": "string"}}},
    {"type": "object", "properties": {"a": {P: True}}},
    {"type": "object", P: True},
    {"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {"type": "integer"}}}},
    {"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": True}}},
    {
        "type": "object",
        "properties": {
            "a": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
        },
    },
    {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
    },
    {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "anyOf": [{"properties": {"a": {"pattern": "^x"}}}],
    },
    {
        "type": "object",
        "properties": {"l": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}},
    },
    {
        "type": "object",
        "properties": {
            "l": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
            }
        },
    },
    {
        "type": "object",
        "properties": {"e": {"type": "object", "x-kubernetes-embedded-resource": True, P: True}},
    },
    {"type": "object", "properties": {"n": {"type": "string", "nullable": True, "pattern": "^[a-z]+$"}}},
    {
        "type": "object",
        "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}},
    },
    # below the root, Kubernetes does not require junctors to name only fields of the structural part
    {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "not": {"properties": {"b": {"minLength": 1}}},
    },
]


@pytest.mark.parametrize("schema", STRUCTURAL)
def test_structural_schemas_pass(schema: dict[str, Any]) -> None:
    assert structural_errors(schema) == []


# (schema of a field, path of the problem, part of the message): every one is refused by the API server
NON_STRUCTURAL: list[tuple[dict[str, Any], str, str]] = [
    ({"properties": {"a": {"type": "string"}}}, "type", "must not be empty for object fields"),
    ({"type": "object", "properties": {"a": {}}}, "properties.a.type", "must not be empty for object fields"),
    (
        {"type": "object", "properties": {"a": {"type": "array", "items": {}}}},
        "properties.a.items.type",
        "must not be empty for array items",
    ),
    ({"type": "object", "properties": {"a": {"type": "array"}}}, "properties.a.items", "must be specified"),
    (
        {"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}}},
        "properties.a.items",
        "not an array",
    ),
    ({"type": "object", "properties": {"a": {"type": "null"}}}, "properties.a.type", "cannot be null"),
    ({"type": "object", "properties": {"a": {"type": "int"}}}, "properties.a.type", "unsupported type"),
    (
        {"type": "object", "properties": {"a": {"type": "string", P: False}}},
        f"properties.a.{P}",
        "must be true or undefined",
    ),
    (
        {"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": True, P: True}}},
        f"properties.a.{P}",
        "must be false if x-kubernetes-int-or-string",
    ),
    ({"type": "object", "definitions": {"x": {"type": "string"}}}, "definitions", "not supported"),
    (
        {"type": "object", "patternProperties": {"^a": {"type": "string"}}},
        "patternProperties",
        "not supported",
    ),
    ({"type": "object", "dependencies": {"a": ["b"]}}, "dependencies", "not supported"),
    (
        {"type": "array", "items": {"type": "string"}, "additionalItems": False},
        "additionalItems",
        "not supported",
    ),
    ({"type": "string", "id": "x"}, "id", "not supported"),
    (
        {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False},
        "additionalProperties",
        "mutually exclusive",
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "allOf": [{"properties": {"a": {"type": "string"}}}],
        },
        "allOf[0].properties.a.type",
        "must be undefined",
    ),
    (
        {"type": "object", "properties": {"a": {"type": "string"}}, "oneOf": [{"description": "x"}]},
        "oneOf[0].description",
        "must be undefined",
    ),
    (
        {"type": "object", "anyOf": [{"properties": {"metadata": {"minProperties": 1}}}]},
        "anyOf[0].properties.metadata",
        "nested context",
    ),
    (
        {
            "type": "object",
            "properties": {"l": {"type": "array", "items": {"type": "string"}}},
            "anyOf": [{"properties": {"l": {"items": {"default": "x"}}}}],
        },
        "anyOf[0].properties.l.items.default",
        "must be undefined",
    ),
    (
        {"type": "object", "properties": {"l": {"type": "string", "x-kubernetes-list-type": "set"}}},
        "properties.l.type",
        "must be array",
    ),
    (
        {
            "type": "object",
            "properties": {
                "l": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "bag"}
            },
        },
        "properties.l.x-kubernetes-list-type",
        "unsupported value",
    ),
    (
        {
            "type": "object",
            "properties": {
                "l": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "items": {"type": "object", "properties": {"k": {"type": "string"}}},
                }
            },
        },
        "properties.l.x-kubernetes-list-map-keys",
        "must not be empty",
    ),
    (
        {
            "type": "object",
            "properties": {
                "l": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["k"],
                    "items": {"type": "object", "properties": {"k": {"type": "string"}}},
                }
            },
        },
        "properties.l.items.properties.k",
        "default or be a required",
    ),
    (
        {
            "type": "object",
            "properties": {
                "m": {"type": "array", "items": {"type": "string"}, "x-kubernetes-map-type": "atomic"}
            },
        },
        "properties.m.type",
        "must be object",
    ),
    (
        {"type": "object", "properties": {"e": {"x-kubernetes-embedded-resource": True, P: True}}},
        "properties.e.type",
        "must be object if x-kubernetes-embedded-resource",
    ),
    (
        {"type": "object", "properties": {"s": {"type": "string", "pattern": "a(?<=b)"}}},
        "properties.s.pattern",
        "RE2",
    ),
    (
        {"type": "object", "properties": {"odd.key/name": {}}},
        "properties[odd.key/name].type",
        "must not be empty",
    ),
]


@pytest.mark.parametrize(("schema", "path", "message"), NON_STRUCTURAL)
def test_non_structural_schemas_are_refused_at_the_offending_field(
    schema: dict[str, Any], path: str, message: str
) -> None:
    errors = structural_errors(schema)
    assert any(p == path and message in m for p, m in errors), errors


def test_paths_start_at_the_given_path() -> None:
    errors = structural_errors({"type": "object", "properties": {"a": {}}}, "spec.x")
    assert errors == [("spec.x.properties.a.type", "must not be empty for object fields")]


# (root schema of a resource, path of the problem, part of the message)
ROOT_NON_STRUCTURAL: list[tuple[dict[str, Any], str, str]] = [
    ({"properties": {"spec": {"type": "object"}}}, "type", "must not be empty at the root"),
    ({"type": "array", "items": {"type": "string"}}, "type", "must be object at the root"),
    (
        {"type": "object", "additionalProperties": {"type": "string"}},
        "additionalProperties",
        "must not be used at the root",
    ),
    (
        {"type": "object", "properties": {"kind": {"type": "integer"}}},
        "properties.kind.type",
        "must be string",
    ),
    (
        {"type": "object", "properties": {"metadata": {"type": "string"}}},
        "properties.metadata.type",
        "must be object",
    ),
    (
        {
            "type": "object",
            "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}},
        },
        "properties.metadata",
        "other than name and generateName",
    ),
    (
        {"type": "object", "properties": {"metadata": {"type": "object", "description": "meta"}}},
        "properties.metadata",
        "other than name and generateName",
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "not": {"properties": {"b": {"minLength": 1}}},
        },
        "not.properties.b",
        "structural part",
    ),
    (
        {"type": "object", "properties": {"a": {"type": "string"}}, "anyOf": [{"items": {"minLength": 1}}]},
        "anyOf[0].items",
        "structural part",
    ),
]


@pytest.mark.parametrize(("schema", "path", "message"), ROOT_NON_STRUCTURAL)
def test_root_rules(schema: dict[str, Any], path: str, message: str) -> None:
    errors = structural_errors(schema, root=True)
    assert any(p == path and message in m for p, m in errors), errors


def test_root_metadata_may_restrict_the_name() -> None:
    schema = {
        "type": "object",
        "properties": {
            "metadata": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 63},
                    "generateName": {"type": "string"},
                },
            }
        },
    }
    assert structural_errors(schema, root=True) == []


# --- frameworks' AddPreserveUnknownFields cases (constraint/pkg/schema/transform_test.go) ---------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, {P: True}),
        ({P: True}, {P: True}),
        ({"type": "object"}, {"type": "object", P: True}),
        ({"type": "array"}, {"type": "array", "items": {P: True}}),
        ({"type": "array", "items": {}}, {"type": "array", "items": {P: True}}),
        ({"properties": {"foo": {}}}, {P: True, "properties": {"foo": {P: True}}}),
        (
            {"items": {"type": "object", "properties": {"key": {"type": "string"}}}},
            {P: True, "items": {"type": "object", P: True, "properties": {"key": {"type": "string"}}}},
        ),
        (
            {
                "type": "object",
                "properties": {
                    "foo": {
                        "type": "object",
                        "properties": {
                            "bar": {"type": "object", "properties": {"burrito": {"type": "string"}}}
                        },
                    }
                },
            },
            {
                "type": "object",
                P: True,
                "properties": {
                    "foo": {
                        "type": "object",
                        P: True,
                        "properties": {
                            "bar": {"type": "object", P: True, "properties": {"burrito": {"type": "string"}}}
                        },
                    }
                },
            },
        ),
        (
            {"items": {"items": {"type": "string"}}},
            {P: True, "items": {P: True, "items": {"type": "string"}}},
        ),
        (
            {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
            {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
        ),
        (
            {"additionalProperties": {"additionalProperties": False}},
            {P: True, "additionalProperties": {P: True, "additionalProperties": False}},
        ),
    ],
)
def test_add_preserve_unknown_fields_matches_frameworks(
    given: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert add_preserve_unknown_fields(given) == expected


def test_add_preserve_unknown_fields_leaves_a_list_of_item_schemas_for_the_checker_to_refuse() -> None:
    opened = add_preserve_unknown_fields({"items": [{"type": "string"}]})
    assert ("items", "items must be a schema object and not an array") in structural_errors(opened)


def test_fill_missing_types_touches_only_untyped_nodes() -> None:
    given = {
        "type": "object",
        "properties": {
            "a": {"type": "object", "properties": {"b": {}}},
            "c": {"x-kubernetes-int-or-string": True},
        },
    }
    assert fill_missing_types(given) == {
        "type": "object",
        "properties": {
            "a": {"type": "object", "properties": {"b": {P: True}}},
            "c": {"x-kubernetes-int-or-string": True},
        },
    }
    assert given["properties"]["a"]["properties"]["b"] == {}  # the input is not changed
