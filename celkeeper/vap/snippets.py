"""Gatekeeper's CEL for generated ValidatingAdmissionPolicies, verbatim.

Copied from github.com/open-policy-agent/gatekeeper/v3 v3.23.1, pkg/drivers/k8scel/transform/cel_snippets.go
(Apache License 2.0): the match conditions that apply a constraint's `spec.match` (read from `params`, the
constraint object bound to the policy) and the variables `anyObject` and `params`. The Go raw strings are
indented with tabs; here they are written with four spaces per tab and converted back by `_go_raw`, so the
text is byte for byte Gatekeeper's (tests/vap/test_transform_gatekeeper.py compares the generated objects with
Gatekeeper's own transform).
"""

from __future__ import annotations

import re

_INDENT = re.compile(r"^((?:    )*)", re.MULTILINE)


def _go_raw(text: str) -> str:
    """The Go raw string this text stands for: leading groups of 4 spaces become tabs; like every snippet
    of cel_snippets.go, it starts with a newline and ends with a newline and one tab."""
    body = text.strip("\n")
    return "\n" + _INDENT.sub(lambda m: "\t" * (len(m.group(1)) // 4), body) + "\n\t"


MATCH_KINDS = _go_raw(
    """
    !has(params.spec) ? true: (
        !has(params.spec.match) ? true: (
            !has(params.spec.match.kinds) ? true : (
                params.spec.match.kinds.exists(groupskinds,
                    (!has(groupskinds.kinds) || size(groupskinds.kinds) == 0 || "*" in groupskinds.kinds || request.kind.kind in groupskinds.kinds) &&
                    (!has(groupskinds.apiGroups) || size(groupskinds.apiGroups) == 0 || "*" in groupskinds.apiGroups || request.kind.group in groupskinds.apiGroups)
                )
            )
        )
    )
"""
)

MATCH_NAME_GLOB = _go_raw(
    """
    !has(params.spec) ? true: (
        !has(params.spec.match) ? true: (
            !has(params.spec.match.name) ? true : (
                [object, oldObject].exists(obj,
                    obj != null && (
                        (has(obj.metadata.generateName) && obj.metadata.generateName != "" && params.spec.match.name.endsWith("*") && string(obj.metadata.generateName).matches("^" + string(params.spec.match.name).replace("*", ".*") + "$")) ||
                        (has(obj.metadata.name) && string(obj.metadata.name).matches("^" + string(params.spec.match.name).replace("*", ".*") + "$"))
                    )
                )
            )
        )
    )
"""
)

MATCH_NAMESPACES_GLOB = _go_raw(
    """
    !has(params.spec) ? true: (
        !has(params.spec.match) ? true: (
            !has(params.spec.match.namespaces) ? true : (
                [object, oldObject].exists(obj,
                    obj != null && (
                        // cluster-scoped objects always match
                        !has(obj.metadata.namespace) || obj.metadata.namespace == "" ? true : (
                            params.spec.match.namespaces.exists(nsMatcher,
                                (string(obj.metadata.namespace).matches("^" + string(nsMatcher).replace("*", ".*") + "$"))
                            )
                        )
                    )
                )
            )
        )
    )
"""
)

MATCH_EXCLUDED_NAMESPACES_GLOB = _go_raw(
    """
    !has(params.spec) ? true: (
        !has(params.spec.match) ? true: (
            !has(params.spec.match.excludedNamespaces) ? true : (
                [object, oldObject].exists(obj,
                    obj != null && (
                        // cluster-scoped objects always match
                        !has(obj.metadata.namespace) || obj.metadata.namespace == "" ? true : (
                            !params.spec.match.excludedNamespaces.exists(nsMatcher,
                                (string(obj.metadata.namespace).matches("^" + string(nsMatcher).replace("*", ".*") + "$"))
                            )
                        )
                    )
                )
            )
        )
    )
"""
)

MATCH_GLOBAL_EXCLUDED_NAMESPACES_GLOB = _go_raw(
    """
    [object, oldObject].exists(obj,
        obj != null && (
            // For namespace objects, check if the namespace name itself is in the exclusion list
            (has(obj.kind) && obj.kind == "Namespace" && has(obj.metadata.name)) ? (
                ![%s].exists(nsMatcher,
                    (string(obj.metadata.name).matches("^" + string(nsMatcher).replace("*", ".*") + "$"))
                )
            ) : (
                // cluster-scoped objects (non-namespace) always match
                !has(obj.metadata.namespace) || obj.metadata.namespace == "" ? true : (
                    ![%s].exists(nsMatcher,
                        (string(obj.metadata.namespace).matches("^" + string(nsMatcher).replace("*", ".*") + "$"))
                    )
                )
            )
        )
    )
"""
)

MATCH_GLOBAL_EXEMPTED_NAMESPACES_GLOB = _go_raw(
    """
    [object, oldObject].exists(obj,
        obj != null && (
            // For namespace objects, check if the namespace name itself is in the exemption list
            (has(obj.kind) && obj.kind == "Namespace" && has(obj.metadata.name)) ? (
                ![%s].exists(nsMatcher,
                    (string(obj.metadata.name).matches("^" + string(nsMatcher).replace("*", ".*") + "$")) &&
                    has(obj.metadata.labels) &&
                    ("admission.gatekeeper.sh/ignore" in obj.metadata.labels)
                )
            ) : (
                // cluster-scoped objects (non-namespace) always match
                !has(obj.metadata.namespace) || obj.metadata.namespace == "" ? true : (
                    ![%s].exists(nsMatcher,
                        (string(obj.metadata.namespace).matches("^" + string(nsMatcher).replace("*", ".*") + "$"))
                    )
                )
            )
        )
    )
"""
)

# names of the generated match conditions and variables (cel_snippets.go, schema.go)
MATCH_EXCLUDED_NAMESPACES = "gatekeeper_internal_match_excluded_namespaces"
MATCH_NAMESPACES = "gatekeeper_internal_match_namespaces"
MATCH_NAME = "gatekeeper_internal_match_name"
MATCH_KINDS_NAME = "gatekeeper_internal_match_kinds"
MATCH_GLOBAL_EXCLUDED_NAMESPACES = "gatekeeper_internal_match_global_excluded_namespaces"
MATCH_GLOBAL_EXEMPTED_NAMESPACES = "gatekeeper_internal_match_global_exempted_namespaces"

ANY_OBJECT_VARIABLE = "anyObject"
ANY_OBJECT_EXPRESSION = (
    'has(request.operation) && request.operation == "DELETE" && object == null ? oldObject : object'
)
PARAMS_VARIABLE = "params"
PARAMS_EXPRESSION = "!has(params.spec) ? null : !has(params.spec.parameters) ? null: params.spec.parameters"


def all_matchers() -> list[dict[str, str]]:
    """AllMatchersV1Beta1: the four match conditions for a constraint's spec.match, in Gatekeeper's order."""
    return [
        {"name": MATCH_EXCLUDED_NAMESPACES, "expression": MATCH_EXCLUDED_NAMESPACES_GLOB},
        {"name": MATCH_NAMESPACES, "expression": MATCH_NAMESPACES_GLOB},
        {"name": MATCH_NAME, "expression": MATCH_NAME_GLOB},
        {"name": MATCH_KINDS_NAME, "expression": MATCH_KINDS},
    ]


def all_variables() -> list[dict[str, str]]:
    """AllVariablesV1Beta1: `anyObject`, then `params` (the constraint's spec.parameters or null)."""
    return [
        {"name": ANY_OBJECT_VARIABLE, "expression": ANY_OBJECT_EXPRESSION},
        {"name": PARAMS_VARIABLE, "expression": PARAMS_EXPRESSION},
    ]


def _quoted(namespaces: list[str]) -> str:
    """quoteNamespaces joined with commas: each name in double quotes, as Go's `"%s"` writes it."""
    return ",".join(f'"{ns}"' for ns in namespaces)


def global_excluded_namespaces(namespaces: list[str]) -> dict[str, str]:
    """MatchGlobalExcludedNamespacesGlobV1Beta1: namespaces excluded from the webhook (Gatekeeper's Config)."""
    quoted = _quoted(namespaces)
    return {
        "name": MATCH_GLOBAL_EXCLUDED_NAMESPACES,
        "expression": MATCH_GLOBAL_EXCLUDED_NAMESPACES_GLOB.replace("%s", quoted),
    }


def global_exempted_namespaces(namespaces: list[str]) -> dict[str, str]:
    """MatchGlobalExemptedNamespacesGlobV1Beta1: namespaces exempted by flag (--exempt-namespace)."""
    quoted = _quoted(namespaces)
    return {
        "name": MATCH_GLOBAL_EXEMPTED_NAMESPACES,
        "expression": MATCH_GLOBAL_EXEMPTED_NAMESPACES_GLOB.replace("%s", quoted),
    }
