"""Gatekeeper's transform: a template's ValidatingAdmissionPolicy and a constraint's binding, as Gatekeeper
makes them.

Mirrors github.com/open-policy-agent/gatekeeper/v3 v3.23.1 (Apache License 2.0):
pkg/drivers/k8scel/transform/make_vap_objects.go (TemplateToPolicyDefinitionWithWebhookConfig,
ConstraintToBinding, GetVAPBindingName), the v1beta1 -> v1 conversions of its two controllers, and the
decisions of pkg/controller/constraint (ShouldGenerateVAP, shouldGenerateVAPB). The objects are plain
dicts, admissionregistration.k8s.io/v1, with keys in the order Go writes them; the only difference is the
group of `paramKind`: a template in celkeeper's group points at celkeeper's constraints
(`constraints.celkeeper.io/v1beta1`), one in Gatekeeper's group at Gatekeeper's. tests/vap compares every
object with what Gatekeeper's own code makes (hack/vap).

Owner references are the controllers' business (celkeeper.vap.objects), not the transform's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from celkeeper.crds import names
from celkeeper.errors import CelkeeperError
from celkeeper.model import EnforcementPoint, JsonObject, JsonValue
from celkeeper.templates import TemplateSpec
from celkeeper.vap import snippets

API_VERSION = "admissionregistration.k8s.io/v1"
POLICY_KIND = "ValidatingAdmissionPolicy"
BINDING_KIND = "ValidatingAdmissionPolicyBinding"
NAME_PREFIX = "gatekeeper-"
MAX_NAME = 253  # validation.DNS1123SubdomainMaxLength
ALL_OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
# the enforcement actions a binding maps (util.Deny, util.Warn, util.Dryrun)
VALIDATION_ACTIONS = {"deny": "Deny", "warn": "Warn", "dryrun": "Audit"}
VAP_POINT = EnforcementPoint.VAP.value
ALL_POINTS = "*"
# Gatekeeper's constraint group for templates in its group; celkeeper's for celkeeper's templates
_CONSTRAINT_GROUPS = {
    names.TEMPLATES_GROUP: names.CONSTRAINTS_GROUP,
    names.GATEKEEPER_TEMPLATES_GROUP: names.GATEKEEPER_CONSTRAINTS_GROUP,
}
PARAMS_VERSION = "v1beta1"  # templatesv1beta1.SchemeGroupVersion.Version

# the error texts of transform/errors.go
OPERATION_MISMATCH = "operations mismatch between webhook and constraint template"
OPERATION_NO_MATCH = "no matching operations between webhook and constraint template"
BAD_ENFORCEMENT_ACTION = "invalid enforcement action"


class TransformError(CelkeeperError):
    """Gatekeeper's transform refuses this template or constraint (its error text)."""


@dataclass(frozen=True)
class WebhookScope:
    """The fields of the admission webhook that Gatekeeper's VAPs inherit when it synchronises their scope
    with its webhook (--sync-vap-enforcement-scope; webhookconfigcache.WebhookMatchingConfig)."""

    rules: tuple[Mapping[str, JsonValue], ...] = ()
    namespace_selector: Mapping[str, JsonValue] | None = None
    object_selector: Mapping[str, JsonValue] | None = None
    match_policy: str | None = None
    match_conditions: tuple[Mapping[str, JsonValue], ...] = ()

    @classmethod
    def from_webhook(cls, webhook: Mapping[str, JsonValue]) -> WebhookScope:
        """From one entry of a ValidatingWebhookConfiguration's `webhooks` list."""
        return cls(
            rules=tuple(webhook.get("rules") or ()),
            namespace_selector=webhook.get("namespaceSelector"),
            object_selector=webhook.get("objectSelector"),
            match_policy=webhook.get("matchPolicy"),
            match_conditions=tuple(webhook.get("matchConditions") or ()),
        )


@dataclass(frozen=True)
class Scope:
    """What Gatekeeper's VAPs take from the webhook's scope: the webhook (None: the default match, every
    resource on CREATE and UPDATE), namespaces excluded from the webhook and exempted by flag."""

    webhook: WebhookScope | None = None
    excluded_namespaces: tuple[str, ...] = ()
    exempted_namespaces: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Policy:
    """A generated ValidatingAdmissionPolicy, with Gatekeeper's operation-mismatch warning if any."""

    object: JsonObject
    warning: str = ""


# --- names -----------------------------------------------------------------------------------------


def policy_name(template_name: str) -> str:
    """`gatekeeper-<template>` (getVAPName; the binding's policyName uses the constraint's kind)."""
    return NAME_PREFIX + template_name


def binding_name(kind: str, constraint_name: str) -> str:
    """GetVAPBindingName: `gatekeeper-<lowerkind>-<constraint>`, cut to 253 characters with a hash."""
    name = f"{NAME_PREFIX}{kind.lower()}-{constraint_name}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return name[: MAX_NAME - len(digest) - 1].rstrip("-.") + "-" + digest


def params_api_version(template: Mapping[str, JsonValue]) -> str:
    """paramKind.apiVersion: the constraint group of the template's API group, version v1beta1."""
    group = str(template.get("apiVersion", "")).rpartition("/")[0]
    return f"{_CONSTRAINT_GROUPS.get(group, names.CONSTRAINTS_GROUP)}/{PARAMS_VERSION}"


# --- whether to generate ---------------------------------------------------------------------------


def source_generate_vap(spec: TemplateSpec) -> bool | None:
    """The K8sNativeValidation source's `generateVAP`, None when absent."""
    value = _source(spec).get("generateVAP")
    return value if isinstance(value, bool) else None


def written_generate_vap(template: Mapping[str, JsonValue]) -> bool | None:
    """`generateVAP` of a template's first K8sNativeValidation source as written (None when absent), read
    without parsing the template (GetSourceFromTemplate takes the first such code entry)."""
    spec = template.get("spec")
    targets = spec.get("targets") if isinstance(spec, Mapping) else None
    if not isinstance(targets, list) or len(targets) != 1 or not isinstance(targets[0], Mapping):
        return None
    for code in targets[0].get("code") or ():
        if isinstance(code, Mapping) and code.get("engine") == "K8sNativeValidation":
            source = code.get("source")
            value = source.get("generateVAP") if isinstance(source, Mapping) else None
            return value if isinstance(value, bool) else None
    return None


def should_generate_vap(spec: TemplateSpec, default: bool) -> bool:
    """constraint.ShouldGenerateVAP: the source's generateVAP, else the default
    (--default-create-vap-for-templates)."""
    value = source_generate_vap(spec)
    return default if value is None else value


def binding_actions(constraint: Mapping[str, JsonValue], default_binding: bool = True) -> list[str]:
    """The enforcement actions a constraint's binding carries (shouldGenerateVAPB), empty for none.

    Scoped: the action of every scopedEnforcementActions entry naming vap.k8s.io or `*` (in order,
    repeats kept: util.ScopedActionForEP). Otherwise the enforcement action (deny when unset, "unrecognized"
    when unknown), when --default-create-vap-binding-for-constraints is on.
    """
    spec = constraint.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    action = spec.get("enforcementAction")
    action = "deny" if action in (None, "") else action
    if action == "scoped":
        entries = spec.get("scopedEnforcementActions")
        if not isinstance(entries, list):
            raise TransformError(
                "error fetching scopedEnforcementActions: scopedEnforcementActions is required"
            )
        found = []
        for entry in entries:
            item = entry if isinstance(entry, Mapping) else {}
            points = item.get("enforcementPoints")
            points = points if isinstance(points, list) else []
            if any(isinstance(p, Mapping) and p.get("name") in (VAP_POINT, ALL_POINTS) for p in points):
                found.append(str(item.get("action") or ""))
        return found
    if not default_binding:
        return []
    return [action if action in ("deny", "dryrun", "warn") else "unrecognized"]


# --- the policy ------------------------------------------------------------------------------------


def _source(spec: TemplateSpec) -> Mapping[str, JsonValue]:
    """The K8sNativeValidation source as written (spec.source_path, e.g. spec.targets[0].code[1].source)."""
    data: Any = spec.document.data
    for part in spec.source_path.replace("[", ".").replace("]", "").split("."):
        if isinstance(data, list):
            data = data[int(part)]
        else:
            data = data.get(part) if isinstance(data, Mapping) else None
    return data if isinstance(data, Mapping) else {}


def _template_operations(spec: TemplateSpec) -> list[str] | None:
    """spec.targets[0].operations as written (None when absent: every operation)."""
    targets = (spec.document.data.get("spec") or {}).get("targets") or [{}]
    operations = targets[0].get("operations") if isinstance(targets[0], Mapping) else None
    return None if operations is None else [str(op) for op in operations]


def _expand(operations: Sequence[str]) -> list[str]:
    return list(ALL_OPERATIONS) if "*" in operations else list(operations)


def _resource_rules(
    rules: Sequence[Mapping[str, JsonValue]], template_ops: list[str] | None
) -> tuple[list[JsonObject], str]:
    """convertWebhookRulesToResourceRules: the webhook's rules, with the operations the template also
    has (in Gatekeeper's order); the mismatch warning when a rule lacks some of the template's."""
    out = []
    mismatches = 0
    wanted = set(_expand(template_ops)) if template_ops is not None else set()
    for rule in rules:
        rule_ops = [str(op) for op in rule.get("operations") or ()]
        if template_ops is None:
            operations = rule_ops
        else:
            both = set(_expand(rule_ops)) & wanted
            if not both:
                raise TransformError(OPERATION_NO_MATCH)
            if both != wanted:
                mismatches += 1
            operations = [op for op in ALL_OPERATIONS if op in both]
        named: JsonObject = {"operations": operations} if operations else {}
        for key in ("apiGroups", "apiVersions", "resources"):
            if rule.get(key):
                named[key] = list(rule[key])
        if rule.get("scope") is not None:
            named["scope"] = rule["scope"]
        out.append(named)
    return out, "\n".join([OPERATION_MISMATCH] * mismatches)


def label_selector(value: Any, where: str) -> JsonObject:
    """A metav1.LabelSelector as Go writes it back: matchLabels and matchExpressions, empty parts left out
    (runtime.DefaultUnstructuredConverter.FromUnstructured, then JSON)."""
    if not isinstance(value, Mapping):
        raise TransformError(f"{where}: a label selector must be a map")
    out: JsonObject = {}
    labels = value.get("matchLabels")
    if labels:
        if not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values()):
            raise TransformError(f"{where}.matchLabels: must map label keys to strings")
        out["matchLabels"] = {str(k): v for k, v in labels.items()}
    expressions = value.get("matchExpressions")
    if expressions:
        if not isinstance(expressions, list):
            raise TransformError(f"{where}.matchExpressions: must be a list")
        items = []
        for i, item in enumerate(expressions):
            if not isinstance(item, Mapping):
                raise TransformError(f"{where}.matchExpressions[{i}]: must be a map")
            requirement: JsonObject = {
                "key": str(item.get("key") or ""),
                "operator": str(item.get("operator") or ""),
            }
            values = item.get("values")
            if values:
                if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                    raise TransformError(f"{where}.matchExpressions[{i}].values: must be a list of strings")
                requirement["values"] = list(values)
            items.append(requirement)
        out["matchExpressions"] = items
    return out


def _match_constraints(spec: TemplateSpec, webhook: WebhookScope | None) -> tuple[JsonObject, str]:
    if webhook is None:  # buildDefaultMatchConstraints
        return {
            "resourceRules": [
                {
                    "operations": ["CREATE", "UPDATE"],
                    "apiGroups": ["*"],
                    "apiVersions": ["*"],
                    "resources": ["*"],
                    "scope": "*",
                }
            ]
        }, ""
    rules, warning = _resource_rules(webhook.rules, _template_operations(spec))
    match: JsonObject = {}
    if webhook.namespace_selector is not None:
        match["namespaceSelector"] = label_selector(webhook.namespace_selector, "namespaceSelector")
    if webhook.object_selector is not None:
        match["objectSelector"] = label_selector(webhook.object_selector, "objectSelector")
    if rules:
        match["resourceRules"] = rules
    if webhook.match_policy is not None:
        match["matchPolicy"] = webhook.match_policy
    return match, warning


def validating_admission_policy(spec: TemplateSpec, scope: Scope | None = None) -> Policy:
    """TemplateToPolicyDefinitionWithWebhookConfig, converted to v1 as the template controller writes it.

    Raises TransformError where Gatekeeper's transform fails (no operation in common with the webhook).
    """
    scope = scope or Scope()
    conditions: list[JsonObject] = [
        {"name": c.name, "expression": c.expression.source} for c in spec.match_conditions
    ]
    conditions += snippets.all_matchers()
    if scope.excluded_namespaces:
        conditions.append(snippets.global_excluded_namespaces(list(scope.excluded_namespaces)))
    if scope.exempted_namespaces:
        conditions.append(snippets.global_exempted_namespaces(list(scope.exempted_namespaces)))
    validations = []
    for v in spec.validations:
        item: JsonObject = {"expression": v.expression.source}
        if v.message:
            item["message"] = v.message
        if v.message_expression is not None and v.message_expression.source:
            item["messageExpression"] = v.message_expression.source
        validations.append(item)
    variables = snippets.all_variables()
    variables += [{"name": v.name, "expression": v.expression.source} for v in spec.variables]
    match, warning = _match_constraints(spec, scope.webhook)
    if scope.webhook is not None:
        conditions += [
            {"name": str(c.get("name")), "expression": str(c.get("expression"))}
            for c in scope.webhook.match_conditions
        ]
    policy_spec: JsonObject = {
        "paramKind": {"apiVersion": params_api_version(spec.document.data), "kind": spec.kind},
        "matchConstraints": match,
    }
    if validations:
        policy_spec["validations"] = validations
    policy_spec["failurePolicy"] = spec.failure_policy.value
    policy_spec["matchConditions"] = conditions
    policy_spec["variables"] = variables
    return Policy(
        {
            "kind": POLICY_KIND,  # Go writes TypeMeta's kind first
            "apiVersion": API_VERSION,
            "metadata": {"name": policy_name(spec.name)},
            "spec": policy_spec,
        },
        warning,
    )


# --- the binding -----------------------------------------------------------------------------------


def validation_actions(actions: Sequence[str]) -> list[str]:
    """deny -> Deny, warn -> Warn, dryrun -> Audit (ConstraintToBinding); TransformError otherwise."""
    if not actions:
        raise TransformError(f"{BAD_ENFORCEMENT_ACTION}: enforcement actions must be provided")
    out = []
    for action in actions:
        if action not in VALIDATION_ACTIONS:
            raise TransformError(
                f"{BAD_ENFORCEMENT_ACTION}: unrecognized enforcement action {action}, must be `warn`, "
                "`deny` or `dryrun`"
            )
        out.append(VALIDATION_ACTIONS[action])
    return out


def binding(constraint: Mapping[str, JsonValue], actions: Sequence[str]) -> JsonObject:
    """ConstraintToBinding, converted to v1 as the constraint controller writes it: paramRef to the
    constraint (Allow when it is missing), the constraint's labelSelector and namespaceSelector as the
    binding's object and namespace selectors, the validation actions of its enforcement actions."""
    kind = str(constraint.get("kind") or "")
    meta = constraint.get("metadata")
    name = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
    resources: JsonObject = {}
    spec = constraint.get("spec")
    match = spec.get("match") if isinstance(spec, Mapping) else None
    if isinstance(match, Mapping):
        for key, target in (("namespaceSelector", "namespaceSelector"), ("labelSelector", "objectSelector")):
            if key in match:
                resources[target] = label_selector(match[key], f"spec.match.{key}")
    return {
        "kind": BINDING_KIND,
        "apiVersion": API_VERSION,
        "metadata": {"name": binding_name(kind, name)},
        "spec": {
            "policyName": NAME_PREFIX + kind.lower(),
            "paramRef": {"name": name, "parameterNotFoundAction": "Allow"},
            "matchResources": resources,
            "validationActions": validation_actions(actions),
        },
    }
