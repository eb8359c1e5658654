"""Explaining a decision: what `decide` did, constraint by constraint, on the webhook's own code path.

    explanation = explain(request, policies, namespaces, point)      # decide(..., tracer=Recorder(...))
    explanation.decision         -> the Decision (the same as decide's without a tracer: same code)
    explanation.objects          -> ObjectExplanation per reviewed object: the request's, then each object an
                                    ExpansionTemplate generated from it
    explanation.to_json()        -> plain data for tools (`celkeeper explain -o json`)
    render_text(explanation)     -> text for people (celkeeper.review.explain_text)

Per constraint: whether it was evaluated and, when not, why (`reason`): `kinds`, `scope`, `namespaces`,
`excludedNamespaces`, `labelSelector`, `namespaceSelector`, `name`, `source` (spec.match, the first
criterion that excludes the object), `operation` (the template's operations), `enforcementPoint` (no
action at this point), `dataNotSynced` (its synced data is not synced, failurePolicy Ignore),
`matchCondition` (a match condition of the template is false) or `matchError`
(matching failed: a violation). For an evaluated one: every part of its template as the engine
evaluated it (Engine.explain: match conditions, variables - including those the decision did not read,
marked so - validations and messageExpressions, each with its value or error, its cost, and where its
expression is in the template file; compile errors with their line:col), the engine's decisions and the
results. Values are kept as the engine gives them; to_json() truncates them (VALUE_ITEMS items per list
or map, VALUE_CHARS characters per string).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from celkeeper.cel.api import (
    CelError,
    CelValue,
    EngineDecision,
    Explained,
    LibraryValue,
    Part,
    PartTrace,
    TypeValue,
)
from celkeeper.errors import Location, TemplateError
from celkeeper.expansion import SOURCE_GENERATED, Resultant
from celkeeper.match import Target
from celkeeper.model import Action, Decision, EnforcementPoint, JsonObject, JsonValue, Result
from celkeeper.policy import Candidate, PolicySet
from celkeeper.review.decide import (
    DEFAULT_DEADLINE,
    ExpansionNamespace,
    NamespaceLookup,
    SyncedData,
    decide,
)
from celkeeper.review.request import AdmissionRequest
from celkeeper.templates import CompiledTemplate

VALUE_ITEMS = 20  # list items / map entries kept per value in to_json()
VALUE_CHARS = 500  # characters kept per string in to_json()

# statuses of a constraint in an explanation
VIOLATED = "violated"  # evaluated (or its match failed) and has results at this point
PASSED = "passed"  # evaluated: no violation
NOT_SELECTED = "notSelected"  # spec.match, the template's operations or match conditions exclude the object
SKIPPED = "skipped"  # no action at this enforcement point


@dataclass(frozen=True)
class PartExplanation:
    """One part of a template (variable, matchCondition, validation, messageExpression) for one constraint."""

    part: Part
    index: int
    name: str
    expression: str
    location: Location  # where the expression is in the template file
    evaluated: bool  # False: the decision did not evaluate it (see `note`)
    value: CelValue = None
    error: str | None = None
    cost: int | None = None
    note: str = ""  # why it was not evaluated
    compile_errors: tuple[TemplateError, ...] = ()  # located at their line:col in the file


@dataclass
class ConstraintExplanation:
    kind: str
    name: str
    template: str
    enforcement_action: str
    actions: tuple[str, ...]  # the actions that apply at this enforcement point
    location: Location  # the constraint document
    parameters: JsonValue
    status: str = NOT_SELECTED
    reason: str = ""  # why it was not evaluated (see the module docstring)
    detail: str = ""  # the reason in words
    parts: list[PartExplanation] = field(default_factory=list)
    decisions: tuple[EngineDecision, ...] = ()
    results: list[Result] = field(default_factory=list)


@dataclass
class ObjectExplanation:
    api_version: str
    kind: str
    namespace: str
    name: str
    operation: str
    source: str  # Original, or Generated (an ExpansionTemplate made it)
    implied_by: str = ""  # the ExpansionTemplate
    enforcement_override: str = ""  # its enforcementAction ("": the constraints' own)
    object: JsonValue = None
    constraints: list[ConstraintExplanation] = field(default_factory=list)
    results: tuple[Result, ...] = ()


@dataclass
class Explanation:
    point: str
    objects: list[ObjectExplanation]
    decision: Decision

    @property
    def allowed(self) -> bool:
        return self.decision.allowed

    def to_json(self) -> JsonObject:
        return {
            "enforcementPoint": self.point,
            "allowed": self.decision.allowed,
            "results": [_result_json(r) for r in self.decision.results],
            "objects": [_object_json(o) for o in self.objects],
        }


def explain(
    request: AdmissionRequest,
    policies: PolicySet,
    namespaces: NamespaceLookup,
    point: EnforcementPoint | str,
    *,
    deadline: float = DEFAULT_DEADLINE,
    data: SyncedData | None = None,
    expand: bool = True,
    expansion_namespace: ExpansionNamespace | None = None,
) -> Explanation:
    """The decision on the request, explained (decide with a Recorder: the same code as the webhook's;
    `data`, `expand` and `expansion_namespace` as decide reads them)."""
    recorder = Recorder(policies, namespaces, point)
    decision = decide(
        request,
        policies,
        namespaces,
        point,
        deadline=deadline,
        data=data,
        expand=expand,
        expansion_namespace=expansion_namespace,
        tracer=recorder,
    )
    return recorder.explanation(decision)


class Recorder:
    """A review.decide Tracer that builds an Explanation."""

    def __init__(
        self, policies: PolicySet, namespaces: NamespaceLookup, point: EnforcementPoint | str
    ) -> None:
        self.policies = policies
        self.namespaces = namespaces
        self.point = str(point.value if isinstance(point, EnforcementPoint) else point)
        self.objects: list[ObjectExplanation] = []
        self._current: dict[tuple[str, str], ConstraintExplanation] = {}
        self._request: AdmissionRequest | None = None

    def explanation(self, decision: Decision) -> Explanation:
        return Explanation(self.point, self.objects, decision)

    # -- the Tracer protocol ----------------------------------------------------------------------
    def begin(self, request: AdmissionRequest, resultant: Resultant | None) -> None:
        obj = request.object if request.object is not None else request.old_object
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        meta = meta if isinstance(meta, Mapping) else {}
        self._request = request
        self.objects.append(
            ObjectExplanation(
                api_version=f"{request.group}/{request.version}" if request.group else request.version,
                kind=request.kind,
                namespace=request.namespace,
                name=request.name or str(meta.get("name") or meta.get("generateName") or ""),
                operation=request.operation,
                source=request.source,
                implied_by=resultant.template if resultant is not None else "",
                enforcement_override=resultant.enforcement_action if resultant is not None else "",
                object=obj,
            )
        )
        self._current = {}

    def skipped(self, candidate: Candidate, reason: str) -> None:
        entry = self._entry(candidate)
        if reason == "operation":
            entry.status, entry.reason = NOT_SELECTED, reason
            operations = ", ".join(sorted(candidate.template.operations or ()))
            operation = self._request.operation if self._request is not None else ""
            entry.detail = f"the template applies to {operations} requests, not {operation}"
        elif reason == "dataNotSynced":
            entry.status, entry.reason = SKIPPED, reason
            entry.detail = "the synced data its template reads is not synced (failurePolicy Ignore)"
        else:
            entry.status, entry.reason = SKIPPED, reason
            entry.detail = f"the constraint has no enforcement action at {self.point}"

    def unmatched(self, candidate: Candidate, criteria: tuple[str, ...]) -> None:
        entry = self._entry(candidate)
        entry.status, entry.reason = NOT_SELECTED, criteria[0] if criteria else "kinds"
        request = self._request
        objects = (request.object, request.old_object) if request is not None else ()
        details = []
        for criterion, obj in zip(criteria, [o for o in objects if isinstance(o, dict)], strict=False):
            details.append(self._criterion_detail(candidate, criterion, Target.of(obj)))
        entry.detail = "; ".join(dict.fromkeys(details))  # object and oldObject: once when equal
        if len(criteria) > 1 and len(set(details)) > 1:
            entry.detail = f"object: {details[0]}; oldObject: {details[1]}"

    def selected(self, candidate: Candidate, actions: tuple[Action, ...], matched: bool | str) -> None:
        entry = self._entry(candidate)
        entry.status = PASSED
        if isinstance(matched, str):
            entry.status, entry.reason, entry.detail = VIOLATED, "matchError", matched

    def evaluated(self, candidate: Candidate, explained: Explained) -> None:
        entry = self._entry(candidate)
        entry.decisions = explained.outcome.decisions
        entry.parts = _parts(candidate.template, explained.parts)
        false_condition = next(
            (p for p in entry.parts if p.part == "matchCondition" and p.evaluated and p.value is False), None
        )
        if false_condition is not None and not entry.decisions:
            entry.status, entry.reason = NOT_SELECTED, "matchCondition"
            entry.detail = f"match condition {false_condition.name!r} is false"

    def finish(self, results: tuple[Result, ...]) -> None:
        current = self.objects[-1]
        current.results = results
        for result in results:
            entry = self._current.get((result.constraint_kind, result.constraint_name))
            if entry is not None:
                entry.results.append(result)
                entry.status = VIOLATED
        request = self._request
        kinds = request.object_kinds() if request is not None else set()
        for candidate in self.policies.all_candidates:
            if (candidate.constraint.kind, candidate.constraint.name) in self._current:
                continue
            entry = self._entry(candidate)
            entry.status, entry.reason = NOT_SELECTED, "kinds"
            wanted = ", ".join(_kind(g, k) for g, k in sorted(kinds))
            written = _compact(candidate.constraint.match.get("kinds"))
            entry.detail = f"spec.match.kinds {written} does not select {wanted}"
        current.constraints = sorted(self._current.values(), key=lambda e: (e.kind, e.name))

    # -- helpers ----------------------------------------------------------------------------------
    def _entry(self, candidate: Candidate) -> ConstraintExplanation:
        constraint = candidate.constraint
        key = (constraint.kind, constraint.name)
        found = self._current.get(key)
        if found is None:
            found = self._current[key] = ConstraintExplanation(
                kind=constraint.kind,
                name=constraint.name,
                template=candidate.template.name,
                enforcement_action=str(constraint.enforcement_action),
                actions=tuple(str(a) for a in constraint.actions_for(self.point)),
                location=constraint.document.location(""),
                parameters=constraint.parameters,
            )
        return found

    def _criterion_detail(self, candidate: Candidate, criterion: str, target: Target) -> str:
        match = candidate.constraint.match
        written = _compact(match.get(criterion))
        request = self._request
        namespace = self.namespaces(request.namespace) if request is not None and request.namespace else None
        if criterion == "kinds":
            return f"spec.match.kinds {written} does not select {_kind(target.group, target.kind)}"
        if criterion == "scope":
            where = "cluster-scoped" if not target.namespace and namespace is None else "namespaced"
            if target.is_namespace:
                where = "a Namespace"
            return f"spec.match.scope {match.get('scope')} does not select a {where} object"
        effective = candidate.match.effective_namespace(target, namespace)
        if criterion == "namespaces":
            return f"namespace {effective!r} is not in spec.match.namespaces {written}"
        if criterion == "excludedNamespaces":
            return f"namespace {effective!r} is in spec.match.excludedNamespaces {written}"
        if criterion == "labelSelector":
            labels = _compact(dict(target.labels))
            return f"spec.match.labelSelector {written} does not select the labels {labels}"
        if criterion == "namespaceSelector":
            if target.is_namespace:
                labels = _compact(dict(target.labels))
                return (
                    f"spec.match.namespaceSelector {written} does not select the Namespace's labels {labels}"
                )
            meta = namespace.get("metadata") if isinstance(namespace, Mapping) else None
            found = meta.get("labels") if isinstance(meta, Mapping) else None
            return (
                f"spec.match.namespaceSelector {written} does not select namespace {effective!r} "
                f"(labels {_compact(dict(found) if isinstance(found, Mapping) else {})})"
            )
        if criterion == "name":
            return f"spec.match.name {written} does not match {target.name!r}"
        if criterion == "source":
            made = (
                "generated by an ExpansionTemplate"
                if request is not None and request.source == SOURCE_GENERATED
                else "an original object"
            )
            return f"spec.match.source {match.get('source')} does not select {made}"
        return criterion


_NOT_READ = "not read by the decision"
_LIST = {
    "variable": "variables",
    "matchCondition": "match_conditions",
    "validation": "validations",
    "messageExpression": "validations",
}


def _parts(template: CompiledTemplate, traces: tuple[PartTrace, ...]) -> list[PartExplanation]:
    """Every part of the template, in source order, with what the trace says of it."""
    spec = template.spec
    found: dict[tuple[str, int], PartTrace] = {}
    for traced in traces:  # a variable may be read in the conditions' and the validations' contexts
        key = (traced.part, traced.index)
        if key not in found or (found[key].scope != "validations" and traced.scope == "validations"):
            found[key] = traced
    out: list[PartExplanation] = []
    if spec is None:  # a template built without its spec (tests): the trace only
        return [
            PartExplanation(t.part, t.index, t.name, "", Location(), t.evaluated, t.value, t.error, t.cost)
            for t in found.values()
        ]
    errors = {e.location.path: e for e in template.errors}
    layout: list[tuple[Part, int, str, str, str]] = []  # part, index, name, expression, path
    layout += [
        ("matchCondition", i, c.name, c.expression.source, c.expression.path)
        for i, c in enumerate(spec.match_conditions)
    ]
    layout += [
        ("variable", i, v.name, v.expression.source, v.expression.path) for i, v in enumerate(spec.variables)
    ]
    for i, v in enumerate(spec.validations):
        layout.append(("validation", i, "", v.expression.source, v.expression.path))
        if v.message_expression is not None:
            layout.append(
                ("messageExpression", i, "", v.message_expression.source, v.message_expression.path)
            )
    for part, index, name, expression, path in layout:
        trace: PartTrace | None = found.get((part, index))
        compile_errors = tuple(e for p, e in errors.items() if p == path)
        location = template.document.location(path)
        if trace is None:
            out.append(
                PartExplanation(
                    part,
                    index,
                    name,
                    expression,
                    location,
                    False,
                    note=_not_evaluated(part),
                    compile_errors=compile_errors,
                )
            )
            continue
        out.append(
            PartExplanation(
                part,
                index,
                name,
                expression,
                location,
                trace.evaluated,
                trace.value,
                trace.error,
                trace.cost,
                "" if trace.evaluated else _NOT_READ,
                compile_errors,
            )
        )
    return out


def _not_evaluated(part: str) -> str:
    if part == "messageExpression":
        return "not evaluated (its validation passed, or the cost budget ran out)"
    if part == "matchCondition":
        return "not evaluated (an earlier match condition decided)"
    return "not evaluated (a match condition excluded the object, or the cost budget ran out first)"


def _kind(group: str, kind: str) -> str:
    return f"{group}/{kind}" if group else f"{kind} (core group)"


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


# -- JSON ---------------------------------------------------------------------------------------------
def jsonable(value: Any, items: int = VALUE_ITEMS, chars: int = VALUE_CHARS) -> Any:
    """A CEL value as JSON data, truncated: lists and maps keep `items` entries (then a marker entry
    "… N more"), strings `chars` characters (then "… (N characters)")."""
    if value is None or isinstance(value, bool | int):
        return value if not isinstance(value, int) or abs(value) < 2**53 else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return value if len(value) <= chars else value[:chars] + f"… ({len(value)} characters)"
    if isinstance(value, bytes):
        return jsonable("b64:" + base64.b64encode(value).decode(), items, chars)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return f"{value.total_seconds()}s"
    if isinstance(value, TypeValue):
        return f"type({value.name})"
    if isinstance(value, LibraryValue):
        return f"{value.kind}({value.text})"
    if isinstance(value, CelError):
        return f"error: {value.message}"
    if isinstance(value, list | tuple):
        out = [jsonable(v, items, chars) for v in value[:items]]
        if len(value) > items:
            out.append(f"… {len(value) - items} more")
        return out
    if isinstance(value, Mapping):
        entries = list(value.items())
        mapped = {str(k): jsonable(v, items, chars) for k, v in entries[:items]}
        if len(entries) > items:
            mapped["…"] = f"{len(entries) - items} more"
        return mapped
    return str(value)


def _location_json(location: Location) -> JsonObject:
    return {
        k: v
        for k, v in (
            ("file", location.file),
            ("line", location.line),
            ("column", location.column),
            ("path", location.path),
        )
        if v is not None
    }


def _result_json(result: Result) -> JsonObject:
    out: JsonObject = {
        "constraint": {"kind": result.constraint_kind, "name": result.constraint_name},
        "template": result.template,
        "enforcementAction": str(result.action),
        "message": result.message,
    }
    if result.implied_by:
        out["impliedBy"] = result.implied_by
    return out


def _part_json(part: PartExplanation) -> JsonObject:
    out: JsonObject = {"part": part.part, "index": part.index}
    if part.name:
        out["name"] = part.name
    out["expression"] = part.expression
    out["location"] = _location_json(part.location)
    out["evaluated"] = part.evaluated
    if part.error is not None:
        out["error"] = part.error
    elif part.evaluated or part.note == _NOT_READ:
        out["value"] = jsonable(part.value)
    if part.note:
        out["note"] = part.note
    if part.cost is not None:
        out["cost"] = part.cost
    if part.compile_errors:
        out["compileErrors"] = [
            {"message": e.message, "location": _location_json(e.location)} for e in part.compile_errors
        ]
    return out


def _constraint_json(entry: ConstraintExplanation) -> JsonObject:
    out: JsonObject = {
        "kind": entry.kind,
        "name": entry.name,
        "template": entry.template,
        "enforcementAction": entry.enforcement_action,
        "actions": list(entry.actions),
        "location": _location_json(entry.location),
        "status": entry.status,
    }
    if entry.reason:
        out["reason"] = entry.reason
        out["detail"] = entry.detail
    if entry.status in (VIOLATED, PASSED) or entry.reason == "matchCondition":
        out["parameters"] = jsonable(entry.parameters)
        out["parts"] = [_part_json(p) for p in entry.parts]
        out["decisions"] = [
            {"action": d.action, "evaluation": d.evaluation, "message": d.message} for d in entry.decisions
        ]
        out["results"] = [_result_json(r) for r in entry.results]
    return out


def _object_json(obj: ObjectExplanation) -> JsonObject:
    out: JsonObject = {
        "apiVersion": obj.api_version,
        "kind": obj.kind,
        "namespace": obj.namespace,
        "name": obj.name,
        "operation": obj.operation,
        "source": obj.source,
    }
    if obj.implied_by:
        out["impliedBy"] = obj.implied_by
        out["enforcementAction"] = obj.enforcement_override
    out["results"] = [_result_json(r) for r in obj.results]
    out["constraints"] = [_constraint_json(c) for c in obj.constraints]
    return out
