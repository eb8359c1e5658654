"""Kubernetes' validator on the cel-python engine: the decisions Gatekeeper's K8sNativeValidation driver
makes (gatekeeper pkg/drivers/k8scel/driver.go), ported from k8s.io/apiserver v0.36.2:
validating/validator.go (Validate), webhook/matchconditions/matcher.go (Match), plugin/cel/
activation.go (Evaluate: how errors are worded) and compile.go (CompileCELExpression: types).

What differs from Kubernetes (the cel-go engine runs Kubernetes' own code; tests compare both):
- cost: celpy has no cost model; each evaluation counts comprehension steps, each costing about
  what Kubernetes charges for the loop's condition and step (half their tokens, engine._step_cost),
  against Gatekeeper's budget per constraint (1,000,000; 2,500,000 for match conditions), so a
  runaway expression ends with Kubernetes' error text; other work (string and list growth outside
  comprehensions, library calls) is not counted. celpy runs ~200x slower than cel-go, so at the
  webhook the call's deadline usually ends a runaway evaluation first (the offline tools have no
  deadline, as gator: there the budget ends it, after seconds);
- message expressions are evaluated only for validations that fail (Kubernetes evaluates them all,
  which matters only for the cost budget);
- a compile error lists the issues cel-cpp finds, in cel-go's format and words for the common ones
  (cel-cpp may stop at a different set of issues than cel-go when there are several);
- an expression that uses a template variable which does not compile fails whether or not its
  evaluation reaches the variable;
- explaining (`Validator.explain`): parts are traced as `validate` evaluates them (no cost is
  reported); the variables are evaluated one by one afterwards (each as an expression, with the
  variables before it), `evaluated` meaning that a part the decision evaluated mentions it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from celkeeper.cel.api import (
    CelError,
    Diagnostic,
    EngineDecision,
    Explained,
    InventoryError,
    Outcome,
    Part,
    PartTrace,
    RequestInput,
    TemplateRefused,
    TemplateSource,
)
from celkeeper.cel.celpython.astvalidators import PROGRAM_ERROR
from celkeeper.cel.celpython.inventory import PyInventory, read_data
from celkeeper.cel.inventory import Gvk
from celkeeper.cel.requestvars import cel_request, namespace_object
from celkeeper.errors import CelCompileError

RESERVED_PREFIX = "gatekeeper_internal_"
PER_CALL_LIMIT = 1_000_000  # apis/cel/config.go PerCallLimit: Gatekeeper's budget per constraint
MATCH_CONDITIONS_BUDGET = 2_500_000  # RuntimeCELCostBudgetMatchConditions
MAX_MESSAGE_BYTES = 5 * 1024  # MaxEvaluatedMessageExpressionSizeBytes
OUT_OF_BUDGET = "validation failed due to running out of cost budget, no further validation rules will be run"
_IDENTIFIER = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*\Z")
_WANT = {"validation": "bool", "matchCondition": "bool", "messageExpression": "string"}


class OutOfBudget(BaseException):
    """The cost budget of one constraint's evaluation ran out (BaseException: celpy catches Exception)."""


class DeadlinePassed(BaseException):
    """The deadline of a `validate` call passed during an evaluation."""


class CostBudget:
    """The remaining cost of one evaluation phase, and the call's deadline (monotonic seconds)."""

    def __init__(self, budget: int, deadline: float | None) -> None:
        self.remaining = budget
        self.deadline = deadline
        self._checks = 0

    def spend(self, cost: int) -> None:
        self.remaining -= cost
        if self.remaining < 0:
            raise OutOfBudget()
        self._checks += 1
        if self.deadline is not None and self._checks % 100 == 0 and time.monotonic() > self.deadline:
            raise DeadlinePassed()


@dataclass(frozen=True)
class CompiledPart:
    """One expression of a template: its program, or why it fails at request time."""

    source: str
    program: Any = None
    compile_error: str | None = None  # Kubernetes' CompilationResult.Error text
    eval_error: str | None = None  # fails every evaluation with this (a broken variable)


@dataclass(frozen=True, eq=False)
class PyTemplate:
    failure_policy: str
    diagnostics: tuple[Diagnostic, ...]
    conditions: tuple[CompiledPart, ...]
    validations: tuple[CompiledPart, ...]
    messages: tuple[CompiledPart | None, ...]  # one per validation
    static_messages: tuple[str, ...]  # one per validation ("" when none)
    variables: tuple[tuple[str, str], ...]  # the variables that compile, in order
    data_kinds: tuple[Gvk, ...] = ()  # the synced data it reads (`data`)
    # every variable in source order: name, expression, and why it fails (None: it compiles)
    all_variables: tuple[tuple[str, str, str | None], ...] = ()
    condition_names: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class PyBinding:
    program: PyTemplate
    constraint: Mapping[str, Any]
    params: Any  # spec.parameters, or None


def display(source: str, err: CelCompileError) -> str:
    """A compile error as cel-go shows its issues (common/error.go ToDisplayString): `ERROR:
    <input>:L:C: msg`, then the line (tabs as spaces) and a marker under the column, per issue."""
    lines = source.split("\n")
    shown = []
    for line, column, message in err.issues:
        if not source:  # cel-go: column 0 and no snippet for an empty source
            shown.append(f"ERROR: <input>:{line}:0: {message}")
            continue
        text = f"ERROR: <input>:{line}:{column}: {message}"
        if 1 <= line <= len(lines) and len(lines[line - 1].encode()) <= _MAX_SNIPPET:
            snippet = lines[line - 1].replace("\t", " ")
            marks = ["\uff0e" if len(c.encode()) > 1 else "." for c in snippet[: max(column - 1, 0)]]
            at = snippet[column - 1 : column]
            marks.append("\uff3e" if len(at.encode()) > 1 else "^")
            text += f"\n | {snippet}\n | {''.join(marks)}"
        shown.append(text)
    return "\n".join(shown)


_MAX_SNIPPET = 16384  # bytes (cel-go's maxSnippetLength)


def refuse(source: TemplateSource) -> None:
    """What Gatekeeper's schema.Source.Validate refuses (gatekeeper pkg/drivers/k8scel/schema)."""
    for condition in source.match_conditions:
        if condition.name.startswith(RESERVED_PREFIX):
            raise TemplateRefused(
                f"invalid match condition: {condition.name} is not a valid match condition; "
                f'cannot have "{RESERVED_PREFIX}" as a prefix'
            )
    for var in source.variables:
        if var.name.startswith(RESERVED_PREFIX):
            raise TemplateRefused(
                f"invalid variable definition: {var.name} is not a valid variable; "
                f'cannot have "{RESERVED_PREFIX}" as a prefix'
            )
        if var.name in ("params", "anyObject"):
            raise TemplateRefused(
                f'invalid variable definition: {var.name} an invalid variable name, "{var.name}" is a '
                "reserved keyword"
            )


def compile_template(
    compile_one: Callable[[str, Mapping[str, str]], Any],
    undeclared_params: Callable[[str], CelCompileError | None],
    source: TemplateSource,
) -> PyTemplate:
    """Compile every part of a template (Driver.AddTemplate); `compile_one(source, variables)` is the
    engine's expression compiler (every part may use `params` there: `undeclared_params(source)`
    gives the error Kubernetes reports when a part other than a variable does)."""
    refuse(source)
    diagnostics: list[Diagnostic] = []
    good: dict[str, str] = {}
    broken: dict[str, str] = {}

    def part(text: str, kind: Part, index: int, name: str = "") -> CompiledPart:
        for var, why in broken.items():
            if re.search(rf"\bvariables\s*\.\s*{re.escape(var)}\b", text):
                return CompiledPart(text, eval_error=f'composited variable "{var}" fails to compile: {why}')
        try:
            program = compile_one(text, good)
            if kind != "variable":
                refused = undeclared_params(text)
                if refused is not None:
                    raise refused
        except CelCompileError as err:
            diagnostics.extend(Diagnostic(kind, index, name, m, line, col) for line, col, m in err.issues)
            if err.message.startswith(PROGRAM_ERROR):  # found planning: compile.go words it alone
                return CompiledPart(text, compile_error=err.message)
            return CompiledPart(text, compile_error="compilation failed: " + display(text, err))
        want = _WANT.get(kind)
        if want is not None and program.output_type != want:
            reason = f"must evaluate to {want} but got {program.output_type}"
            diagnostics.append(Diagnostic(kind, index, name, reason))
            return CompiledPart(text, compile_error=reason)
        return CompiledPart(text, program)

    for i, var in enumerate(source.variables):
        compiled = part(var.expression, "variable", i, var.name)
        if not _IDENTIFIER.match(var.name):
            continue  # no expression can name it (`variables.my-var` is a subtraction)
        if compiled.program is not None:  # a name defined again: the last definition is used
            good[var.name] = var.expression
            broken.pop(var.name, None)
        else:
            broken[var.name] = compiled.compile_error or compiled.eval_error or ""
            good.pop(var.name, None)
    conditions = tuple(
        part(c.expression, "matchCondition", i, c.name) for i, c in enumerate(source.match_conditions)
    )
    validations = tuple(part(v.expression, "validation", i) for i, v in enumerate(source.validations))
    messages = tuple(
        part(v.message_expression, "messageExpression", i) if v.message_expression else None
        for i, v in enumerate(source.validations)
    )
    return PyTemplate(
        failure_policy=source.failure_policy,
        diagnostics=tuple(diagnostics),
        conditions=conditions,
        validations=validations,
        messages=messages,
        static_messages=tuple(v.message or "" for v in source.validations),
        variables=tuple(good.items()),
        data_kinds=source.data_kinds,
        all_variables=tuple((v.name, v.expression, broken.get(v.name)) for v in source.variables),
        condition_names=tuple(c.name for c in source.match_conditions),
    )


def bind(program: PyTemplate, constraint: Mapping[str, Any]) -> PyBinding:
    spec = constraint.get("spec") if isinstance(constraint, Mapping) else None
    params = spec.get("parameters") if isinstance(spec, Mapping) else None
    return PyBinding(program, constraint, params)


@dataclass(frozen=True)
class _Failure:
    text: str


class Validator:
    """One `validate` call: the request's activations, a budget per constraint, the deadline."""

    def __init__(
        self,
        engine: Any,
        request: RequestInput,
        budget_state: Any,
        timeout: float,
    ) -> None:
        self.engine = engine
        self.state = budget_state
        self.deadline = time.monotonic() + timeout if timeout > 0 else None
        req = cel_request(request.request)
        obj = None if req["operation"] == "DELETE" else request.object
        self.validations = engine.activation(
            object=obj,
            old_object=request.old_object,
            request=req,
            namespace_object=namespace_object(request.namespace),
        )
        # matchconditions/matcher.go evaluates without the namespace
        self.conditions = engine.activation(object=obj, old_object=request.old_object, request=req)
        inventory = request.inventory
        self.view = inventory.view() if isinstance(inventory, PyInventory) else None
        # per template reading synced data: its activations, with `data`
        self._with_data: dict[int, tuple[Any, Any]] = {}

    def _activations(self, template: PyTemplate) -> tuple[Any, Any]:
        """(validations, match conditions) activations for a template."""
        if not template.data_kinds:
            return self.validations, self.conditions
        found = self._with_data.get(id(template))
        if found is None:
            data = read_data(self.view, template.data_kinds)
            found = (self.validations.with_data(data), self.conditions.with_data(data))
            self._with_data[id(template)] = found
        return found

    trace: list[PartTrace] | None = None  # while explaining: every evaluated part's result

    def explain(self, bindings: Sequence[PyBinding]) -> list[Explained]:
        """`run`, recording every part evaluated; then the template's variables, one by one."""
        out: list[Explained] = []
        for binding in bindings:
            self.trace = []
            try:
                (outcome,) = self.run([binding])
                parts = self.trace
            finally:
                self.trace = None
            out.append(Explained(outcome, tuple(parts) + self._variables(binding, parts)))
        return out

    def _variables(self, binding: PyBinding, parts: Sequence[PartTrace]) -> tuple[PartTrace, ...]:
        template = binding.program
        read_text = " ".join(_part_source(template, p) for p in parts)
        known: dict[str, str] = {}
        out: list[PartTrace] = []
        mentioned = {
            name
            for name, _, _ in template.all_variables
            if re.search(rf"\bvariables\s*\.\s*{re.escape(name)}\b", read_text)
        }
        for name, expression, _ in reversed(template.all_variables):  # what read variables read
            if name in mentioned:
                mentioned.update(
                    n
                    for n, _, _ in template.all_variables
                    if re.search(rf"\bvariables\s*\.\s*{re.escape(n)}\b", expression)
                )
        for i, (name, expression, broken) in enumerate(template.all_variables):
            evaluated = name in mentioned
            if broken is not None:
                out.append(
                    PartTrace(
                        "variable",
                        i,
                        name,
                        None,
                        f'composited variable "{name}" fails to compile: {broken}',
                        evaluated,
                    )
                )
                continue
            try:
                program = self.engine.compile(expression, known)
                activation = self._activations(template)[0]
                value = self.engine.evaluate(program, activation, binding.params, binding.constraint)
            except Exception as err:
                value = CelError(str(err))
            known[name] = expression
            if isinstance(value, CelError):
                error = f'composited variable "{name}" fails to evaluate: {value.message}'
                out.append(PartTrace("variable", i, name, None, error, evaluated))
            else:
                out.append(PartTrace("variable", i, name, value, None, evaluated))
        return tuple(out)

    def _record(self, where: tuple[Part, int, str], value: Any, scope: str) -> None:
        if self.trace is None:
            return
        part, index, name = where
        if isinstance(value, _Failure):
            self.trace.append(PartTrace(part, index, name, None, value.text, True, scope))
        else:
            self.trace.append(PartTrace(part, index, name, value, None, True, scope))

    def run(self, bindings: Sequence[PyBinding]) -> list[Outcome]:
        try:
            return self._run(bindings)
        finally:
            if self.view is not None:
                self.view.close()

    def _run(self, bindings: Sequence[PyBinding]) -> list[Outcome]:
        out: list[Outcome] = []
        for binding in bindings:
            started = time.monotonic()
            if self.deadline is not None and started > self.deadline:
                decisions: tuple[EngineDecision, ...] = (
                    _error(binding.program.failure_policy, "not evaluated: the evaluation deadline passed"),
                )
            else:
                decisions = tuple(self._validate(binding))
            out.append(Outcome(decisions, time.monotonic() - started))
        return out

    def _eval(
        self,
        part: CompiledPart,
        binding: PyBinding,
        activation: Any,
        budget: CostBudget,
        where: tuple[Part, int, str] = ("validation", 0, ""),
    ) -> Any:
        """The value, or a _Failure worded as activation.go Evaluate words it (recorded when tracing)."""
        scope = "conditions" if where[0] == "matchCondition" else "validations"
        try:
            value = self._value(part, binding, activation, budget)
        except OutOfBudget:
            self._record(where, _Failure(OUT_OF_BUDGET), scope)
            raise
        self._record(where, value, scope)
        return value

    def _value(self, part: CompiledPart, binding: PyBinding, activation: Any, budget: CostBudget) -> Any:
        if part.compile_error is not None:
            return _Failure(f"compilation error: {part.compile_error}")
        if part.eval_error is not None:
            return _Failure(f"expression '{part.source}' resulted in error: {part.eval_error}")
        self.state.budget = budget
        try:
            value = self.engine.evaluate(part.program, activation, binding.params, binding.constraint)
        finally:
            self.state.budget = None
        if isinstance(value, CelError):
            return _Failure(f"expression '{part.source}' resulted in error: {value.message}")
        return value

    def _validate(self, binding: PyBinding) -> list[EngineDecision]:
        template = binding.program
        f = template.failure_policy
        try:
            if template.conditions:
                matched = self._match(binding)
                if isinstance(matched, _Failure):
                    return [_error(f, matched.text)]
                if not matched:
                    return []
            budget = CostBudget(PER_CALL_LIMIT, self.deadline)
            try:
                activation = self._activations(template)[0]
            except InventoryError as err:
                return [_error(f, f"cannot read synced data: {err}")]
            try:
                values = [
                    self._eval(v, binding, activation, budget, ("validation", i, ""))
                    for i, v in enumerate(template.validations)
                ]
            except OutOfBudget:
                return [_error(f, OUT_OF_BUDGET)]
            decisions: list[EngineDecision] = []
            for i, value in enumerate(values):
                if isinstance(value, _Failure):
                    decisions.append(_error(f, value.text))
                elif value is not True:
                    try:
                        message = self._message(binding, i, budget)
                    except OutOfBudget:
                        return [
                            _error(f, v.text)
                            if isinstance(v, _Failure)
                            else _error(f, "failed messageExpression: " + OUT_OF_BUDGET)
                            for v in values
                        ]
                    decisions.append(EngineDecision("deny", "deny", message))
            return decisions
        except DeadlinePassed:
            return [_error(f, "not evaluated: the evaluation deadline passed")]

    def _match(self, binding: PyBinding) -> bool | _Failure:
        """matcher.Match: False when a condition is false; the errors under failurePolicy Fail."""
        template = binding.program
        budget = CostBudget(MATCH_CONDITIONS_BUDGET, self.deadline)
        errors: list[str] = []
        try:
            activation = self._activations(template)[1]
        except InventoryError as err:
            return _Failure(f"cannot read synced data: {err}")
        try:
            for i, condition in enumerate(template.conditions):
                name = template.condition_names[i] if i < len(template.condition_names) else ""
                value = self._eval(condition, binding, activation, budget, ("matchCondition", i, name))
                if isinstance(value, _Failure):
                    errors.append(value.text)
                elif value is False:
                    return False
        except OutOfBudget:
            return _Failure(OUT_OF_BUDGET) if template.failure_policy == "Fail" else False
        if errors:
            if template.failure_policy != "Fail":
                return False
            # utilerrors.NewAggregate(errorList).Error()
            return _Failure(errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")
        return True

    def _message(self, binding: PyBinding, i: int, budget: CostBudget) -> str:
        """validator.go's failure message: the messageExpression's trimmed string (non-empty, one
        line, at most 5 KiB), else the static message, else `failed expression: <expression>`."""
        template = binding.program
        message = ""
        part = template.messages[i]
        if part is not None:
            activation = self._activations(template)[0]
            text = self._eval(part, binding, activation, budget, ("messageExpression", i, ""))
            if isinstance(text, str):
                message = text.strip()
                if len(message.encode()) > MAX_MESSAGE_BYTES or "\n" in message:
                    message = ""
        if not message and template.static_messages[i]:
            message = template.static_messages[i].strip()
        if not message:
            message = f"failed expression: {template.validations[i].source.strip()}"
        return message


def _part_source(template: PyTemplate, part: PartTrace) -> str:
    if part.part == "validation":
        return template.validations[part.index].source
    if part.part == "matchCondition":
        return template.conditions[part.index].source
    if part.part == "messageExpression":
        message = template.messages[part.index]
        return message.source if message is not None else ""
    return ""


def _error(failure_policy: str, message: str) -> EngineDecision:
    return EngineDecision("admit" if failure_policy == "Ignore" else "deny", "error", message)
