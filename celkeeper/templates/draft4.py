"""jsonschema's Draft 4 checks passed without importing it, for the keywords parameter schemas mostly use.

`schema_passes(schema)`: Draft4Validator.check_schema(schema) raises nothing; `value_passes(schema, value)`:
Draft4Validator(schema).iter_errors(value) yields nothing. Each says True only where jsonschema (4.x) would
pass, by its own rules for these keywords (the Draft 4 meta-schema; jsonschema's `type`, `enum`,
`minimum`, `maximum`, `minLength`, `maxLength`, `minItems`, `maxItems`, `required`, `properties`, `items`,
`additionalProperties`; Draft 4's types: an integer is an int, never a float or a bool), and False for
anything else: another keyword, a value these rules find wrong, or one they are unsure of. False means
"ask jsonschema", which words the problems (templates.parameters), so a run whose parameter schemas and
values are all valid and use only these keywords (most templates: the gatekeeper-library's, celkeeper's
examples) neither imports jsonschema (~30 ms) nor runs it. tests/templates/test_draft4.py compares both
with jsonschema on every schema and constraint of the project and the samples and on generated cases.
"""

from __future__ import annotations

from typing import Any

#: Draft 4's simple types (the meta-schema's `simpleTypes`)
_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
#: the keywords this module knows: a schema with any other is left to jsonschema
_KEYWORDS = frozenset(
    {
        "type",
        "enum",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "required",
        "properties",
        "items",
        "additionalProperties",
    }
)
_COUNTS = frozenset({"minLength", "maxLength", "minItems", "maxItems"})


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_type(value: object, name: str) -> bool:
    """jsonschema's Draft 4 type checker, for a value read from JSON or YAML."""
    if name == "string":
        return isinstance(value, str)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return _is_number(value)
    if name == "boolean":
        return isinstance(value, bool)
    return name == "null" and value is None


def _distinct_strings(value: object, *, none: bool = False) -> bool:
    """A non-empty list of distinct strings (and None, when `none`)."""
    if not isinstance(value, list) or not value:
        return False
    if not all(isinstance(v, str) or (none and v is None) for v in value):
        return False
    return len(set(value)) == len(value)


def schema_passes(schema: Any) -> bool:
    """True only when Draft 4's meta-schema finds nothing wrong with `schema` (see the module docstring)."""
    if not isinstance(schema, dict):
        return False
    for key, value in schema.items():
        if key not in _KEYWORDS:
            return False
        if key == "type":
            if isinstance(value, str):
                ok = value in _TYPES
            else:
                ok = _distinct_strings(value) and all(t in _TYPES for t in value)
        elif key == "enum":
            ok = _distinct_strings(value, none=True)
        elif key in ("minimum", "maximum"):
            ok = _is_number(value)
        elif key in _COUNTS:
            ok = _is_type(value, "integer") and value >= 0
        elif key == "required":
            ok = _distinct_strings(value)
        elif key == "properties":
            ok = isinstance(value, dict) and all(schema_passes(child) for child in value.values())
        elif key == "items":
            ok = schema_passes(value)  # a list of schemas (tuple items) is left to jsonschema
        else:  # additionalProperties
            ok = isinstance(value, bool) or schema_passes(value)
        if not ok:
            return False
    return True


def value_passes(schema: Any, value: Any) -> bool:
    """True only when Draft 4 validation of `value` against `schema` (a schema `schema_passes` accepts)
    finds nothing wrong (see the module docstring)."""
    if not isinstance(schema, dict):
        return False
    for key, expected in schema.items():
        if key == "type":
            names = [expected] if isinstance(expected, str) else expected
            if not any(_is_type(value, name) for name in names):
                return False
        elif key == "enum":
            # jsonschema's `equal`: a string equals only an equal string, None only None
            if not (value is None or isinstance(value, str)) or value not in expected:
                return False
        elif key == "minimum":
            if _is_number(value) and value < expected:
                return False
        elif key == "maximum":
            if _is_number(value) and value > expected:
                return False
        elif key in ("minLength", "maxLength"):
            if isinstance(value, str) and not _within(len(value), key, expected):
                return False
        elif key in ("minItems", "maxItems"):
            if isinstance(value, list) and not _within(len(value), key, expected):
                return False
        elif key == "required":
            if isinstance(value, dict) and any(name not in value for name in expected):
                return False
        elif key == "properties":
            if isinstance(value, dict) and not all(
                value_passes(child, value[name]) for name, child in expected.items() if name in value
            ):
                return False
        elif key == "items":
            if isinstance(value, list) and not all(value_passes(expected, item) for item in value):
                return False
        elif key == "additionalProperties":
            if isinstance(value, dict) and not _additional_pass(schema, expected, value):
                return False
        else:
            return False
    return True


def _within(length: int, key: str, bound: int) -> bool:
    return length >= bound if key.startswith("min") else length <= bound


def _additional_pass(schema: dict[str, Any], extra: Any, value: dict[str, Any]) -> bool:
    """additionalProperties: the keys `properties` does not name (no patternProperties here)."""
    known = schema.get("properties") or {}
    extras = [key for key in value if key not in known]
    if extra is True or not extras:
        return True
    if extra is False:
        return False
    return all(value_passes(extra, value[key]) for key in extras)
