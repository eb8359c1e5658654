"""The engine interface every CEL backend implements. Nothing here imports an engine.

Contract (the rest of celkeeper relies on exactly this):

- `Engine.compile(source, variables=...)` compiles once, in the Kubernetes CEL environment, and
  returns a `Program` or raises `celkeeper.errors.CelCompileError` (1-based line and column within
  `source`; `limit` set when a safety limit was exceeded). Compiling is the expensive step: callers
  cache programs by content.
- `variables` are a template's `spec...source.variables` in order (name -> expression source). Inside
  `source`, `variables.<name>` refers to them; `variables.params` (the constraint's parameters, or
  null) and `variables.anyObject` (Gatekeeper's `has(request.operation) && request.operation ==
  "DELETE" && object == null ? oldObject : object`) are built in. A variable is evaluated only when
  an expression uses it, at most once per evaluation. Variable expressions may use earlier
  variables. A variable that does not compile raises `celkeeper.cel.VariableCompileError` (a
  CelCompileError with `.variable`, the name; line/column within that variable's expression).
  Compiled variables are cached by the engine, so compiling each validation of a template with
  the same `variables` mapping is cheap.
- `Engine.activation(...)` builds the per-request activation; it is shared by every program evaluated
  for that request and converts request JSON lazily (only what expressions touch).
- `Engine.evaluate(program, activation, params, constraint)` never raises for CEL errors: it returns
  the value as plain Python data (bool, int, float, str, bytes, None, list, dict, datetime,
  timedelta; Kubernetes values such as quantities as celkeeper.cel.k8slib objects) or a `CelError`.
  `params` is the constraint's `spec.parameters` (`variables.params`); `constraint` is the whole
  constraint object, which Gatekeeper binds to the top-level `params` variable (null if omitted).
- `Engine.evaluate_all(programs, activation, params, constraint)` (optional: callers fall back to
  `evaluate` when an engine lacks it) is `[evaluate(p, ...) for p in programs]`, possibly cheaper:
  programs compiled with the same `variables` (a template's validations) may be evaluated together,
  sharing those variables' values; the results are the same as one by one (errors included: an
  engine falls back to one by one when any fails).
- `Engine.prepare(programs, bindings)` -> an opaque prepared value or None, and
  `Engine.evaluate_prepared(prepared, activation)` -> one list of booleans per binding, or None:
  boolean programs compiled with the same variables (a template's validations) for every
  (params, constraint) of `bindings` at once (several constraints of one template), compiled ahead
  of time (slow: call it when policies load). The values are `[evaluate(p, ...) for p in programs]`
  for each binding; None when any of them errs or is not a boolean (evaluate one by one for the
  details). An engine that cannot prepare returns None from `prepare`.
- `Program.output_type` is the checked type of the expression, formatted as cel-go does:
  'bool', 'string', 'int', 'dyn', 'list(dyn)', 'map(string, dyn)', 'optional_type(string)',
  'kubernetes.Quantity', ...
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from celkeeper.errors import CelCompileError, CelkeeperError

#: the parts of a K8sNativeValidation source that hold CEL
Part = Literal["variable", "validation", "messageExpression", "matchCondition"]


@dataclass(frozen=True)
class CelError:
    """A CEL evaluation error, as a value (e.g. 'no such key: spec')."""

    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class TypeValue:
    """A CEL type as a value (`type(x)`), by its name as cel-go prints it: 'int', 'map', 'net.IP'."""

    name: str


@dataclass(frozen=True)
class LibraryValue:
    """A Kubernetes library value (quantity, url, ip, cidr, semver, format) returned by the cel-go
    engine: its kind and its canonical text as Kubernetes prints it (String(); a format's Name)."""

    kind: str
    text: str


@dataclass(frozen=True)
class Diagnostic:
    """One compile problem of a template part: lint, template status and `verify -v` show it. A
    template with diagnostics still loads (each broken part fails at request time, as Gatekeeper's
    does). line/column: 1-based within the part's expression, None when unknown."""

    part: Part
    index: int  # the part's position in its list (validations[i], variables[i], ...)
    name: str  # the variable's or match condition's name; "" for validations
    message: str
    line: int | None = None
    column: int | None = None


@dataclass(frozen=True)
class ValidationSource:
    expression: str
    message: str | None = None
    message_expression: str | None = None


@dataclass(frozen=True)
class NamedSource:
    """A variable or a match condition."""

    name: str
    expression: str


@dataclass(frozen=True)
class TemplateSource:
    """A template's K8sNativeValidation source: `raw` exactly as written (the map under
    `code[].source`, which the cel-go engine reads as Gatekeeper does) and its parts as celkeeper
    reads them (which the cel-python engine compiles)."""

    raw: Mapping[str, Any]
    validations: tuple[ValidationSource, ...]
    variables: tuple[NamedSource, ...] = ()
    match_conditions: tuple[NamedSource, ...] = ()
    failure_policy: Literal["Fail", "Ignore"] = "Fail"


class TemplateRefused(CelkeeperError):
    """Gatekeeper would refuse this source (e.g. a reserved variable name): no program for it."""


@dataclass(frozen=True)
class RequestInput:
    """One admission request as an engine receives it.

    `request`: the AdmissionRequest's fields other than object and oldObject (kind, resource,
    subResource, name, namespace, operation, userInfo, dryRun, options; any extra fields are
    ignored); `object`/`old_object`: the objects (None: absent; the engine unsets object on DELETE,
    as Gatekeeper does); `namespace`: the request's Namespace object as stored, or None."""

    request: Mapping[str, Any]
    object: Any
    old_object: Any
    namespace: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class EngineDecision:
    """A decision of Kubernetes' validator that does not admit: `evaluation` "deny" (a validation
    is false: `message` is its message) or "error" (`message` is the error); `action` "deny", or
    "admit" for an error under failurePolicy Ignore (no violation)."""

    action: Literal["deny", "admit"]
    evaluation: Literal["deny", "error"]
    message: str


class VariableCompileError(CelCompileError):
    """A template variable's expression does not compile; line/column are within that expression."""

    def __init__(self, variable: str, error: CelCompileError) -> None:
        super().__init__(f"variable {variable!r}: {error.message}", error.line, error.column, error.limit)
        self.variable = variable


class Program(Protocol):
    @property
    def source(self) -> str:
        """The expression as written."""

    @property
    def output_type(self) -> str:
        """The checked CEL type of the result: 'bool', 'string', 'int', 'dyn', 'list(dyn)', ..."""


class Activation(Protocol):
    """Per-request inputs (object, oldObject, request, namespaceObject), converted lazily."""


class Engine(Protocol):
    @property
    def name(self) -> str:
        """'cel-expr-python' or 'cel-python'."""

    def compile(self, source: str, variables: Mapping[str, str] | None = None) -> Program: ...

    def activation(
        self,
        *,
        object: Any,
        old_object: Any,
        request: Mapping[str, Any],
        namespace_object: Any = None,
    ) -> Activation: ...

    def evaluate(
        self, program: Program, activation: Activation, params: Any = None, constraint: Any = None
    ) -> Any | CelError: ...

    def evaluate_all(
        self,
        programs: Sequence[Program],
        activation: Activation,
        params: Any = None,
        constraint: Any = None,
    ) -> list[Any | CelError]: ...

    def prepare(self, programs: Sequence[Program], bindings: Sequence[tuple[Any, Any]]) -> Any | None: ...

    def evaluate_prepared(self, prepared: Any, activation: Activation) -> list[list[bool]] | None: ...
