"""What to generate for a policy set: each template's ValidatingAdmissionPolicy and each constraint's binding,
or why not, with where their verdicts will differ from celkeeper's webhook.

    plan = plan_vap(policies, VapOptions(default_generate_vap=True))
    plan.objects()            # the policies, then the bindings (admissionregistration.k8s.io/v1)
    plan.templates[i].errors  # located errors: why the template's policy is not made
    plan.templates[i].warnings, plan.constraints[j].errors, .warnings

Used by `celkeeper vap` (files or the cluster) and by the informer's in-cluster sync
(celkeeper.incluster.vapwriter).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field

from celkeeper.documents import Document
from celkeeper.errors import CelkeeperError, ConstraintError, TemplateError
from celkeeper.model import JsonObject, JsonValue
from celkeeper.policy import PolicySet
from celkeeper.templates import CompiledTemplate, parse_template
from celkeeper.vap.check import (
    Finding,
    binding_errors,
    constraint_warnings,
    expansion_warnings,
    template_errors,
    template_warnings,
)
from celkeeper.vap.transform import (
    ALL_POINTS,
    VAP_POINT,
    Scope,
    TransformError,
    binding,
    binding_actions,
    validating_admission_policy,
    validation_actions,
    written_generate_vap,
)


@dataclass(frozen=True)
class VapOptions:
    """--default-create-vap-for-templates (celkeeper: off, VAPs are opt-in per template with generateVAP;
    Gatekeeper: on), --default-create-vap-binding-for-constraints (on, as in Gatekeeper), and the scope
    the policies inherit from the webhook."""

    default_generate_vap: bool = False
    default_generate_binding: bool = True
    scope: Scope = field(default_factory=Scope)


@dataclass(frozen=True)
class TemplateVap:
    name: str
    kind: str
    document: Document
    generate: bool  # generateVAP, else the default, says to make one
    policy: JsonObject | None  # made: it generates and nothing stands in the way
    errors: tuple[CelkeeperError, ...] = ()  # why it is not made (when it should be)
    warnings: tuple[CelkeeperError, ...] = ()  # where the policy decides otherwise than the webhook


@dataclass(frozen=True)
class ConstraintVap:
    kind: str
    name: str
    document: Document
    actions: tuple[str, ...]  # the binding's validation actions (Deny, Warn, Audit); empty: no binding
    binding: JsonObject | None
    errors: tuple[CelkeeperError, ...] = ()
    warnings: tuple[CelkeeperError, ...] = ()


@dataclass(frozen=True)
class VapPlan:
    templates: tuple[TemplateVap, ...]
    constraints: tuple[ConstraintVap, ...]

    def objects(self) -> list[JsonObject]:
        policies = [t.policy for t in self.templates if t.policy is not None]
        bindings = [c.binding for c in self.constraints if c.binding is not None]
        return policies + bindings

    @property
    def errors(self) -> tuple[CelkeeperError, ...]:
        return tuple(e for t in self.templates for e in t.errors) + tuple(
            e for c in self.constraints for e in c.errors
        )

    @property
    def warnings(self) -> tuple[CelkeeperError, ...]:
        return tuple(w for t in self.templates for w in t.warnings) + tuple(
            w for c in self.constraints for w in c.warnings
        )


def _located(
    document: Document, cls: type[CelkeeperError], label: str, findings: list[Finding]
) -> tuple[CelkeeperError, ...]:
    if not findings:
        return ()
    return tuple(document.error(cls, f"{label}: {message}", path) for path, message in findings)


def plan_template(template: CompiledTemplate, options: VapOptions) -> TemplateVap:
    """The policy of one compiled template, or why it cannot be one. A template that does not ask for one
    costs a look at its generateVAP only."""
    generate = written_generate_vap(template.document.data)
    if generate is None:
        generate = options.default_generate_vap
    if not generate:
        return TemplateVap(template.name, template.kind, template.document, False, None)
    spec, problems = parse_template(template.document)
    label = f"template {template.name}"
    if spec is None:  # a compiled template has parsed before: only a changed document gets here
        return TemplateVap(template.name, template.kind, template.document, True, None, tuple(problems))
    findings: list[Finding] = []
    policy = None
    warning = ""
    try:
        made = validating_admission_policy(spec, options.scope)
        policy, warning = made.object, made.warning
    except TransformError as err:
        findings.append((spec.source_path, f"Gatekeeper's transform refuses it: {err.message}"))
    findings += template_errors(spec, template, options.scope, policy)
    notes = template_warnings(spec, options.scope)
    if warning:
        notes.append(("spec.targets[0].operations", warning))
    errors = _located(
        template.document, TemplateError, f"{label}: cannot be a ValidatingAdmissionPolicy", findings
    )
    warnings = _located(template.document, TemplateError, f"{label}: its ValidatingAdmissionPolicy", notes)
    return TemplateVap(
        name=template.name,
        kind=template.kind,
        document=template.document,
        generate=True,
        policy=None if errors else policy,
        errors=errors,
        warnings=() if errors else warnings,
    )


def _scoped_to_vap(data: Mapping[str, JsonValue]) -> bool:
    spec = data.get("spec") if isinstance(data.get("spec"), Mapping) else {}
    return isinstance(spec, Mapping) and spec.get("enforcementAction") == "scoped"


def plan_vap(policies: PolicySet, options: VapOptions | None = None) -> VapPlan:
    """Every template's policy and every constraint's binding, in name order."""
    options = options or VapOptions()
    templates = {name: plan_template(t, options) for name, t in sorted(policies.templates.items())}
    constraints = []
    for candidate in policies.all_candidates:
        constraint = candidate.constraint
        data = constraint.document.data
        label = f"constraint {constraint.kind}/{constraint.name}"
        owner = templates.get(candidate.template.name)
        findings: list[Finding] = []
        raw: list[str] = []
        actions: list[str] = []
        try:
            raw = binding_actions(data, options.default_generate_binding)
            actions = validation_actions(raw) if raw else []
        except TransformError as err:
            findings.append(("spec.enforcementAction", f"Gatekeeper's transform refuses it: {err.message}"))
        made = None
        notes: list[Finding] = []
        if actions and not findings:
            findings += binding_errors(actions)
            if owner is not None and owner.generate and owner.policy is None:
                findings.append(
                    (
                        "kind",
                        f"its template {owner.name} cannot be a ValidatingAdmissionPolicy (see its errors)",
                    )
                )
            elif owner is None or owner.policy is None:
                if _scoped_to_vap(data):
                    findings.append(
                        (
                            "spec.scopedEnforcementActions",
                            f"it is scoped to {VAP_POINT} (or {ALL_POINTS}) but its template generates no "
                            "ValidatingAdmissionPolicy (generateVAP): the API server will not enforce it",
                        )
                    )
            elif not findings:
                made = binding(data, raw)
                notes = constraint_warnings(candidate.match, data) + expansion_warnings(
                    candidate.match, policies.expansions
                )
        constraints.append(
            ConstraintVap(
                kind=constraint.kind,
                name=constraint.name,
                document=constraint.document,
                actions=tuple(actions),
                binding=made,
                errors=_located(
                    constraint.document,
                    ConstraintError,
                    f"{label}: no ValidatingAdmissionPolicyBinding",
                    findings,
                ),
                warnings=_located(constraint.document, ConstraintError, f"{label}: its binding", notes),
            )
        )
    return VapPlan(tuple(templates.values()), tuple(constraints))


def with_owner(obj: Mapping[str, JsonValue], owner: Mapping[str, JsonValue]) -> JsonObject:
    """A copy of a generated object whose controller is `owner` (a template or a constraint, as stored:
    apiVersion, kind, name, uid), as controllerutil.SetControllerReference writes it."""
    out = copy.deepcopy(dict(obj))
    meta = owner.get("metadata") or {}
    out["metadata"]["ownerReferences"] = [
        {
            "apiVersion": str(owner.get("apiVersion")),
            "kind": str(owner.get("kind")),
            "name": str(meta.get("name")),
            "uid": str(meta.get("uid")),
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return out
