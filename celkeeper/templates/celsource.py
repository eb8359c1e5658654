"""Reading the K8sNativeValidation source of a template: validations, variables, match conditions,
failurePolicy (gatekeeper pkg/drivers/k8scel/schema/schema.go).

What Gatekeeper refuses is an error here (a reserved variable or condition name, a failurePolicy other
than Fail or Ignore, a field of the wrong type). What Gatekeeper silently accepts is only a *warning*
(the template loads and decides as in Gatekeeper): unknown keys, including the plural
`matchConditions` (ignored: the key is `matchCondition`), no validations, a validation without an
expression (it fails every request as the empty expression does not compile), variable names that
are not CEL identifiers or are defined twice (the last definition wins), repeated condition names."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from celkeeper.documents import Document, index_path, key_path
from celkeeper.errors import TemplateError, TemplateWarning
from celkeeper.model import FailurePolicy, JsonObject

RESERVED_PREFIX = "gatekeeper_internal_"
PARAMS = "params"
ANY_OBJECT = "anyObject"
_SOURCE_KEYS = frozenset(
    {
        "validations",
        "variables",
        "matchCondition",
        "failurePolicy",
        "generateVAP",
        "resourceOperations",
    }
)
_VALIDATION_KEYS = frozenset({"expression", "message", "messageExpression"})
_NAMED_KEYS = frozenset({"name", "expression"})
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# CEL's reserved words cannot name a variable
_CEL_RESERVED = frozenset(
    {
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    }
)


@dataclass(frozen=True)
class Expression:
    """One CEL source and the field path it was read from."""

    source: str
    path: str


@dataclass(frozen=True)
class ValidationSpec:
    expression: Expression
    message: str | None
    message_expression: Expression | None


@dataclass(frozen=True)
class NamedExpression:
    """A variable or a match condition."""

    name: str
    expression: Expression


@dataclass(frozen=True)
class SourceSpec:
    """What a K8sNativeValidation source says."""

    validations: tuple[ValidationSpec, ...]
    variables: tuple[NamedExpression, ...]
    match_conditions: tuple[NamedExpression, ...]
    failure_policy: FailurePolicy | None  # None when invalid


class Problems:
    """Collects a template's errors, each located and naming the template."""

    def __init__(self, document: Document, name: str) -> None:
        self.document = document
        self.name = name
        self.errors: list[TemplateError] = []
        self.warnings: list[TemplateWarning] = []

    def add(self, message: str, path: str, *, key: bool = False) -> None:
        prefix = f"template {self.name}: " if self.name else ""
        self.errors.append(self.document.error(TemplateError, prefix + message, path, key=key))

    def warn(self, message: str, path: str, *, key: bool = False) -> None:
        prefix = f"template {self.name}: " if self.name else ""
        self.warnings.append(self.document.error(TemplateWarning, prefix + message, path, key=key))


def read_source(source: JsonObject, source_path: str, problems: Problems) -> SourceSpec:
    """Read and check a K8sNativeValidation source (a map); problems are added to `problems`."""
    for key in source:
        if key == "matchConditions":
            problems.warn(
                "matchConditions is not a key of the K8sNativeValidation source: Gatekeeper ignores "
                "it (and so does celkeeper); match conditions go under matchCondition (singular)",
                key_path(source_path, key),
                key=True,
            )
        elif key not in _SOURCE_KEYS:
            problems.warn(
                f"unknown field {key!r} in the K8sNativeValidation source, ignored (known: "
                f"{', '.join(sorted(_SOURCE_KEYS))})",
                key_path(source_path, key),
                key=True,
            )
    validations = _validations(source, source_path, problems)
    variables = _named(source, source_path, "variables", problems)
    conditions = _named(source, source_path, "matchCondition", problems)
    _check_variables(variables, problems)
    _check_conditions(conditions, problems)
    failure_policy = _failure_policy(source, source_path, problems)
    if "generateVAP" in source and not isinstance(source["generateVAP"], bool):
        problems.add("generateVAP must be true or false", key_path(source_path, "generateVAP"))
    if "resourceOperations" in source and not string_list(source["resourceOperations"]):
        problems.add(
            "resourceOperations must be a list of operations", key_path(source_path, "resourceOperations")
        )
    return SourceSpec(tuple(validations), tuple(variables), tuple(conditions), failure_policy)


def _validations(source: JsonObject, path: str, problems: Problems) -> list[ValidationSpec]:
    where = key_path(path, "validations")
    items = source.get("validations")
    if items is None or items == []:
        problems.warn("no validations: the template checks nothing", where, key=items is not None)
        return []
    if not isinstance(items, list):
        problems.add("validations must be a list", where)
        return []
    result = []
    for i, item in enumerate(items):
        item_path = index_path(where, i)
        if not isinstance(item, dict):
            problems.add("a validation must be a map with an expression", item_path)
            continue
        for key in item:
            if key not in _VALIDATION_KEYS:
                problems.warn(
                    f"unknown field {key!r} in a validation, ignored (known: expression, message, "
                    "messageExpression)",
                    key_path(item_path, key),
                    key=True,
                )
        expression = _expression(item, item_path, "expression", problems, required=True)
        message = item.get("message")
        if message is not None and not isinstance(message, str):
            problems.add("message must be a string", key_path(item_path, "message"))
            message = None
        message_expression = _expression(item, item_path, "messageExpression", problems, required=False)
        if expression is not None:
            result.append(ValidationSpec(expression, message, message_expression))
    return result


def _expression(
    item: JsonObject, path: str, key: str, problems: Problems, *, required: bool
) -> Expression | None:
    value = item.get(key)
    where = key_path(path, key)
    if value is None or value == "":
        if required:  # Gatekeeper compiles the empty expression: it fails every request
            problems.warn(f"{key} is missing: an empty expression does not compile", where)
            return Expression("", where)
        return None
    if not isinstance(value, str):
        problems.add(f"{key} must be a string (a CEL expression)", where)
        return None
    return Expression(value, where)


def _named(source: JsonObject, path: str, key: str, problems: Problems) -> list[NamedExpression]:
    items = source.get(key)
    where = key_path(path, key)
    if items is None:
        return []
    if not isinstance(items, list):
        problems.add(f"{key} must be a list of {{name, expression}}", where)
        return []
    result = []
    for i, item in enumerate(items):
        item_path = index_path(where, i)
        if not isinstance(item, dict):
            problems.add("must be a map with a name and an expression", item_path)
            continue
        for field in item:
            if field not in _NAMED_KEYS:
                problems.warn(
                    f"unknown field {field!r}, ignored (known: name, expression)",
                    key_path(item_path, field),
                    key=True,
                )
        name = item.get("name", "")
        if not isinstance(name, str):
            problems.add("name must be a string", key_path(item_path, "name"))
            continue
        if not name:
            problems.warn("name is missing", key_path(item_path, "name"))
        expression = _expression(item, item_path, "expression", problems, required=True)
        if expression is not None:
            result.append(NamedExpression(name, expression))
    return result


def _check_variables(variables: list[NamedExpression], problems: Problems) -> None:
    seen: set[str] = set()
    for var in variables:
        where = var.expression.path.rpartition(".")[0] + ".name"
        if var.name.startswith(RESERVED_PREFIX):
            problems.add(
                f"{var.name} is not a valid variable; cannot have {RESERVED_PREFIX!r} as a prefix", where
            )
        elif var.name in (PARAMS, ANY_OBJECT):
            problems.add(f"{var.name} is an invalid variable name, {var.name!r} is a reserved keyword", where)
        elif not is_cel_identifier(var.name):
            problems.warn(
                f"variable name {var.name!r} is not a CEL identifier (letters, digits and _): no "
                "expression can use it",
                where,
            )
        elif var.name in seen:
            problems.warn(f"variable {var.name!r} is defined twice: the last definition is used", where)
        seen.add(var.name)


def _check_conditions(conditions: list[NamedExpression], problems: Problems) -> None:
    seen: set[str] = set()
    for condition in conditions:
        where = condition.expression.path.rpartition(".")[0] + ".name"
        if condition.name.startswith(RESERVED_PREFIX):
            problems.add(
                f"{condition.name} is not a valid match condition; cannot have "
                f"{RESERVED_PREFIX!r} as a prefix",
                where,
            )
        elif condition.name in seen:
            problems.warn(f"match condition {condition.name!r} is defined twice", where)
        seen.add(condition.name)


def _failure_policy(source: JsonObject, path: str, problems: Problems) -> FailurePolicy | None:
    value = source.get("failurePolicy")
    if value is None:
        return FailurePolicy.FAIL
    if value not in (FailurePolicy.FAIL.value, FailurePolicy.IGNORE.value):
        problems.add(
            f"unrecognized failure policy: {value} (use Fail or Ignore)", key_path(path, "failurePolicy")
        )
        return None
    return FailurePolicy(value)


def is_cel_identifier(name: str) -> bool:
    """Whether `variables.<name>` can name it (a CEL identifier that is not a reserved word)."""
    return bool(_IDENTIFIER.match(name)) and name not in _CEL_RESERVED


def string_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)
