"""Structural schemas: make a template's parameter schema acceptable to the API server, and check it.

Kubernetes accepts a CRD only if its schemas are *structural* (apiextensions-apiserver
pkg/apiserver/schema/validation.go, pkg/apis/apiextensions/validation/validation.go). `structural_errors`
checks those rules on a plain-dict schema and names the offending field for each problem, so a template
whose schema the API server would refuse is reported with a clear path before anything is written.

`add_preserve_unknown_fields` is frameworks' schema.AddPreserveUnknownFields (used for legacy schemas);
`fill_missing_types` is the smaller repair celkeeper applies to non-legacy schemas.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import re2

from celkeeper.crds.schema import PRESERVE, Schema
from celkeeper.documents import index_path, key_path
from celkeeper.model import JsonObject

_Report = Callable[[str, str], None]  # error(path, message)

INT_OR_STRING = "x-kubernetes-int-or-string"
EMBEDDED = "x-kubernetes-embedded-resource"
LIST_TYPE = "x-kubernetes-list-type"
LIST_MAP_KEYS = "x-kubernetes-list-map-keys"
MAP_TYPE = "x-kubernetes-map-type"
VALIDATIONS = "x-kubernetes-validations"

TYPES = frozenset({"array", "boolean", "integer", "number", "object", "string"})
JUNCTORS = ("allOf", "anyOf", "oneOf")
# keywords a CRD schema may not use at all (specStandardValidatorV3.validate)
FORBIDDEN_KEYWORDS = {
    "id": "id is not supported",
    "additionalItems": "additionalItems is not supported",
    "patternProperties": "patternProperties is not supported",
    "definitions": "definitions is not supported",
    "dependencies": "dependencies is not supported",
    "$ref": "$ref is not supported",
}
# what a schema under allOf/anyOf/oneOf/not may not set (validateNestedValueValidation)
FORBIDDEN_IN_JUNCTORS = (
    "type",
    "additionalProperties",
    "default",
    "title",
    "description",
    "nullable",
    "externalDocs",
    PRESERVE,
    EMBEDDED,
    INT_OR_STRING,
    LIST_MAP_KEYS,
    LIST_TYPE,
    MAP_TYPE,
    VALIDATIONS,
)

# --- repairs -------------------------------------------------------------------------------------


def add_preserve_unknown_fields(schema: Schema) -> Schema:
    """A copy of `schema` with x-kubernetes-preserve-unknown-fields on every object or untyped node, and an
    open item schema on every array without one (frameworks' AddPreserveUnknownFields, for legacy schemas).
    """
    result = copy.deepcopy(schema)
    _add_preserve(result)
    return result


def _add_preserve(node: Schema) -> None:
    kind = node.get("type", "")
    if kind in ("", "object"):
        node[PRESERVE] = True
    elif kind == "array" and not isinstance(node.get("items"), dict | list):
        node["items"] = {PRESERVE: True}
    for child in _structural_children(node):
        _add_preserve(child)


def fill_missing_types(schema: Schema) -> Schema:
    """A copy of `schema` where every node the API server would refuse for lack of a `type` keeps any value
    instead (x-kubernetes-preserve-unknown-fields), and every array without `items` gets an open item
    schema. Nodes that have a type are left exactly as they are.
    """
    result = copy.deepcopy(schema)
    _fill(result)
    return result


def _fill(node: Schema) -> None:
    if not node.get("type") and not node.get(INT_OR_STRING) and not node.get(PRESERVE):
        node[PRESERVE] = True
    if node.get("type") == "array" and "items" not in node:
        node["items"] = {PRESERVE: True}
    for child in _structural_children(node):
        _fill(child)


def _structural_children(node: Schema) -> Iterator[Schema]:
    properties = node.get("properties")
    if isinstance(properties, dict):
        yield from (v for v in properties.values() if isinstance(v, dict))
    items = node.get("items")
    if isinstance(items, dict):
        yield items
    additional = node.get("additionalProperties")
    if isinstance(additional, dict):
        yield additional


# --- the rules -----------------------------------------------------------------------------------


def structural_errors(schema: Any, path: str = "", *, root: bool = False) -> list[tuple[str, str]]:
    """Every reason the API server would refuse `schema` in a CRD, each as (field path, message); the
    paths start with `path` (the schema's own path in its document).

    root=True checks it as a resource's root schema (type object, no additionalProperties, metadata
    restricted to name/generateName); otherwise as the schema of a field.
    """
    errors: list[tuple[str, str]] = []
    _check(schema, path, "root" if root else "field", errors)
    return errors


def _join(path: str, *keys: str) -> str:
    """`path` extended by map keys, written as celkeeper.documents writes field paths."""
    for key in keys:
        path = key_path(path, key)
    return path


def _check(node: Any, path: str, level: str, errors: list[tuple[str, str]]) -> None:
    def error(where: str, message: str) -> None:
        errors.append((where, message))

    if not isinstance(node, dict):
        error(path, "must be a schema (a mapping)")
        return

    for key, message in FORBIDDEN_KEYWORDS.items():
        if key in node:
            error(_join(path, key), message)

    kind = node.get("type")
    if kind is not None and not isinstance(kind, str):
        error(_join(path, "type"), "must be a single type name, not a list")
        kind = None
    if kind == "null":
        error(_join(path, "type"), "type cannot be null; use nullable instead")
    elif kind and kind not in TYPES:
        error(_join(path, "type"), f"unsupported type {kind!r}; use one of {', '.join(sorted(TYPES))}")

    preserve = node.get(PRESERVE)
    if preserve is not None and preserve is not True:
        error(_join(path, PRESERVE), "must be true or undefined")
    int_or_string = node.get(INT_OR_STRING) is True
    if int_or_string and preserve is True:
        error(_join(path, PRESERVE), f"must be false if {INT_OR_STRING} is true")
    embedded = node.get(EMBEDDED) is True
    if embedded and kind != "object":
        error(_join(path, "type"), f"must be object if {EMBEDDED} is true")

    if not kind and not int_or_string and preserve is not True and not embedded:
        where = {"root": "at the root", "item": "for array items", "field": "for object fields"}[level]
        error(_join(path, "type"), f"must not be empty {where}")
    if level == "root" and kind and kind != "object":
        error(_join(path, "type"), "must be object at the root")

    if node.get("uniqueItems") is True:
        error(_join(path, "uniqueItems"), "uniqueItems cannot be true (quadratic runtime)")

    pattern = node.get("pattern")
    if isinstance(pattern, str):
        options = re2.Options()
        options.log_errors = False
        try:
            re2.compile(pattern, options)
        except re2.error as err:
            error(_join(path, "pattern"), f"must be a valid RE2 regular expression: {_text(err)}")

    properties = node.get("properties")
    if properties is not None and not isinstance(properties, dict):
        error(_join(path, "properties"), "must be a mapping of field names to schemas")
        properties = None
    additional = node.get("additionalProperties")
    if additional is not None:
        if level == "root":
            error(_join(path, "additionalProperties"), "must not be used at the root")
        if properties and (additional is False or isinstance(additional, dict)):
            error(
                _join(path, "additionalProperties"),
                "additionalProperties and properties are mutually exclusive",
            )
        if isinstance(additional, dict):
            _check(additional, _join(path, "additionalProperties"), "field", errors)

    items = node.get("items")
    if isinstance(items, list):
        error(_join(path, "items"), "items must be a schema object and not an array")
    elif isinstance(items, dict):
        _check(items, _join(path, "items"), "item", errors)
    elif kind == "array":
        error(_join(path, "items"), "must be specified for an array")

    for name, child in (properties or {}).items():
        _check(child, _join(path, "properties", name), "field", errors)

    _check_list_and_map_types(node, kind, path, error)

    if level == "root" or embedded:
        for meta in ("apiVersion", "kind"):
            child = (properties or {}).get(meta)
            if isinstance(child, dict) and child.get("type") != "string":
                error(_join(path, "properties", meta, "type"), "must be string")
        metadata = (properties or {}).get("metadata")
        if isinstance(metadata, dict):
            if metadata.get("type") != "object":
                error(_join(path, "properties", "metadata", "type"), "must be object")
            if level == "root":
                _check_root_metadata(metadata, _join(path, "properties", "metadata"), error)

    # Kubernetes checks that junctors name only fields of the structural part for the root schema only
    # (validateStructuralCompleteness); junctors of nested fields are not held to it
    complete = level == "root"
    for junctor in JUNCTORS:
        branches = node.get(junctor)
        if branches is None:
            continue
        if not isinstance(branches, list):
            error(_join(path, junctor), "must be a list of schemas")
            continue
        if int_or_string and _is_int_or_string_pattern(node, junctor):
            continue
        for i, branch in enumerate(branches):
            _check_nested(branch, index_path(_join(path, junctor), i), node, error, complete)
    if "not" in node:
        _check_nested(node["not"], _join(path, "not"), node, error, complete)


def _check_list_and_map_types(node: Schema, kind: str | None, path: str, error: _Report) -> None:
    list_type = node.get(LIST_TYPE)
    if list_type is not None:
        if kind != "array":
            error(_join(path, "type"), f"must be array if {LIST_TYPE} is specified")
        if list_type not in ("atomic", "set", "map"):
            error(_join(path, LIST_TYPE), f"unsupported value {list_type!r}: atomic, set or map")
    keys = node.get(LIST_MAP_KEYS)
    if keys and list_type != "map":
        error(_join(path, LIST_TYPE), f"must be map if {LIST_MAP_KEYS} is non-empty")
    if list_type == "map":
        items = node.get("items")
        if not keys:
            error(_join(path, LIST_MAP_KEYS), f"must not be empty if {LIST_TYPE} is map")
        if not isinstance(items, dict) or items.get("type") != "object":
            error(_join(path, "items", "type"), f"must be object if the array's {LIST_TYPE} is map")
        else:
            item_properties = items.get("properties") or {}
            required = set(items.get("required") or ())
            for key in keys or ():
                key_schema = item_properties.get(key)
                if not isinstance(key_schema, dict):
                    error(_join(path, LIST_MAP_KEYS), f"{key!r} must name a property of the items")
                    continue
                if key_schema.get("type") in ("array", "object"):
                    error(_join(path, "items", "properties", key, "type"), "a list map key must be a scalar")
                if key not in required and "default" not in key_schema:
                    error(
                        _join(path, "items", "properties", key),
                        "a list map key must have a default or be a required property",
                    )
    map_type = node.get(MAP_TYPE)
    if map_type is not None:
        if kind != "object":
            error(_join(path, "type"), f"must be object if {MAP_TYPE} is specified")
        if map_type not in ("atomic", "granular"):
            error(_join(path, MAP_TYPE), f"unsupported value {map_type!r}: atomic or granular")


def _check_root_metadata(metadata: Schema, path: str, error: _Report) -> None:
    """At the root, a metadata schema may only restrict name and generateName."""
    allowed_keys = {"type", "properties"}
    extra = sorted(set(metadata) - allowed_keys)
    fields = metadata.get("properties") or {}
    extra_fields = sorted(set(fields) - {"name", "generateName"}) if isinstance(fields, dict) else []
    if extra or extra_fields:
        error(path, "must not specify anything other than name and generateName")


def _is_int_or_string_pattern(node: Schema, junctor: str) -> bool:
    pair = [{"type": "integer"}, {"type": "string"}]
    if junctor == "anyOf":
        return node.get("anyOf") == pair
    if junctor == "allOf":
        first = (node.get("allOf") or [{}])[0]
        return isinstance(first, dict) and first.get("anyOf") == pair
    return False


def _check_nested(nested: Any, path: str, structural: Schema | None, error: _Report, complete: bool) -> None:
    """A schema under a junctor: only value validations; with `complete`, only on fields the structural part
    specifies."""
    if not isinstance(nested, dict):
        error(path, "must be a schema (a mapping)")
        return
    for key in FORBIDDEN_IN_JUNCTORS:
        if key in nested and not (key == "additionalProperties" and nested[key] is True):
            error(_join(path, key), "must be undefined to be structural")
    for key, message in FORBIDDEN_KEYWORDS.items():
        if key in nested:
            error(_join(path, key), message)
    structural = structural or {}
    properties = nested.get("properties")
    if isinstance(properties, dict):
        found = structural.get("properties")
        known: JsonObject = found if isinstance(found, dict) else {}
        for name, child in properties.items():
            if name == "metadata":
                error(_join(path, "properties", "metadata"), "must not be specified in a nested context")
            if complete and name not in known:
                error(
                    _join(path, "properties", name),
                    "must be specified in the structural part of the schema too",
                )
            _check_nested(child, _join(path, "properties", name), known.get(name), error, complete)
    items = nested.get("items")
    if items is not None:
        if complete and not isinstance(structural.get("items"), dict):
            error(_join(path, "items"), "must be specified in the structural part of the schema too")
        _check_nested(items, _join(path, "items"), structural.get("items"), error, complete)
    for junctor in JUNCTORS:
        for i, branch in enumerate(nested.get(junctor) or ()):
            _check_nested(branch, index_path(_join(path, junctor), i), structural, error, complete)
    if "not" in nested:
        _check_nested(nested["not"], _join(path, "not"), structural, error, complete)


def _text(err: Exception) -> str:
    arg = err.args[0] if err.args else err
    return arg.decode(errors="replace") if isinstance(arg, bytes) else str(arg)
