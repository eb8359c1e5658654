"""The offline tools' lazy engine: templates compiled only when an object needs them, what compiling them
found known from earlier runs (a disk cache, by content), so that `test -f one.yaml policies/` compiles
the templates whose constraints can select that object and no other.

    engine = LazyEngine(lambda: get_engine("cel-go"), DiskPrograms.default("cel-go"))
    PolicyBackend("cel-go", loaded=engine)

A compiled CEL program cannot be kept across runs; what loading a template needs from its compilation
can: its diagnostics (each part that does not compile, reported by lint, test and audit), its
failurePolicy, and whether Gatekeeper refuses it, and for each constraint bound to it whether it binds.
With those known, `compile_template` and `bind` return stand-ins at once; `validate` and `explain`
compile and bind the stand-ins they are given (once each) and pass the real ones to the engine. A
template the cache does not know is compiled at once, as before, and what it found stored.

The facts are named by a digest of the template's source (cel.api.TemplateSource: everything the engine
compiles) and, for a binding, of the constraint, in a folder named by what words them: the engine's
name, the native library (its path, size and modification time) and the Python module that reads its
answers (gator.verdicts' DiskStore: written atomically, bounded, pruned). Only the cel-go engine's facts
are kept (`DiskPrograms.default` gives None for another: it compiles at once, as before).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import cast

import orjson

from celkeeper.cel.api import (
    Activation,
    Binding,
    CelValue,
    Diagnostic,
    Engine,
    Explained,
    Inventory,
    Outcome,
    Program,
    RequestInput,
    TemplateProgram,
    TemplateRefused,
    TemplateSource,
)
from celkeeper.gator.verdicts import DiskStore, cache_root
from celkeeper.model import JsonValue
from celkeeper.native.locate import find_library

#: names the facts' format: bump when what is stored changes
PROGRAMS_REVISION = "1"


def _identity(engine: str) -> str | None:
    """What words an engine's compile facts: the native library and the module reading its answers."""
    library, _ = find_library()
    reader = importlib.util.find_spec("celkeeper.cel.celgo.engine")
    if library is None or reader is None or reader.origin is None:
        return None
    digest = hashlib.sha256(f"{PROGRAMS_REVISION}\0{engine}".encode())
    for path in (str(library), reader.origin):
        st = os.stat(path)
        digest.update(f"\0{path}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


class DiskPrograms(DiskStore):
    """What compiling templates and binding constraints found, by content (see the module docstring)."""

    @classmethod
    def default(cls, engine: str) -> DiskPrograms | None:
        """The store of `engine`'s facts; None when the cache is off or the engine's are not kept."""
        root = cache_root()
        if root is None or engine != "cel-go":
            return None
        try:
            identity = _identity(engine)
        except OSError:
            return None
        return cls(root / "programs" / identity) if identity is not None else None


def source_key(source: TemplateSource) -> str:
    """The name of a template source's facts: a digest of its JSON (orjson writes the dataclasses, their
    fields in order, the maps' keys sorted; a tenth of the time of dataclasses.asdict first)."""
    text = orjson.dumps(source, default=_plain, option=orjson.OPT_SORT_KEYS)
    return "template:" + hashlib.sha256(text).hexdigest()


def _plain(value: object) -> object:
    """A Mapping orjson does not write itself (not a dict), as a dict."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _binding_key(template: str, constraint: Mapping[str, JsonValue]) -> str:
    content = hashlib.sha256(orjson.dumps(constraint, option=orjson.OPT_SORT_KEYS)).hexdigest()
    return f"binding:{template}:{content}"


def _diagnostics(value: object) -> tuple[Diagnostic, ...] | None:
    if not isinstance(value, list):
        return None
    found = []
    for item in value:
        if not isinstance(item, dict):
            return None
        try:
            found.append(Diagnostic(**item))
        except TypeError:
            return None
    return tuple(found)


class _Program:
    """A template program: its facts at once, the engine's program when first needed."""

    def __init__(
        self,
        source: TemplateSource,
        key: str,
        failure_policy: str,
        diagnostics: tuple[Diagnostic, ...],
        real: TemplateProgram | None,
    ) -> None:
        self.source = source
        self.key = key
        self._failure_policy = failure_policy
        self._diagnostics = diagnostics
        self.real = real

    @property
    def failure_policy(self) -> str:
        return self._failure_policy

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        return self._diagnostics


class _Binding:
    """A constraint bound to a _Program: the engine's binding when first needed."""

    def __init__(self, program: _Program, constraint: Mapping[str, JsonValue], real: Binding | None) -> None:
        self._program = program
        self.constraint = constraint
        self.real = real

    @property
    def program(self) -> TemplateProgram:
        return self._program


class LazyEngine:
    """An Engine (cel.api) that compiles templates and binds constraints when they are evaluated, their
    facts known from `store` (None: compiled and bound at once, as the engine does). `inner` gives the
    engine (called when first needed: it may be loading on another thread)."""

    def __init__(self, inner: Callable[[], Engine], name: str, store: DiskPrograms | None) -> None:
        self._inner_call = inner
        self._inner: Engine | None = None
        self._name = name
        self._store = store
        self.compiled = 0  # templates compiled in this process (tests and bench/test_startup.py read it)

    @property
    def name(self) -> str:
        return self._name

    @property
    def inner(self) -> Engine:
        if self._inner is None:
            self._inner = self._inner_call()
        return self._inner

    # -- templates and constraints ------------------------------------------------------------------
    def compile_template(self, source: TemplateSource) -> TemplateProgram:
        key = source_key(source)
        facts = self._store.get_json(key) if self._store is not None else None
        if isinstance(facts, dict):
            refused = facts.get("refused")
            if isinstance(refused, str):
                raise TemplateRefused(refused)
            diagnostics = _diagnostics(facts.get("diagnostics"))
            policy = facts.get("failurePolicy")
            if diagnostics is not None and isinstance(policy, str):
                return _Program(source, key, policy, diagnostics, None)
        try:
            real = self._compile(source)
        except TemplateRefused as err:
            if self._store is not None:
                self._store.put_json(key, {"refused": err.message})
            raise
        if self._store is not None:
            self._store.put_json(
                key,
                {"failurePolicy": real.failure_policy, "diagnostics": [asdict(d) for d in real.diagnostics]},
            )
        return _Program(source, key, real.failure_policy, tuple(real.diagnostics), real)

    def _compile(self, source: TemplateSource) -> TemplateProgram:
        self.compiled += 1
        return self.inner.compile_template(source)

    def bind(self, program: TemplateProgram, constraint: Mapping[str, JsonValue]) -> Binding:
        assert isinstance(program, _Program)
        key = _binding_key(program.key, constraint)
        known = self._store.get_json(key) if self._store is not None else None
        if known == "ok":
            return _Binding(program, constraint, None)
        if isinstance(known, str):
            raise ValueError(known)
        try:
            real = self.inner.bind(self._real_program(program), constraint)
        except ValueError as err:
            if self._store is not None:
                self._store.put_json(key, str(err))
            raise
        if self._store is not None:
            self._store.put_json(key, "ok")
        return _Binding(program, constraint, real)

    def _real_program(self, program: _Program) -> TemplateProgram:
        if program.real is None:
            program.real = self._compile(program.source)
        return program.real

    def _real(self, bindings: Sequence[Binding]) -> list[Binding]:
        found = []
        for binding in bindings:
            assert isinstance(binding, _Binding)
            if binding.real is None:
                program = cast(_Program, binding.program)
                binding.real = self.inner.bind(self._real_program(program), binding.constraint)
            found.append(binding.real)
        return found

    # -- evaluation ----------------------------------------------------------------------------------
    def open_inventory(self, path: str) -> Inventory:
        return self.inner.open_inventory(path)

    def validate(self, request: RequestInput, bindings: Sequence[Binding], timeout: float) -> list[Outcome]:
        return self.inner.validate(request, self._real(bindings), timeout)

    def explain(self, request: RequestInput, bindings: Sequence[Binding], timeout: float) -> list[Explained]:
        return self.inner.explain(request, self._real(bindings), timeout)

    def compile(self, source: str, variables: Mapping[str, str] | None = None) -> Program:
        return self.inner.compile(source, variables)

    def activation(
        self,
        *,
        object: JsonValue,
        old_object: JsonValue,
        request: Mapping[str, JsonValue] | None,
        namespace_object: JsonValue = None,
    ) -> Activation:
        return self.inner.activation(
            object=object, old_object=old_object, request=request, namespace_object=namespace_object
        )

    def evaluate(
        self, program: Program, activation: Activation, params: JsonValue = None, constraint: JsonValue = None
    ) -> CelValue:
        return self.inner.evaluate(program, activation, params, constraint)
