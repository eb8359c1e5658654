"""Deciding: Gatekeeper's K8sNativeValidation driver on Kubernetes' CEL validator, for one request."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from celkeeper.cel.api import Activation, CelError, Engine
from celkeeper.constraints import Constraint
from celkeeper.match import MatchError, targets_of
from celkeeper.model import Decision, EnforcementPoint, FailurePolicy, Result
from celkeeper.policy import Candidate, PolicySet
from celkeeper.review.request import AdmissionRequest, namespace_object
from celkeeper.templates import CompiledExpression, CompiledTemplate

MAX_MESSAGE_BYTES = 5 * 1024  # celconfig.MaxEvaluatedMessageExpressionSizeBytes

NamespaceLookup = Callable[[str], Mapping[str, Any] | None]


def decide(
    request: AdmissionRequest,
    policies: PolicySet,
    namespaces: NamespaceLookup,
    point: EnforcementPoint | str,
    clock: Callable[[], float] | None = None,
) -> Decision:
    """Every violation of the policies by the request, with the action that applies at `point`."""
    kinds = request.object_kinds()
    if len(kinds) == 1:
        group, kind = next(iter(kinds))
        candidates = policies.candidates(group, kind)
    else:
        merged: dict[int, Candidate] = {}
        for group, kind in kinds:
            merged.update((id(c), c) for c in policies.candidates(group, kind))
        candidates = tuple(sorted(merged.values(), key=lambda c: (c.constraint.kind, c.constraint.name)))
    if not candidates:
        return Decision()
    point_name = str(point.value if isinstance(point, EnforcementPoint) else point)
    process = "audit" if point_name == EnforcementPoint.AUDIT.value else "webhook"
    evaluation = _Evaluation(policies.engine, request, namespaces)
    targets = targets_of((request.object, request.old_object))  # read once, matched many times
    results: list[Result] = []
    timings: dict[str, float] = {}
    decided: dict[int, bool | str] = {}  # per Match object (equal ones are shared): matched, or the error
    for candidate in candidates:
        constraint, template = candidate.constraint, candidate.template
        actions = constraint.actions_for(point_name)
        if not actions:
            continue
        if (
            request.from_review
            and template.operations is not None
            and request.operation not in template.operations
        ):
            continue
        started = clock() if clock is not None else 0.0
        match = candidate.match
        matched = decided.get(id(match))
        if matched is None:
            try:
                matched = match.matches_any(
                    targets, evaluation.namespace if match.needs_namespace else None, process=process
                )
            except MatchError as err:
                matched = f"unable to match constraints: {err}"
            decided[id(match)] = matched
        if isinstance(matched, str):
            messages = [matched]
        else:
            messages = evaluation.violations(template, constraint) if matched else []
        for message in messages:
            results.extend(
                Result(constraint.kind, constraint.name, action, message, template.name) for action in actions
            )
        if clock is not None:
            timings[constraint.kind] = timings.get(constraint.kind, 0.0) + clock() - started
    return Decision(tuple(results), tuple(timings.items()))


class _Evaluation:
    """Per-request state: the Namespace looked up once, one engine activation shared by all programs."""

    def __init__(self, engine: Engine, request: AdmissionRequest, namespaces: NamespaceLookup) -> None:
        self.engine = engine
        self.request = request
        self._lookup = namespaces
        self._namespace: Mapping[str, Any] | None = None
        self._looked_up = False
        self._activation: Activation | None = None

    @property
    def namespace(self) -> Mapping[str, Any] | None:
        if not self._looked_up:
            self._looked_up = True
            found = self._lookup(self.request.namespace) if self.request.namespace else None
            self._namespace = found if isinstance(found, Mapping) else None
        return self._namespace

    @property
    def activation(self) -> Activation:
        if self._activation is None:
            self._activation = self.engine.activation(
                object=self.request.object,
                old_object=self.request.old_object,
                request=self.request.cel_request,
                namespace_object=namespace_object(self.namespace),
            )
        return self._activation

    def _run(self, expression: CompiledExpression, constraint: Constraint) -> Any:
        """The value, or an error text as Kubernetes words it."""
        if expression.program is None:
            return _Failure(expression.error or "compilation error")
        value = self.engine.evaluate(
            expression.program, self.activation, constraint.parameters, constraint.document.data
        )
        if isinstance(value, CelError):
            return _Failure(f"expression '{expression.source}' resulted in error: {value.message}")
        return value

    def _run_all(self, template: CompiledTemplate, constraint: Constraint) -> list[Any]:
        """`_run` of every validation; together when all compiled (the engine may then share the
        template's variables between them: same results)."""
        expressions = [v.expression for v in template.validations]
        programs = [e.program for e in expressions if e.program is not None]
        evaluate_all = getattr(self.engine, "evaluate_all", None)  # optional in an Engine
        if evaluate_all is None or len(programs) < 2 or len(programs) != len(expressions):
            return [self._run(e, constraint) for e in expressions]
        values = evaluate_all(programs, self.activation, constraint.parameters, constraint.document.data)
        return [
            _Failure(f"expression '{e.source}' resulted in error: {v.message}")
            if isinstance(v, CelError)
            else v
            for e, v in zip(expressions, values, strict=True)
        ]

    def violations(self, template: CompiledTemplate, constraint: Constraint) -> list[str]:
        """The messages of every violation (Kubernetes' validator.Validate for one constraint)."""
        fail = template.failure_policy is FailurePolicy.FAIL
        if template.match_conditions:
            failures: list[str] = []
            for condition in template.match_conditions:
                value = self._run(condition.expression, constraint)
                if isinstance(value, _Failure):
                    failures.append(value.text)
                elif value is False:
                    return []  # a false match condition: the template does not apply
            if failures:
                if not fail:
                    return []
                return [failures[0] if len(failures) == 1 else f"[{', '.join(failures)}]"]
        messages: list[str] = []
        for validation, value in zip(template.validations, self._run_all(template, constraint), strict=True):
            if isinstance(value, _Failure):
                if fail:
                    messages.append(value.text)
                continue
            if value is True:
                continue
            message = ""
            if validation.message_expression is not None:
                text = self._run(validation.message_expression, constraint)
                if isinstance(text, str):
                    text = text.strip()
                    if len(text.encode()) <= MAX_MESSAGE_BYTES and "\n" not in text:
                        message = text
            if not message and validation.message:
                message = validation.message.strip()
            if not message:
                message = f"failed expression: {validation.expression.source.strip()}"
            messages.append(message)
        return messages


@dataclass(frozen=True)
class _Failure:
    text: str
