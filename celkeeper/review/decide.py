"""Deciding: Gatekeeper's K8sNativeValidation driver on Kubernetes' CEL validator, for one request."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from celkeeper.cel.api import Activation, CelError, Engine
from celkeeper.constraints import Constraint
from celkeeper.match import MatchError, targets_of
from celkeeper.model import Action, Decision, EnforcementPoint, FailurePolicy, Result
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
        runs = policies.runs(group, kind)
    else:
        merged: dict[int, Candidate] = {}
        for group, kind in kinds:
            merged.update((id(c), c) for c in policies.candidates(group, kind))
        candidates = sorted(merged.values(), key=lambda c: (c.constraint.kind, c.constraint.name))
        runs = policies.runs_of(candidates)
    if not runs:
        return Decision()
    point_name = str(point.value if isinstance(point, EnforcementPoint) else point)
    process = "audit" if point_name == EnforcementPoint.AUDIT.value else "webhook"
    evaluation = _Evaluation(policies, request, namespaces)
    targets = targets_of((request.object, request.old_object))  # read once, matched many times
    results: list[Result] = []
    timings: dict[str, float] = {}
    decided: dict[int, bool | str] = {}  # per Match object (equal ones are shared): matched, or the error
    operation = request.operation if request.from_review else None
    for run in runs:  # the constraints of one template: their validations may be evaluated together
        template = run.template
        if operation is not None and template.operations is not None and operation not in template.operations:
            continue
        started = clock() if clock is not None else 0.0
        kind = ""
        complete = True  # every constraint of the run is to be evaluated
        selected: list[tuple[Candidate, tuple[Action, ...], bool | str]] = []
        for candidate in run.candidates:
            constraint = candidate.constraint
            actions = constraint.actions_for(point_name)
            if not actions:
                complete = False
                continue
            kind = constraint.kind
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
            if matched is not True:
                complete = False
            if matched:
                selected.append((candidate, actions, matched))
        if selected:
            if complete:
                evaluated = evaluation.violations(template, run.constraints, run.plan)
            else:
                chosen = [c.constraint for c, _, m in selected if m is True]
                evaluated = evaluation.violations(template, chosen, None)
            for candidate, actions, matched in selected:
                constraint = candidate.constraint
                messages = [matched] if isinstance(matched, str) else evaluated[id(constraint)]
                for message in messages:
                    results.extend(
                        Result(constraint.kind, constraint.name, action, message, template.name)
                        for action in actions
                    )
        if clock is not None and kind:
            timings[kind] = timings.get(kind, 0.0) + clock() - started
    return Decision(tuple(results), tuple(timings.items()))


class _Evaluation:
    """Per-request state: the Namespace looked up once, one engine activation shared by all programs."""

    def __init__(self, policies: PolicySet, request: AdmissionRequest, namespaces: NamespaceLookup) -> None:
        self.policies = policies
        self.engine: Engine = policies.engine
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

    def _conditions(self, template: CompiledTemplate, constraint: Constraint) -> list[str] | None:
        """None when the template's match conditions select the request for this constraint; else its
        messages (none when a condition is false, or the failures under failurePolicy Fail)."""
        failures: list[str] = []
        for condition in template.match_conditions:
            value = self._run(condition.expression, constraint)
            if isinstance(value, _Failure):
                failures.append(value.text)
            elif value is False:
                return []  # a false match condition: the template does not apply
        if not failures:
            return None
        if template.failure_policy is not FailurePolicy.FAIL:
            return []
        return [failures[0] if len(failures) == 1 else f"[{', '.join(failures)}]"]

    def _prepared(self, constraints: Sequence[Constraint], plan: Any = None) -> list[list[bool]] | None:
        """The validations' values from the prepared program for these constraints (`plan`, or the
        policy set's), or None."""
        prepared = plan if plan is not None else self.policies.plan(constraints)
        if prepared is None:
            return None
        return self.engine.evaluate_prepared(prepared, self.activation)

    def violations(
        self, template: CompiledTemplate, constraints: Sequence[Constraint], plan: Any
    ) -> dict[int, list[str]]:
        """The messages of every violation per constraint id (Kubernetes' validator.Validate for
        each constraint). `plan`: the prepared program of exactly `constraints`, if known.
        Constraints with a prepared program are evaluated together; any error there, and
        constraints without one, are evaluated one by one."""
        out: dict[int, list[str]] = {}
        remaining: Sequence[Constraint] = constraints
        if template.match_conditions:
            remaining = []
            for constraint in constraints:
                conditions = self._conditions(template, constraint)
                if conditions is None:
                    remaining.append(constraint)
                else:
                    out[id(constraint)] = conditions
            if len(remaining) != len(constraints):
                plan = None
            if not remaining:
                return out
        tried = len(remaining) > 1 or plan is not None
        together = self._prepared(remaining, plan) if tried else None
        for i, constraint in enumerate(remaining):
            if together is not None:
                values: list[Any] = together[i]
                if False not in values:  # all true (prepared values are booleans)
                    out[id(constraint)] = []
                    continue
            else:
                alone = None if tried and len(remaining) == 1 else self._prepared((constraint,))
                values = alone[0] if alone is not None else self._run_all(template, constraint)
            out[id(constraint)] = self._messages(template, constraint, values)
        return out

    def _messages(self, template: CompiledTemplate, constraint: Constraint, values: list[Any]) -> list[str]:
        fail = template.failure_policy is FailurePolicy.FAIL
        messages: list[str] = []
        for validation, value in zip(template.validations, values, strict=True):
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
