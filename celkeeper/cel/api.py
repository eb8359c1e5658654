"""The engine contract every CEL engine implements. Nothing here imports an engine.

Template level (what deciding uses; Gatekeeper's K8sNativeValidation driver on Kubernetes' validator):

- `Engine.compile_template(source: TemplateSource) -> TemplateProgram`: compiles a template's
  validations, messageExpressions, variables and match conditions once. Parts that do not compile
  do not refuse the template: they are listed in `program.diagnostics` (part, index, message,
  line:col within the expression) and fail at request time as Gatekeeper's do (`compilation
  error: ...`). Raises `TemplateRefused` only for what Gatekeeper refuses (a reserved variable
  name, a failurePolicy other than Fail or Ignore, ...). Callers cache programs by content.
- `Engine.bind(program, constraint) -> Binding`: a constraint object bound to a template program
  (decoded once; parameters are bound without recompiling).
- `Engine.open_inventory(path) -> Inventory`: the synced data store at `path` (celkeeper.cel.inventory),
  opened read-only; a RequestInput carrying it lets the templates that read synced data (those
  compiled with `TemplateSource.data_kinds`) read it through `data` during that request, in one
  consistent read. Raises `InventoryError` when it cannot be opened.
- `Engine.validate(request: RequestInput, bindings, timeout) -> list[Outcome]`: one call per
  request decides every binding given (those Python's matching selected), in order: per binding,
  the decisions of Kubernetes' validator.Validate that do not admit (a false
  validation with its message; an evaluation error, whose action follows the template's
  failurePolicy). Each binding has Gatekeeper's per-constraint cost budget; an error or an
  exhausted budget affects only its own binding. `timeout` (seconds, 0: none) bounds the call:
  bindings not reached in time get an evaluation error under their failurePolicy. Raises
  `celkeeper.errors.ReviewError` when the request itself cannot be read (as Gatekeeper's driver
  fails the whole query).

- `Engine.explain(request, bindings, timeout) -> list[Explained]`: what `validate` decides, by the same
  code on the same inputs (`Explained.outcome` is `validate`'s Outcome), and for each binding the result
  of every part it evaluated on the way (`PartTrace`: match conditions, variables, validations,
  messageExpressions: value or error, cost), plus the template's variables the decision did not read,
  evaluated afterwards to be shown (`evaluated=False`). For explanations only, never on the webhook's
  path.

Expression level (tests, goldens, explanations):

- `Engine.compile(source, variables=...) -> Program` compiles one expression as a template variable
  is compiled (Gatekeeper's environment: `object`, `oldObject`, `request`, `namespaceObject`,
  `params` = the constraint, `variables.params`, `variables.anyObject`, then `variables`, name ->
  expression, in order), of any type, or raises `CelCompileError` (1-based line:col within
  `source`; a variable that does not compile raises `VariableCompileError`).
- `Engine.activation(object=, old_object=, request=, namespace_object=)`: the inputs of one request
  as CEL sees them; `Engine.evaluate(program, activation, params, constraint)` -> the value as
  plain Python data (bool, int, `Uint`, float, str, bytes, None, list, dict, datetime, timedelta,
  `TypeValue`, Kubernetes library values) or a `CelError`; never raises for CEL errors.
  `constraint` is bound to `params` (`params`, the constraint's spec.parameters, stands for a
  constraint `{spec: {parameters: params}}` when no constraint is given).
- `Program.output_type` is the checked type, formatted as cel-go does: 'bool', 'list(dyn)', ...
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol, TypeAlias

from celkeeper.cel.inventory import Gvk
from celkeeper.errors import CelCompileError, CelkeeperError
from celkeeper.model import JsonValue

#: the parts of a K8sNativeValidation source that hold CEL
Part = Literal["variable", "validation", "messageExpression", "matchCondition"]

CelValue: TypeAlias = Any
"""A value as `Engine.evaluate` gives it: a JSON value (model.JsonValue), or one of CEL's own (bytes,
a `Uint`, datetime for timestamps, timedelta for durations, the Kubernetes libraries' quantities,
IPs, CIDRs, URLs, semvers, optionals). `Any`: callers show it, compare it or convert it to JSON
(review.explain.jsonable), they never read it as one type."""


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

    raw: Mapping[str, JsonValue]
    validations: tuple[ValidationSource, ...]
    variables: tuple[NamedSource, ...] = ()
    match_conditions: tuple[NamedSource, ...] = ()
    failure_policy: Literal["Fail", "Ignore"] = "Fail"
    # the kinds of synced data the template reads (celkeeper's extension, declared with Gatekeeper's
    # requires-sync-data annotation): its expressions see `data`; none: Gatekeeper's environment
    data_kinds: tuple[Gvk, ...] = ()


class TemplateRefused(CelkeeperError):
    """Gatekeeper would refuse this source (e.g. a reserved variable name): no program for it."""


@dataclass(frozen=True)
class RequestInput:
    """One admission request as an engine receives it.

    `request`: the AdmissionRequest's fields other than object and oldObject (kind, resource,
    subResource, name, namespace, operation, userInfo, dryRun, options; any extra fields are
    ignored); `object`/`old_object`: the objects (None: absent; the engine unsets object on DELETE,
    as Gatekeeper does); `namespace`: the request's Namespace object as stored, or None."""

    request: Mapping[str, JsonValue]
    object: JsonValue
    old_object: JsonValue
    namespace: Mapping[str, JsonValue] | None = None
    inventory: Inventory | None = None  # opened by this engine (Engine.open_inventory); None: no data


@dataclass(frozen=True)
class EngineDecision:
    """A decision of Kubernetes' validator that does not admit: `evaluation` "deny" (a validation
    is false: `message` is its message) or "error" (`message` is the error); `action` "deny", or
    "admit" for an error under failurePolicy Ignore (no violation)."""

    action: Literal["deny", "admit"]
    evaluation: Literal["deny", "error"]
    message: str


class Outcome(NamedTuple):
    """What `Engine.validate` says about one binding: its non-admitting decisions, and the seconds
    spent on it (for metrics). A named tuple: one is made per binding and request, and a frozen
    dataclass costs three times as much to make."""

    decisions: tuple[EngineDecision, ...]
    seconds: float = 0.0


class InventoryError(CelkeeperError):
    """The synced data store cannot be opened (missing, unreadable, another format)."""


class Inventory(Protocol):
    """A synced data store opened by an engine."""

    @property
    def path(self) -> str: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class PartTrace:
    """What one part of a template gave while a constraint was decided.

    `value`: as `Engine.evaluate` returns values (None with an error, and for null); `error`: the
    error as Kubernetes words it (a budget that ran out stops the parts after it: they are absent);
    `evaluated`: False for a variable the decision did not read (evaluated afterwards, to be shown);
    `scope`: "validations", or "conditions" (match conditions see no namespaceObject); `cost`: the
    runtime cost it reported (a part's includes the variables it read first), None when unknown."""

    part: Part
    index: int
    name: str = ""
    value: CelValue = None
    error: str | None = None
    evaluated: bool = True
    scope: str = "validations"
    cost: int | None = None


@dataclass(frozen=True)
class Explained:
    """`Engine.explain` about one binding: `validate`'s Outcome and the trace of its parts, in the order
    they were evaluated."""

    outcome: Outcome
    parts: tuple[PartTrace, ...] = ()


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
    """Per-request inputs (object, oldObject, request, namespaceObject) of expression evaluation."""


class TemplateProgram(Protocol):
    """A compiled template."""

    @property
    def failure_policy(self) -> str:
        """'Fail' or 'Ignore'."""

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        """The compile problems of its parts (each fails at request time)."""


class Binding(Protocol):
    """A constraint bound to a template program."""

    @property
    def program(self) -> TemplateProgram: ...


class Engine(Protocol):
    @property
    def name(self) -> str:
        """'cel-go' or 'cel-python'."""

    def compile_template(self, source: TemplateSource) -> TemplateProgram: ...

    def bind(self, program: TemplateProgram, constraint: Mapping[str, JsonValue]) -> Binding: ...

    def open_inventory(self, path: str) -> Inventory: ...

    def validate(
        self, request: RequestInput, bindings: Sequence[Binding], timeout: float
    ) -> list[Outcome]: ...

    def explain(
        self, request: RequestInput, bindings: Sequence[Binding], timeout: float
    ) -> list[Explained]: ...

    def compile(self, source: str, variables: Mapping[str, str] | None = None) -> Program: ...

    def activation(
        self,
        *,
        object: JsonValue,
        old_object: JsonValue,
        request: Mapping[str, JsonValue] | None,
        namespace_object: JsonValue = None,
    ) -> Activation: ...

    def evaluate(
        self,
        program: Program,
        activation: Activation,
        params: JsonValue = None,
        constraint: JsonValue = None,
    ) -> CelValue: ...
