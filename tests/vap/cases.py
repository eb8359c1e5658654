"""Templates, constraints and webhook scopes the VAP tests share: every example and library sample, and
made-up cases for the corners of Gatekeeper's transform (operations against a webhook's rules, names long
enough to be hashed, scoped enforcement actions, selectors)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from celkeeper.documents import Document, parse_documents
from tests.support.samples import LIBRARY

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def documents(path: Path) -> list[Document]:
    parsed = parse_documents(path.read_text(encoding="utf-8"), str(path))
    assert not parsed.errors, parsed.errors
    return parsed.documents


def example_templates() -> list[Document]:
    return [d for p in sorted(EXAMPLES.glob("*/template.yaml")) for d in documents(p)]


def example_constraints() -> list[Document]:
    return [d for p in sorted(EXAMPLES.glob("*/constraint*.yaml")) for d in documents(p)]


def example_expansions() -> list[Document]:
    """The examples' ExpansionTemplates (celkeeper serve on examples/ expands workloads with them)."""
    return [d for p in sorted(EXAMPLES.glob("*/expansion*.yaml")) for d in documents(p)]


def library_templates() -> list[Document]:
    return (
        [d for p in sorted(LIBRARY.glob("*/*/template.yaml")) for d in documents(p)]
        if LIBRARY.is_dir()
        else []
    )


def library_constraints() -> list[Document]:
    if not LIBRARY.is_dir():
        return []
    return [d for p in sorted(LIBRARY.glob("*/*/samples/*/constraint.yaml")) for d in documents(p)]


def as_gatekeeper(obj: dict[str, Any]) -> dict[str, Any]:
    """The same document in Gatekeeper's API groups (what Gatekeeper's transform reads)."""
    out = copy.deepcopy(obj)
    out["apiVersion"] = (
        str(out.get("apiVersion", ""))
        .replace("templates.celkeeper.io", "templates.gatekeeper.sh")
        .replace("constraints.celkeeper.io", "constraints.gatekeeper.sh")
    )
    return out


def template(
    name: str = "vapcase",
    source: dict[str, Any] | None = None,
    operations: list[str] | None = None,
    group: str = "templates.celkeeper.io",
    kind: str | None = None,
) -> dict[str, Any]:
    """A template with one validation (or `source`), optionally with target operations."""
    target: dict[str, Any] = {
        "target": "admission.k8s.gatekeeper.sh",
        "code": [
            {
                "engine": "K8sNativeValidation",
                "source": source
                or {
                    "validations": [
                        {"expression": "!has(object.metadata.labels)", "message": "no labels allowed"}
                    ]
                },
            }
        ],
    }
    if operations is not None:
        target["operations"] = operations
    return {
        "apiVersion": f"{group}/v1",
        "kind": "ConstraintTemplate",
        "metadata": {"name": name},
        "spec": {
            "crd": {"spec": {"names": {"kind": kind or name.capitalize()}}},
            "targets": [target],
        },
    }


FULL_SOURCE: dict[str, Any] = {
    "failurePolicy": "Ignore",
    "matchCondition": [
        {"name": "not-kube-system", "expression": 'object.metadata.namespace != "kube-system"'},
        {"name": "example.com/has-name", "expression": "has(object.metadata.name)"},
    ],
    "variables": [
        {"name": "labels", "expression": "has(object.metadata.labels) ? object.metadata.labels : {}"},
        {"name": "count", "expression": "size(variables.labels)"},
    ],
    "validations": [
        {"expression": "variables.count < 3", "message": "  too many labels  "},
        {
            "expression": "!('bad' in variables.labels)",
            "messageExpression": "'label bad on ' + string(object.metadata.name)",
        },
        {"expression": "true", "message": ""},
        {"expression": "variables.count >= 0", "message": "m", "messageExpression": "'me'"},
    ],
}


def scopes() -> dict[str, dict[str, Any]]:
    """Webhook scopes as Gatekeeper's cache holds them (webhookconfigcache.WebhookMatchingConfig JSON),
    with namespaces excluded (Config) and exempted (--exempt-namespace)."""
    celkeeper_webhook = {
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "admission.celkeeper.io/ignore", "operator": "DoesNotExist"},
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["celkeeper-system"]},
            ]
        },
        "rules": [
            {
                "apiGroups": ["*"],
                "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["*"],
            }
        ],
        "matchPolicy": "Exact",
    }
    everything = {
        "namespaceSelector": {},
        "objectSelector": {"matchLabels": {"team": "a"}},
        "rules": [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["*"],
                "resources": ["pods", "configmaps"],
                "scope": "Namespaced",
            },
            {
                "apiGroups": ["apps"],
                "apiVersions": ["*"],
                "operations": ["CREATE", "DELETE"],
                "resources": ["deployments"],
                "scope": "*",
            },
        ],
        "matchPolicy": "Equivalent",
        "matchConditions": [{"name": "not-a-lease", "expression": 'request.resource.resource != "leases"'}],
    }
    return {
        "none": {},
        "celkeeper-webhook": {"webhook": celkeeper_webhook},
        "everything": {"webhook": everything, "excluded": ["kube-*", "default"], "exempted": ["gk-system"]},
        "namespaces-only": {"excluded": ["kube-system"], "exempted": ["a*", "*b"]},
        "create-only": {
            "webhook": {"rules": [{"operations": ["CREATE"], "apiGroups": ["*"], "resources": ["*"]}]}
        },
    }


def made_up_templates() -> dict[str, dict[str, Any]]:
    return {
        "plain": template("plain"),
        "full": template("full", FULL_SOURCE),
        "ops-create": template("opscreate", operations=["CREATE"]),
        "ops-delete": template("opsdelete", operations=["DELETE"]),
        "ops-star": template("opsstar", operations=["*"]),
        "ops-update-connect": template("opsupdateconnect", operations=["CONNECT", "UPDATE"]),
        "gatekeeper-group": template("gkgroup", group="templates.gatekeeper.sh"),
        "generate-true": template("gentrue", {**FULL_SOURCE, "generateVAP": True}),
        "generate-false": template("genfalse", {**FULL_SOURCE, "generateVAP": False}),
    }


def constraint(
    kind: str = "Plain",
    name: str = "c",
    spec: dict[str, Any] | None = None,
    group: str = "constraints.celkeeper.io",
) -> dict[str, Any]:
    return {"apiVersion": f"{group}/v1beta1", "kind": kind, "metadata": {"name": name}, "spec": spec or {}}


def made_up_constraints() -> dict[str, dict[str, Any]]:
    long_name = "x" * 240
    scoped = {
        "enforcementAction": "scoped",
        "scopedEnforcementActions": [
            {"action": "warn", "enforcementPoints": [{"name": "validation.gatekeeper.sh"}]},
            {"action": "dryrun", "enforcementPoints": [{"name": "vap.k8s.io"}]},
            {"action": "deny", "enforcementPoints": [{"name": "audit.gatekeeper.sh"}, {"name": "*"}]},
        ],
    }
    return {
        "no-spec": constraint(),
        "deny": constraint(spec={"enforcementAction": "deny"}),
        "warn": constraint(spec={"enforcementAction": "warn"}),
        "dryrun": constraint(spec={"enforcementAction": "dryrun"}),
        "unknown-action": constraint(spec={"enforcementAction": "shout"}),
        "scoped": constraint(spec=scoped),
        "scoped-webhook-only": constraint(
            spec={
                "enforcementAction": "scoped",
                "scopedEnforcementActions": [
                    {"action": "deny", "enforcementPoints": [{"name": "validation.gatekeeper.sh"}]}
                ],
            }
        ),
        "scoped-vap-twice": constraint(
            spec={
                "enforcementAction": "scoped",
                "scopedEnforcementActions": [
                    {"action": "deny", "enforcementPoints": [{"name": "vap.k8s.io"}]},
                    {"action": "deny", "enforcementPoints": [{"name": "*"}]},
                ],
            }
        ),
        "selectors": constraint(
            spec={
                "match": {
                    "kinds": [{"apiGroups": [""], "kinds": ["Pod"]}],
                    "labelSelector": {
                        "matchLabels": {"app": "web"},
                        "matchExpressions": [
                            {"key": "tier", "operator": "In", "values": ["a", "b"]},
                            {"key": "gone", "operator": "DoesNotExist", "values": []},
                        ],
                    },
                    "namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "Exists"}]},
                    "excludedNamespaces": ["kube-*"],
                },
                "parameters": {"x": 1},
            }
        ),
        "empty-selectors": constraint(
            spec={"match": {"labelSelector": {}, "namespaceSelector": {"matchLabels": {}}}}
        ),
        "long-name": constraint(kind="AVeryLongKindNameIndeed", name=long_name),
        "long-name-dots": constraint(kind="K", name="a" * 230 + "." + "b" * 20),
        "gatekeeper-group": constraint(group="constraints.gatekeeper.sh"),
    }


# template source options (tests.support.policydocs.template_data) that the API server refuses as a policy,
# with the field celkeeper names and words of its reason
REFUSED_TEMPLATES: list[tuple[dict[str, Any], str, str]] = [
    (
        {"validations": [{"expression": "object.metadata.name +", "message": "m"}]},
        "validations[0].expression",
        "does not compile",
    ),
    (
        {"validations": [{"expression": "size(object.metadata.name)", "message": "m"}]},
        "validations[0].expression",
        "must evaluate to bool",
    ),
    (
        {"validations": [{"expression": "false", "messageExpression": "object.metadata.name"}]},
        "validations[0].messageExpression",
        "must evaluate to string",
    ),
    (
        {
            "variables": [{"name": "n", "expression": "object.metadata.name"}],
            "conditions": [{"name": "named", "expression": 'variables.n != ""'}],
        },
        "matchCondition[0].expression",  # the source's key is singular (Gatekeeper ignores the plural)
        "reads variables",
    ),
    (
        {"conditions": [{"name": "has name?", "expression": "true"}]},
        "matchCondition[0].name",
        "qualified",
    ),
    (
        {"validations": [{"expression": "false", "message": "line one\nline two"}]},
        "validations[0].message",
        "line breaks",
    ),
    ({"validations": [{"expression": "false", "message": "   "}]}, "validations[0].message", "blank"),
]
