"""Small builders for OpenAPI v3 (structural) schemas as plain dicts, and the schemas every CRD shares.

Every builder returns a new dict, so callers may change what they get without affecting others.
"""

from __future__ import annotations

from typing import Any

from celkeeper.model import JsonObject

Schema = JsonObject

PRESERVE = "x-kubernetes-preserve-unknown-fields"


def _with_description(schema: Schema, description: str | None) -> Schema:
    if description:
        return {"description": description, **schema}
    return schema


def string(description: str | None = None, **more: Any) -> Schema:
    return _with_description({"type": "string", **more}, description)


def boolean(description: str | None = None) -> Schema:
    return _with_description({"type": "boolean"}, description)


def int64(description: str | None = None) -> Schema:
    return _with_description({"type": "integer", "format": "int64"}, description)


def array(items: Schema, description: str | None = None, **more: Any) -> Schema:
    return _with_description({"type": "array", "items": items, **more}, description)


def obj(
    properties: dict[str, Schema] | None = None,
    description: str | None = None,
    *,
    required: list[str] | None = None,
    preserve_unknown: bool = False,
    extra: Schema | None = None,
) -> Schema:
    """An object schema; `extra` adds other keywords (additionalProperties, default, x-kubernetes-*)."""
    schema: Schema = {"type": "object"}
    if properties:
        schema["properties"] = properties
    if required:
        schema["required"] = list(required)
    if preserve_unknown:
        schema[PRESERVE] = True
    schema.update(extra or {})
    return _with_description(schema, description)


def any_value(description: str | None = None) -> Schema:
    """Any JSON value, kept as is (no type, x-kubernetes-preserve-unknown-fields)."""
    return _with_description({PRESERVE: True}, description)


def root(properties: dict[str, Schema], description: str) -> Schema:
    """The root schema of a custom resource: apiVersion, kind, metadata and the given properties."""
    return obj(
        {
            "apiVersion": string("The versioned schema of this object (group/version)."),
            "kind": string("The kind of this object."),
            "metadata": obj(),
            **properties,
        },
        description,
    )


def printer_column(
    name: str, type_: str, json_path: str, description: str | None = None, priority: int = 0
) -> Schema:
    column: Schema = {"name": name, "type": type_, "jsonPath": json_path}
    if description:
        column["description"] = description
    if priority:
        column["priority"] = priority
    return column


AGE_COLUMN = printer_column("Age", "date", ".metadata.creationTimestamp")


def status_error() -> Schema:
    """One error a pod met while loading a template or constraint (Gatekeeper's {code, message, location})."""
    return obj(
        {
            "code": string("A short machine-readable reason, e.g. compile_error, invalid_parameters."),
            "message": string("What is wrong, one line."),
            "location": string(
                "Where: the field path, then line:column within that field's source when known, "
                "e.g. spec.targets[0].code[0].source.validations[1].expression:1:7."
            ),
        },
        "An error found while parsing or compiling.",
        required=["code", "message"],
    )


# --- the match block of a constraint (Gatekeeper's pkg/mutation/match Match, as its targets publish it) ---

# a namespace name or an object name, with an optional `*` glob at its front and/or end
GLOB_PATTERN = r"^\*?[-:a-z0-9]*\*?$"


def _glob_list(description: str) -> Schema:
    return array(
        string("A name with an optional `*` glob at its front and/or end.", pattern=GLOB_PATTERN),
        description,
    )


def _label_selector(description: str) -> Schema:
    requirement = obj(
        {
            "key": string("The label key the requirement applies to."),
            "operator": string("How the key relates to the values: In, NotIn, Exists or DoesNotExist."),
            "values": array(
                string(),
                "The values to compare with; non-empty for In and NotIn, empty for Exists and DoesNotExist.",
                **{"x-kubernetes-list-type": "atomic"},
            ),
        },
        "A label requirement: a key, an operator and values.",
        required=["key", "operator"],
    )
    return obj(
        {
            "matchExpressions": array(
                requirement,
                "Label requirements, all of which must hold.",
                **{"x-kubernetes-list-type": "atomic"},
            ),
            "matchLabels": obj(
                description="Labels that must all be present with these values.",
                extra={"additionalProperties": string()},
            ),
        },
        description,
        extra={"x-kubernetes-map-type": "atomic"},
    )


def match_schema() -> Schema:
    """The schema of a constraint's spec.match: which objects the constraint applies to."""
    return obj(
        {
            "kinds": array(
                obj(
                    {
                        "apiGroups": array(string(), "API groups; `*` is every group."),
                        "kinds": array(string(), "Kinds; `*` is every kind."),
                    },
                    "API groups and kinds; an object needs to match only one entry.",
                ),
                "The groups and kinds of objects to which the constraint applies.",
            ),
            "scope": string(
                "Which objects by scope: `*` (default), `Cluster` or `Namespaced`.",
                enum=["*", "Cluster", "Namespaced"],
            ),
            "namespaces": _glob_list(
                "If set, the constraint applies only to objects in these namespaces (globs allowed)."
            ),
            "excludedNamespaces": _glob_list(
                "The constraint does not apply to objects in these namespaces (globs allowed)."
            ),
            "labelSelector": _label_selector("Selects objects by their labels."),
            "namespaceSelector": _label_selector(
                "Selects objects by the labels of their namespace, or of the object itself when it is "
                "a Namespace."
            ),
            "name": string(
                "If set, the constraint applies only to objects of this name (a glob at the front and/or "
                "end allowed).",
                pattern=GLOB_PATTERN,
            ),
            "source": string(
                "Whether generated (expanded) objects, original objects or all are matched (default All).",
                enum=["All", "Generated", "Original"],
            ),
        },
        "Which objects the constraint applies to.",
    )


def scoped_enforcement_actions_schema() -> Schema:
    return array(
        obj(
            {
                "action": string("deny, dryrun or warn."),
                "enforcementPoints": array(
                    obj({"name": string("An enforcement point, e.g. validation.gatekeeper.sh, or `*`.")}),
                    "Where the action applies.",
                ),
            }
        ),
        "Actions per enforcement point; used when enforcementAction is `scoped`.",
    )
