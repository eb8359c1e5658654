"""Compiling templates: every CEL expression compiled once, every error reported and located.

`TemplateCompiler(engine)` is long-lived (one per process or worker). It caches what compiling
produced by content hash (the K8sNativeValidation source, its place in the document and the engine),
so loading unchanged content again - from another file, after a reload, or a new revision of the
object with only metadata changed - does not compile again. The cache lives in the object (no module
globals); it is bounded and safe to share between threads.

Type rules (Kubernetes' CEL admission compiler, plugin/cel/compile.go, as Gatekeeper uses it): a
validation and a match condition must be of type bool, a messageExpression of type string; `dyn` is
not accepted. An expression that does not compile still belongs to the template: at request time it
fails as Gatekeeper fails (`compilation error: ...`, a violation under failurePolicy Fail).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from celkeeper.cel.api import Engine, Program
from celkeeper.documents import Document
from celkeeper.errors import CelCompileError, CelkeeperError, Location, TemplateError
from celkeeper.model import FailurePolicy
from celkeeper.templates.parameters import ParameterSchema
from celkeeper.templates.source import Expression
from celkeeper.templates.spec import TemplateSpec, parse_template


@dataclass(frozen=True)
class CompiledExpression:
    """A compiled expression, or the error text Gatekeeper reports when it is evaluated."""

    source: str
    path: str
    program: Program | None
    error: str | None = None  # set exactly when program is None


@dataclass(frozen=True)
class CompiledValidation:
    expression: CompiledExpression
    message: str | None
    message_expression: CompiledExpression | None


@dataclass(frozen=True)
class CompiledMatchCondition:
    name: str
    expression: CompiledExpression


@dataclass(frozen=True)
class _Problem:
    """A compile problem relative to the document (located per document when a template is built)."""

    path: str
    message: str
    line: int | None = None  # position inside the expression, when known
    column: int | None = None


@dataclass(frozen=True)
class _CompiledCode:
    validations: tuple[CompiledValidation, ...]
    match_conditions: tuple[CompiledMatchCondition, ...]
    problems: tuple[_Problem, ...]


@dataclass(frozen=True, eq=False)
class CompiledTemplate:
    """A template ready to evaluate. `errors` lists its compile errors (it is still usable)."""

    name: str
    kind: str
    failure_policy: FailurePolicy
    validations: tuple[CompiledValidation, ...]
    match_conditions: tuple[CompiledMatchCondition, ...]
    operations: frozenset[str] | None  # None: every operation
    parameters: ParameterSchema
    document: Document
    errors: tuple[TemplateError, ...] = ()
    code_hash: str = ""

    @property
    def compiles(self) -> bool:
        return not self.errors

    def applies_to_operation(self, operation: str) -> bool:
        return self.operations is None or operation in self.operations


class TemplateCompiler:
    """Compiles templates with one engine, caching by content. Thread-safe."""

    def __init__(self, engine: Engine, max_entries: int = 4096) -> None:
        self._engine = engine
        self._max_entries = max_entries
        self._cache: OrderedDict[str, _CompiledCode] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def engine(self) -> Engine:
        return self._engine

    def load(self, document: Document) -> tuple[CompiledTemplate | None, list[CelkeeperError]]:
        """Read, check and compile a ConstraintTemplate document.

        Returns the template (None when it is structurally invalid) and every problem found:
        structural errors, or the compile errors of a template that is still returned.
        """
        spec, errors = parse_template(document)
        if spec is None:
            return None, list(errors)
        template = self.compile(spec)
        return template, list(template.errors)

    def compile(self, spec: TemplateSpec) -> CompiledTemplate:
        key = f"{self._engine.name}:{spec.code_hash}"
        with self._lock:
            code = self._cache.get(key)
            if code is not None:
                self._cache.move_to_end(key)
                self.hits += 1
        if code is None:
            code = self._compile_code(spec)
            with self._lock:
                self.misses += 1
                self._cache[key] = code
                while len(self._cache) > self._max_entries:
                    self._cache.popitem(last=False)
        return CompiledTemplate(
            name=spec.name,
            kind=spec.kind,
            failure_policy=spec.failure_policy,
            validations=code.validations,
            match_conditions=code.match_conditions,
            operations=spec.operations,
            parameters=spec.parameters,
            document=spec.document,
            errors=tuple(_locate(spec, problem) for problem in code.problems),
            code_hash=spec.code_hash,
        )

    # -- compiling --------------------------------------------------------------------------------
    def _compile_code(self, spec: TemplateSpec) -> _CompiledCode:
        problems: list[_Problem] = []
        good: dict[str, str] = {}
        broken: dict[str, str] = {}  # variable name -> why it does not compile
        for var in spec.variables:
            compiled = self._compile(var.expression, good, broken, None, f"variable {var.name!r}", problems)
            if compiled.program is not None:
                good[var.name] = var.expression.source
            else:
                broken[var.name] = compiled.error or "does not compile"
        validations = []
        for validation in spec.validations:
            expression = self._compile(validation.expression, good, broken, "bool", "validation", problems)
            message_expression = None
            if validation.message_expression is not None:
                message_expression = self._compile(
                    validation.message_expression, good, broken, "string", "messageExpression", problems
                )
            validations.append(CompiledValidation(expression, validation.message, message_expression))
        conditions = [
            CompiledMatchCondition(
                condition.name,
                self._compile(
                    condition.expression,
                    good,
                    broken,
                    "bool",
                    f"match condition {condition.name!r}",
                    problems,
                ),
            )
            for condition in spec.match_conditions
        ]
        return _CompiledCode(tuple(validations), tuple(conditions), tuple(problems))

    def _compile(  # noqa: PLR0917
        self,
        expression: Expression,
        variables: Mapping[str, str],
        broken: Mapping[str, str],
        want: str | None,
        what: str,
        problems: list[_Problem],
    ) -> CompiledExpression:
        for name, why in broken.items():
            if re.search(rf"\bvariables\s*\.\s*{re.escape(name)}\b", expression.source):
                # the variable's own error is reported; this expression fails as Kubernetes' does
                return CompiledExpression(
                    expression.source,
                    expression.path,
                    None,
                    f"composited variable {name!r} fails to compile: {why}",
                )
        try:
            program = self._engine.compile(expression.source, variables=dict(variables))
        except CelCompileError as err:
            problems.append(
                _Problem(expression.path, f"{what} does not compile: {err.message}", err.line, err.column)
            )
            return CompiledExpression(
                expression.source,
                expression.path,
                None,
                f"compilation error: compilation failed: {err.message}",
            )
        if want is not None and program.output_type != want:
            problems.append(
                _Problem(
                    expression.path,
                    f"{what} must evaluate to {want}, but its type is {program.output_type}"
                    + (
                        " (convert it, e.g. with string(...) or a comparison)"
                        if program.output_type == "dyn"
                        else ""
                    ),
                )
            )
            return CompiledExpression(
                expression.source, expression.path, None, f"compilation error: must evaluate to {want}"
            )
        return CompiledExpression(expression.source, expression.path, program)


def _locate(spec: TemplateSpec, problem: _Problem) -> TemplateError:
    document = spec.document
    message = f"template {spec.name}: {problem.message}"
    base = document.location(problem.path)
    if problem.line is None or problem.column is None:
        return TemplateError(message, base)
    inner = f" (at {problem.line}:{problem.column} in the expression)"
    position = document.expression_position(problem.path, problem.line, problem.column)
    if position is None:
        return TemplateError(message + inner, base)
    return TemplateError(
        message + inner,
        Location(
            file=base.file, document=base.document, path=base.path, line=position[0], column=position[1]
        ),
    )
