"""A template's parameter schema (spec.crd.spec.validation.openAPIV3Schema), checked as Gatekeeper does.

Gatekeeper validates a constraint against the CRD it generates from the template (frameworks
constraint/pkg/client/crds/validate.go): first the OpenAPI value validation, then structural pruning
with unknown-field tracking - any field the schema does not know is an error (`unknown fields`).
Pruning keeps what `x-kubernetes-preserve-unknown-fields: true` preserves and what
`additionalProperties` allows; an object schema with neither and without `properties` knows no
fields. With `legacySchema: true` (the default of v1beta1 templates) frameworks adds
`x-kubernetes-preserve-unknown-fields: true` to every object (and untyped) level first
(frameworks apis/templates AddPreserveUnknownFields), so unknown fields are kept.

Value validation uses `jsonschema` (Draft 4, whose `exclusiveMaximum` is a boolean like OpenAPI v3's)
on a translation of the OpenAPI v3 schema: `nullable` adds null to the type, `x-kubernetes-int-or-string`
accepts integers and strings, other `x-kubernetes-*` extensions and `format` are not value checks here.
jsonschema is imported only for a schema or value that templates.draft4 cannot pass without it (one
using other keywords, or one with a problem: jsonschema words it).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from celkeeper.documents import index_path, key_path
from celkeeper.model import JsonObject, JsonValue
from celkeeper.templates.draft4 import schema_passes, value_passes

if TYPE_CHECKING:  # jsonschema is imported when a check is not among the known verdicts
    from jsonschema import Draft4Validator
    from jsonschema import exceptions as jsonschema_errors

PRESERVE = "x-kubernetes-preserve-unknown-fields"
INT_OR_STRING = "x-kubernetes-int-or-string"
EMBEDDED = "x-kubernetes-embedded-resource"

# OpenAPI keywords that are JSON-schema value checks as they are
_COPIED = frozenset(
    {
        "type",
        "enum",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "uniqueItems",
        "required",
        "minProperties",
        "maxProperties",
    }
)


class SchemaProblem(Exception):
    """The schema itself is unusable: `path` is relative to openAPIV3Schema."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


Verdict = list[tuple[str, str]]  # (path, message) of each problem found; [] when none


class Verdicts(Protocol):
    """Known results of the checks jsonschema makes, by a key naming what was checked (content and
    everything the result depends on): a store that outlives the process (e.g. the offline tools' disk
    cache) spares later runs jsonschema's import and checks. Results must be returned as stored."""

    def get(self, key: str) -> Verdict | None: ...

    def put(self, key: str, verdict: Verdict) -> None: ...


#: names the checks' results in a Verdicts store: bump when what is checked or worded changes
VERDICTS_REVISION = "1"


class ParameterSchema:
    """Validates constraint parameters; immutable once built. `verdicts`: known results of its checks
    (see Verdicts); jsonschema is imported and run only for a check it does not know."""

    def __init__(
        self,
        openapi: Mapping[str, JsonValue] | None,
        *,
        legacy: bool = False,
        verdicts: Verdicts | None = None,
    ) -> None:
        if openapi is not None and not isinstance(openapi, Mapping):
            raise SchemaProblem("", "openAPIV3Schema must be a map")
        schema: JsonObject | None = copy.deepcopy(dict(openapi)) if openapi is not None else None
        if legacy:
            schema = schema if schema is not None else {}
            add_preserve_unknown_fields(schema)
        self.legacy = legacy
        self.structural = schema  # None: the constraint may have no parameters at all
        self._verdicts = verdicts
        self._validator: Draft4Validator | None = None
        self._converted: JsonObject | None = None
        self._key = ""  # names the converted schema among the verdicts (made when first needed)
        if schema is not None:
            self._converted = to_json_schema(schema, "")
            # a schema templates.draft4 passes is valid without jsonschema; jsonschema checks the others
            if not schema_passes(self._converted):
                problems = self._known("schema")
                if problems is None:
                    problems = _check_schema(self._converted)
                    self._learn("schema", problems)
                if problems:
                    raise SchemaProblem(str(problems[0][0]), str(problems[0][1]))

    def _verdict(self, check: str) -> str:
        if not self._key:
            self._key = _content_key(self._converted)
        return f"{self._key}:{check}"

    def _known(self, check: str) -> Verdict | None:
        if self._verdicts is None:
            return None
        return self._verdicts.get(self._verdict(check))

    def _learn(self, check: str, verdict: Verdict) -> None:
        if self._verdicts is not None:
            self._verdicts.put(self._verdict(check), verdict)

    def errors(self, value: Any, path: str = "spec.parameters") -> list[tuple[str, str]]:
        """Every problem of `value` as (field path, message), value checks first, then unknown fields."""
        if self.structural is None:
            return [(path, f'unknown field "{path}": the template defines no parameters')]
        problems: Verdict = []
        if not value_passes(self._converted, value):  # else valid without jsonschema (templates.draft4)
            check = f"value:{_content_key([path, value])}" if self._verdicts is not None else ""
            known = self._known(check)
            if known is None:
                known = self._value_problems(value, path)
                self._learn(check, known)
            problems = [(str(at), str(message)) for at, message in known]
        for unknown in unknown_fields(value, self.structural, path):
            problems.append((unknown, f'unknown field "{unknown}"'))
        return problems

    def _value_problems(self, value: Any, path: str) -> Verdict:
        if self._validator is None:
            from jsonschema import Draft4Validator

            self._validator = Draft4Validator(self._converted)
        return [
            _describe(err, path)
            for err in sorted(
                self._validator.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path]
            )
        ]


def _check_schema(converted: JsonObject) -> Verdict:
    """The converted schema's problem as Draft 4's meta-schema finds it (none: [])."""
    from jsonschema import Draft4Validator
    from jsonschema import exceptions as jsonschema_errors

    try:
        Draft4Validator.check_schema(converted)
    except jsonschema_errors.SchemaError as err:
        return [(_schema_path(err.absolute_path), err.message)]
    return []


def _content_key(value: Any) -> str:
    """A digest naming JSON data exactly: key order kept (jsonschema reports in document order),
    1 and 1.0 and true told apart, NaN and the infinities written (not null)."""
    text = json.dumps(value, allow_nan=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{VERDICTS_REVISION}\0{text}".encode()).hexdigest()


def add_preserve_unknown_fields(schema: JsonObject) -> None:
    """frameworks' AddPreserveUnknownFields: preserve unknown fields at every object/untyped level."""
    if schema.get("type", "") in ("", "object") and PRESERVE not in schema:
        schema[PRESERVE] = True
    for child in (schema.get("properties") or {}).values():
        if isinstance(child, dict):
            add_preserve_unknown_fields(child)
    if schema.get("type") == "array" and schema.get("items") is None:
        schema["items"] = {PRESERVE: True}
    items = schema.get("items")
    if isinstance(items, dict):
        add_preserve_unknown_fields(items)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        add_preserve_unknown_fields(extra)


def unknown_fields(value: Any, schema: Mapping[str, JsonValue] | None, path: str) -> list[str]:
    """The fields Kubernetes' structural pruning would drop (apiextensions pruning/algorithm.go)."""
    found: list[str] = []
    _prune(value, schema, path, found)
    return found


def _prune(value: Any, schema: Mapping[str, JsonValue] | None, path: str, found: list[str]) -> None:
    preserve = schema is not None and schema.get(PRESERVE) is True
    if isinstance(value, dict):
        properties = (schema.get("properties") or {}) if schema is not None else {}
        extra = schema.get("additionalProperties") if schema is not None else None
        embedded = schema is not None and schema.get(EMBEDDED) is True
        for key, child in value.items():
            child_path = key_path(path, key)
            if embedded and key in ("apiVersion", "kind", "metadata"):
                continue
            if isinstance(properties, Mapping) and key in properties:
                _prune(child, properties[key], child_path, found)
            elif isinstance(extra, Mapping):
                _prune(child, extra, child_path, found)
            elif extra is True or preserve:
                continue  # kept as it is, not looked into (skipPrune)
            else:
                found.append(child_path)
    elif isinstance(value, list):
        items = schema.get("items") if schema is not None else None
        for i, child in enumerate(value):
            _prune(child, items if isinstance(items, Mapping) else None, index_path(path, i), found)


def to_json_schema(schema: Mapping[str, JsonValue], path: str) -> JsonObject:
    """Translate an OpenAPI v3 (Kubernetes structural) schema into a JSON schema (draft 4)."""
    if not isinstance(schema, Mapping):
        raise SchemaProblem(path, "a schema must be a map")
    out: JsonObject = {}
    for key, value in schema.items():
        if key in _COPIED:
            out[key] = value
        elif key == "properties":
            if not isinstance(value, Mapping):
                raise SchemaProblem(key_path(path, key), "properties must be a map")
            out[key] = {
                name: to_json_schema(child, key_path(key_path(path, key), name))
                for name, child in value.items()
            }
        elif key == "items":
            if isinstance(value, list):
                raise SchemaProblem(key_path(path, key), "items must be one schema, not a list")
            out[key] = to_json_schema(value, key_path(path, key))
        elif key == "additionalProperties":
            out[key] = value if isinstance(value, bool) else to_json_schema(value, key_path(path, key))
        elif key in ("allOf", "anyOf", "oneOf"):
            if not isinstance(value, list):
                raise SchemaProblem(key_path(path, key), f"{key} must be a list of schemas")
            out[key] = [
                to_json_schema(child, index_path(key_path(path, key), i)) for i, child in enumerate(value)
            ]
        elif key == "not":
            out[key] = to_json_schema(value, key_path(path, key))
    if schema.get(INT_OR_STRING) is True:
        out.pop("type", None)
        either = [{"type": "integer"}, {"type": "string"}]
        if "anyOf" in out:
            out["allOf"] = [*out.get("allOf", []), {"anyOf": out.pop("anyOf")}]
        out["anyOf"] = either
    if schema.get("nullable") is True:
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        if "anyOf" in out:
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
    return out


def _schema_path(parts: Iterable[str | int]) -> str:
    path = ""
    for part in parts:
        path = index_path(path, part) if isinstance(part, int) else key_path(path, str(part))
    return path


_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _describe(err: jsonschema_errors.ValidationError, base: str) -> tuple[str, str]:
    path = base
    for part in err.absolute_path:
        path = index_path(path, part) if isinstance(part, int) else key_path(path, str(part))
    validator, expected, instance = err.validator, err.validator_value, err.instance
    if validator == "type":
        wanted = " or ".join(expected) if isinstance(expected, list) else expected
        return path, f"must be of type {wanted}, not {_json_type(instance)} ({_short(instance)})"
    if validator == "required":
        missing = [name for name in expected if isinstance(instance, dict) and name not in instance]
        if missing:
            return key_path(path, missing[0]), "required field is missing"
    if validator == "enum":
        return path, f"must be one of {', '.join(_short(v) for v in expected)}; got {_short(instance)}"
    return path, err.message


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else f'"{value}"'
    return text if len(text) <= 60 else text[:57] + "..."
