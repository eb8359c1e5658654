"""templates.draft4 against jsonschema itself: it passes a schema or a value only where jsonschema's Draft 4
finds nothing wrong, on generated schemas and values and on every template and constraint of the
examples and the Gatekeeper library samples, and it passes all of those (a `verify` of them does not
import jsonschema: tests/cli/test_verify_cache.py)."""

from __future__ import annotations

import itertools
import math
import random
from pathlib import Path
from typing import Any

from jsonschema import Draft4Validator, SchemaError

from celkeeper.documents import Document
from celkeeper.templates import ParameterSchema
from celkeeper.templates.draft4 import schema_passes, value_passes
from celkeeper.templates.parameters import to_json_schema
from tests.support import samples

ROOT = Path(__file__).resolve().parents[2]


def jsonschema_schema_ok(schema: Any) -> bool:
    try:
        Draft4Validator.check_schema(schema)
    except SchemaError:
        return False
    return True


def jsonschema_value_ok(schema: Any, value: Any) -> bool:
    return not list(Draft4Validator(schema).iter_errors(value))


# -- generated schemas and values ------------------------------------------------------------------

#: values of each keyword Draft 4's meta-schema accepts, and values it refuses
KEYWORD_VALUES: dict[str, tuple[list[Any], list[Any]]] = {
    "type": (
        ["string", "integer", "number", "boolean", "object", "array", "null", ["string", "null"]],
        ["strin", 1, ["integer", "integer"], [], ["object", "nul"], [None]],
    ),
    "enum": ([["a", "b"], ["a", None], [None], ["ab"]], [["a", "a"], [], "a", [1, 2], ["a", 1], [True]]),
    "minimum": ([0, 1, -1.5, 2.5, math.nan], [True, "1", None]),
    "maximum": ([0, 3, 2.5], [False, "3"]),
    "minLength": ([0, 1, 2], [-1, 1.0, True, "1"]),
    "maxLength": ([0, 2], [-1, 2.0]),
    "minItems": ([0, 1, 2], [-1, 1.5]),
    "maxItems": ([0, 1, 3], [False]),
    "required": ([["a"], ["a", "b"], ["c"]], [[], ["a", "a"], [1], "a"]),
    "additionalProperties": ([True, False, {"type": "string"}, {"type": "integer", "minimum": 2}], ["no"]),
}
#: keywords it leaves to jsonschema (with values the meta-schema accepts, and one it refuses)
OTHER_KEYWORDS: dict[str, tuple[list[Any], list[Any]]] = {
    "pattern": (["^a"], ["("]),
    "multipleOf": ([2], [0]),
    "uniqueItems": ([True], ["yes"]),
    "anyOf": ([[{"type": "string"}, {"type": "integer"}]], [[]]),
    "description": (["text"], [1]),
}
#: values of every kind, for the schemas above
VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    2,
    3,
    1.0,
    2.5,
    -1.5,
    math.nan,
    math.inf,
    "",
    "a",
    "b",
    "ab",
    "abc",
    [],
    ["a"],
    ["a", "b"],
    [1],
    [1, "a", None],
    ["a", "a"],
    {},
    {"a": "x"},
    {"a": 1},
    {"b": "y"},
    {"a": "x", "b": "y"},
    {"a": None},
    {"c": [1]},
    {"a": {"a": "x"}},
    [{"a": "x"}, {"b": 2}],
]


def _schemas(seed: int, count: int) -> list[dict[str, Any]]:
    """Schemas of one to three keywords (mostly ones it knows, mostly with right values), with nested
    properties and items, from a fixed seed."""
    chooser = random.Random(seed)
    known, other = sorted(KEYWORD_VALUES), sorted(OTHER_KEYWORDS)

    def make(depth: int) -> dict[str, Any]:
        schema: dict[str, Any] = {}
        for _ in range(chooser.randint(1, 3)):
            keyword = chooser.choice(known) if chooser.random() < 0.9 else chooser.choice(other)
            right, wrong = (KEYWORD_VALUES | OTHER_KEYWORDS)[keyword]
            schema[keyword] = chooser.choice(right if chooser.random() < 0.9 else wrong)
        if depth and chooser.random() < 0.5:
            schema["properties"] = {name: make(depth - 1) for name in chooser.sample(["a", "b", "c"], 2)}
        if depth and chooser.random() < 0.3:
            schema["items"] = make(depth - 1) if chooser.random() < 0.9 else [make(0)]
        return schema

    return [make(2) for _ in range(count)]


GENERATED = _schemas(seed=29, count=1500)


def test_a_schema_it_passes_jsonschema_passes() -> None:
    passed = 0
    for schema in GENERATED:
        if schema_passes(schema):
            passed += 1
            assert jsonschema_schema_ok(schema), schema
    assert passed >= 100  # the generated schemas hold many it knows


def test_on_a_schema_it_passes_its_verdicts_are_jsonschemas() -> None:
    compared = valid = 0
    for schema, value in itertools.product(GENERATED, VALUES):
        if not schema_passes(schema):
            continue
        compared += 1
        expected = jsonschema_value_ok(schema, value)
        assert value_passes(schema, value) is expected, (schema, value)
        valid += expected
    assert compared >= 3000
    assert valid >= 500  # values it passes, not only refusals


def test_on_any_schema_jsonschema_accepts_a_value_it_passes_jsonschema_passes() -> None:
    """templates.parameters asks it about values of schemas jsonschema accepted (those it passed
    itself, and the others): it passes a value only where jsonschema does."""
    passed = 0
    for schema in GENERATED:
        if schema_passes(schema) or not jsonschema_schema_ok(schema):
            continue
        for value in VALUES:
            if value_passes(schema, value):
                passed += 1
                assert jsonschema_value_ok(schema, value), (schema, value)
    assert passed >= 100


def test_keywords_it_does_not_know_go_to_jsonschema() -> None:
    for keyword, (right, _) in OTHER_KEYWORDS.items():
        schema = {"type": "string", keyword: right[0]}
        assert jsonschema_schema_ok(schema)
        assert not schema_passes(schema)
        assert not value_passes(schema, "a")
    exclusive = {"type": "number", "minimum": 0, "exclusiveMinimum": True}
    assert jsonschema_schema_ok(exclusive)
    assert not schema_passes(exclusive)
    assert not value_passes(exclusive, 1)
    assert not schema_passes({"type": "array", "items": [{"type": "string"}]})  # tuple items
    assert not schema_passes({"enum": [1, 2]})  # only strings and null are compared here


def test_the_translation_of_openapi_keywords() -> None:
    nullable = to_json_schema({"type": "string", "nullable": True, "enum": ["a"]}, "")
    assert schema_passes(nullable)
    assert [value_passes(nullable, v) for v in ("a", None, "b", 1)] == [True, True, False, False]
    int_or_string = to_json_schema({"x-kubernetes-int-or-string": True}, "")
    assert not schema_passes(int_or_string)  # anyOf: jsonschema checks it


# -- the project's and the samples' templates --------------------------------------------------------


def _policy_documents() -> list[Document]:
    folders = [ROOT / "examples"] + ([samples.LIBRARY] if samples.present() else [])
    documents = []
    for folder in folders:
        for path in sorted(folder.rglob("*.yaml")):
            text = path.read_text(encoding="utf-8")
            if "kind: ConstraintTemplate" in text or "constraints." in text:
                documents += samples.read_documents(path)
    return documents


def test_every_template_and_constraint_of_the_examples_and_samples_passes() -> None:
    documents = _policy_documents()
    schemas = {}
    for document in documents:
        if document.kind != "ConstraintTemplate":
            continue
        crd = document.data["spec"]["crd"]["spec"]
        openapi = crd.get("validation", {}).get("openAPIV3Schema")
        legacy = crd.get("validation", {}).get("legacySchema", not document.api_version.endswith("/v1"))
        structural = ParameterSchema(openapi, legacy=legacy).structural
        if structural is None:
            continue
        converted = to_json_schema(structural, "")
        assert jsonschema_schema_ok(converted)
        assert schema_passes(converted), document.file
        schemas[crd["names"]["kind"]] = converted
    assert len(schemas) >= 19
    checked = 0
    for document in documents:
        spec = document.data.get("spec")
        if document.kind in schemas and isinstance(spec, dict) and "parameters" in spec:
            assert jsonschema_value_ok(schemas[document.kind], spec["parameters"]), document.file
            assert value_passes(schemas[document.kind], spec["parameters"]), document.file
            checked += 1
    assert checked >= 19
