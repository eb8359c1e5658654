"""Compiling templates: each template's CEL compiled once by the engine, every problem located.

`TemplateCompiler(engine)` is long-lived (one per process or worker). It caches what compiling
produced by content hash (the K8sNativeValidation source, its place in the document and the engine),
so loading unchanged content again - from another file, after a reload, or a new revision of the
object with only metadata changed - does not compile again; it also keeps the constraints bound to
them (`bind`), by content. The caches live in the object (no module globals); they are bounded and
safe to share between threads.

A part that does not compile does not refuse the template (Gatekeeper loads it): at request time it
fails as Gatekeeper's does (`compilation error: ...`, a violation under failurePolicy Fail), and its
problem is reported here with its field path and line:col (lint, template status, `verify -v`).
Only what Gatekeeper itself refuses (the engine's TemplateRefused) leaves the template out.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

import orjson

from celkeeper.cel.api import (
    Binding,
    Diagnostic,
    Engine,
    NamedSource,
    TemplateProgram,
    TemplateRefused,
    TemplateSource,
    ValidationSource,
)
from celkeeper.cel.inventory import Requirement, requirement_kinds
from celkeeper.documents import Document, index_path, key_path
from celkeeper.errors import CelkeeperError, CompileWarning, Location, TemplateError, TemplateWarning
from celkeeper.model import FailurePolicy, JsonValue
from celkeeper.templates.parameters import ParameterSchema, Verdicts
from celkeeper.templates.spec import TemplateSpec, parse_template

_WHAT = {
    "variable": "variable {name!r}",
    "validation": "validation",
    "messageExpression": "messageExpression",
    "matchCondition": "match condition {name!r}",
}
_LIST_KEY = {
    "variable": "variables",
    "validation": "validations",
    "messageExpression": "validations",
    "matchCondition": "matchCondition",
}
_NOTE = {
    "messageExpression": " (the message falls back to `message`)",
}


@dataclass(frozen=True, eq=False)
class CompiledTemplate:
    """A template ready to evaluate. `errors` lists its warnings: compile problems (each broken part
    fails at request time, as in Gatekeeper) and what Gatekeeper ignores; it is still enforced."""

    name: str
    kind: str
    failure_policy: FailurePolicy
    program: TemplateProgram
    operations: frozenset[str] | None  # None: every operation
    parameters: ParameterSchema
    document: Document
    errors: tuple[TemplateWarning, ...] = ()
    code_hash: str = ""
    # the synced data it reads (celkeeper.cel.inventory): each requirement met by any of its kinds
    requirements: tuple[Requirement, ...] = ()
    # what it was compiled from: every part's expression and field path (explanations locate them)
    spec: TemplateSpec | None = field(default=None, compare=False, repr=False)

    @property
    def reads_data(self) -> bool:
        return bool(self.requirements)

    @property
    def compiles(self) -> bool:
        """Every CEL part compiles (warnings of the source aside)."""
        return not self.program.diagnostics

    def applies_to_operation(self, operation: str) -> bool:
        return self.operations is None or operation in self.operations


def template_source(spec: TemplateSpec) -> TemplateSource:
    """What the engine compiles: the source as written and its parts as celkeeper read them."""
    return TemplateSource(
        raw=spec.source,
        validations=tuple(
            ValidationSource(
                v.expression.source,
                v.message,
                v.message_expression.source if v.message_expression is not None else None,
            )
            for v in spec.validations
        ),
        variables=tuple(NamedSource(v.name, v.expression.source) for v in spec.variables),
        match_conditions=tuple(NamedSource(c.name, c.expression.source) for c in spec.match_conditions),
        failure_policy="Ignore" if spec.failure_policy is FailurePolicy.IGNORE else "Fail",
        data_kinds=requirement_kinds(spec.requirements),
    )


class TemplateCompiler:
    """Compiles templates with one engine, caching programs and bindings by content. Thread-safe."""

    def __init__(
        self,
        engine: Engine,
        max_entries: int = 4096,
        max_bindings: int = 65536,
        *,
        verdicts: Verdicts | None = None,
    ) -> None:
        """`verdicts`: known results of the parameter schemas' checks (templates.parameters.Verdicts)."""
        self._engine = engine
        self._verdicts = verdicts
        self._max_entries = max_entries
        self._max_bindings = max_bindings
        self._cache: OrderedDict[str, TemplateProgram | TemplateRefused] = OrderedDict()
        self._bindings: OrderedDict[tuple[int, bytes], Binding] = OrderedDict()
        self._compiling: dict[str, threading.Event] = {}  # sources being compiled, by key
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def engine(self) -> Engine:
        return self._engine

    def load(self, document: Document) -> tuple[CompiledTemplate | None, list[CelkeeperError]]:
        """Read, check and compile a ConstraintTemplate document.

        Returns the template (None when it is structurally invalid or Gatekeeper would refuse it)
        and every problem found: structural errors, or the compile problems of a template that is
        still returned.
        """
        spec, errors = parse_template(document, self._verdicts)
        if spec is None:
            return None, list(errors)
        try:
            template = self.compile(spec)
        except TemplateRefused as err:
            return None, [
                spec.document.error(TemplateError, f"template {spec.name}: {err.message}", spec.source_path)
            ]
        return template, list(template.errors)

    def parse(self, document: Document) -> TemplateSpec | None:
        """The document's spec as `load` reads it (None when it has structural errors: `load` reports
        them)."""
        return parse_template(document, self._verdicts)[0]

    def prepare(self, spec: TemplateSpec) -> None:
        """Compile the spec's source now, into the cache that `compile` and `load` read (a thread compiling
        ahead of the one loading: the engine compiles without holding the GIL). What compiling found,
        Gatekeeper's refusal included, is reported by `load`."""
        self._program(spec)

    def compile(self, spec: TemplateSpec) -> CompiledTemplate:
        """The compiled template; raises TemplateRefused when Gatekeeper would refuse it."""
        program = self._program(spec)
        if isinstance(program, TemplateRefused):
            raise program
        return CompiledTemplate(
            name=spec.name,
            kind=spec.kind,
            failure_policy=spec.failure_policy,
            program=program,
            operations=spec.operations,
            parameters=spec.parameters,
            document=spec.document,
            errors=spec.warnings
            + tuple(
                sorted(
                    (*spec.warnings, *(_locate(spec, d) for d in program.diagnostics)),
                    key=lambda e: (e.location.line or 0, e.location.column or 0),
                )
            ),
            code_hash=spec.code_hash,
            requirements=spec.requirements,
            spec=spec,
        )

    def _program(self, spec: TemplateSpec) -> TemplateProgram | TemplateRefused:
        """The engine's program of the spec's source (or Gatekeeper's refusal), compiled once: from the
        cache, or compiled here; a thread asking for a source that another thread is compiling waits for
        that compilation rather than compiling it again (compile_ahead's threads and the caller's)."""
        key = f"{self._engine.name}:{spec.code_hash}"
        while True:
            with self._lock:
                program = self._cache.get(key)
                if program is not None:
                    self._cache.move_to_end(key)
                    self.hits += 1
                    return program
                pending = self._compiling.get(key)
                if pending is None:
                    pending = self._compiling[key] = threading.Event()
                    break
            pending.wait()  # compiled by another thread: found in the cache (unless evicted since)
        try:
            try:
                program = self._engine.compile_template(template_source(spec))
            except TemplateRefused as err:
                program = err
            with self._lock:
                self.misses += 1
                self._cache[key] = program
                while len(self._cache) > self._max_entries:
                    self._cache.popitem(last=False)
            return program
        finally:
            with self._lock:
                del self._compiling[key]
            pending.set()

    def bind(self, template: CompiledTemplate, constraint: Mapping[str, JsonValue]) -> Binding:
        """The constraint object bound to the template's program (cached by content)."""
        content = hashlib.sha256(orjson.dumps(constraint, option=orjson.OPT_SORT_KEYS)).digest()
        key = (id(template.program), content)
        with self._lock:
            found = self._bindings.get(key)
            if found is not None and found.program is template.program:
                self._bindings.move_to_end(key)
                return found
        binding = self._engine.bind(template.program, constraint)
        with self._lock:
            self._bindings[key] = binding
            while len(self._bindings) > self._max_bindings:
                self._bindings.popitem(last=False)
        return binding


def _path(spec: TemplateSpec, d: Diagnostic) -> str:
    item = index_path(key_path(spec.source_path, _LIST_KEY[d.part]), d.index)
    return key_path(item, "messageExpression" if d.part == "messageExpression" else "expression")


def _locate(spec: TemplateSpec, d: Diagnostic) -> TemplateWarning:
    """A part that does not compile, located. What decides (a validation, a variable, a match condition)
    is a CompileWarning; a messageExpression only words its message otherwise (`message` is used): a
    TemplateWarning."""
    kind = TemplateWarning if d.part == "messageExpression" else CompileWarning
    document = spec.document
    what = _WHAT[d.part].format(name=d.name)
    message = f"template {spec.name}: {what} does not compile: {d.message}{_NOTE.get(d.part, '')}"
    path = _path(spec, d)
    base = document.location(path)
    if d.line is None or d.column is None:
        return kind(message, base)
    inner = f" (at {d.line}:{d.column} in the expression)"
    position = document.expression_position(path, d.line, d.column)
    if position is None:
        return kind(message + inner, base)
    return kind(
        message + inner,
        Location(
            file=base.file, document=base.document, path=base.path, line=position[0], column=position[1]
        ),
    )
