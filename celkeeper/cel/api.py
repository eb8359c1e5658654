"""The engine interface every CEL backend implements. Nothing here imports an engine.

Contract (the rest of celkeeper relies on exactly this):

- `Engine.compile(source, variables=...)` compiles once, in the Kubernetes CEL environment, and
  returns a `Program` or raises `celkeeper.errors.CelCompileError` (1-based line and column within
  `source`; `limit` set when a safety limit was exceeded). Compiling is the expensive step: callers
  cache programs by content.
- `variables` are a template's `spec...source.variables` in order (name -> expression source). Inside
  `source`, `variables.<name>` refers to them; `variables.params` (the constraint's parameters, or
  null) and `variables.anyObject` (oldObject when object is null, as on DELETE; else object) are built
  in. A variable is evaluated only when an expression uses it. Variable expressions may use earlier
  variables.
- `Engine.activation(...)` builds the per-request activation; it is shared by every program evaluated
  for that request and converts request JSON lazily (only what expressions touch).
- `Engine.evaluate(program, activation, params)` never raises for CEL errors: it returns the value
  as plain Python data (bool, int, float, str, bytes, None, list, dict, datetime, timedelta) or a
  `CelError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class CelError:
    """A CEL evaluation error, as a value (e.g. 'no such key: spec')."""

    message: str

    def __str__(self) -> str:
        return self.message


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

    def evaluate(self, program: Program, activation: Activation, params: Any = None) -> Any | CelError: ...
