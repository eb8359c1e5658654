"""The CEL layer: Kubernetes' CEL on two engines behind one contract (see api.py).

    engine = get_engine("cel-go")                        # or "cel-python"
    program = engine.compile_template(source)            # a template: diagnostics, never refused for
                                                         # compile errors (TemplateRefused otherwise)
    binding = engine.bind(program, constraint_object)
    outcomes = engine.validate(request_input, [binding, ...], timeout=3.0)   # one call per request

    expression level (tests, goldens, explanations):
    p = engine.compile(source, variables={...})          # CelCompileError (line:col) if invalid
    engine.evaluate(p, engine.activation(object=..., old_object=..., request=...), params=...)

- `cel-go` (celgo/): Kubernetes' own CEL (cel-go, k8s.io/apiserver) exactly as Gatekeeper v3.23.1
  runs it, in celkeeper's native library (celkeeper.native: the Go module's k8scel/,
  built by setup.py); the default.
- `cel-python` (celpython/): a pure-Python engine (celpy's interpreter behind a type-checking front end
  of its own), for machines without Go; cross-checked against cel-go.

Engines are expensive to build: build one per process and keep it (the caller holds it: there is
no module-level cache). The cel-go library is loaded by the first cel-go engine of a process, which
must not fork afterwards (celkeeper.native.ffi).
"""

from __future__ import annotations

from celkeeper.cel.api import (
    Activation,
    Binding,
    CelError,
    Diagnostic,
    Engine,
    EngineDecision,
    Inventory,
    InventoryError,
    Outcome,
    Program,
    RequestInput,
    TemplateProgram,
    TemplateRefused,
    TemplateSource,
    VariableCompileError,
)
from celkeeper.errors import CelCompileError, CelkeeperError
from celkeeper.settings import DEFAULT_ENGINE, ENGINES, CelLimits, EngineName

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "Activation",
    "Binding",
    "CelCompileError",
    "CelError",
    "Diagnostic",
    "Engine",
    "EngineDecision",
    "EngineUnavailable",
    "Inventory",
    "InventoryError",
    "Outcome",
    "Program",
    "RequestInput",
    "TemplateProgram",
    "TemplateRefused",
    "TemplateSource",
    "VariableCompileError",
    "engine_available",
    "get_engine",
]


class EngineUnavailable(CelkeeperError):
    """The engine cannot run here (the cel-go library is not built or cannot be loaded)."""


def engine_available(name: EngineName) -> tuple[bool, str]:
    """Whether `get_engine(name)` can work in this installation, and why not (without loading)."""
    if name == "cel-go":
        from celkeeper.native.ffi import available

        return available()
    return name in ENGINES, "" if name in ENGINES else f"unknown CEL engine {name!r}"


def get_engine(
    name: EngineName = DEFAULT_ENGINE, limits: CelLimits | None = None, compile_threads: int = 1
) -> Engine:
    """A new engine by name ('cel-go' or 'cel-python'); EngineUnavailable when it cannot run here.
    `compile_threads`: how many threads will compile templates at once (cel-go: the library makes and
    warms the compilers they need, in the background; one otherwise)."""
    if name == "cel-go":
        from celkeeper.native.ffi import LibraryUnavailable, load

        try:  # the library first: the Go runtime initialises on its own thread while Python imports
            library = load()
        except LibraryUnavailable as err:
            raise EngineUnavailable(str(err)) from err
        if compile_threads > 1:
            library.compilers(compile_threads)
        from celkeeper.cel.celgo.engine import CelGoEngine

        return CelGoEngine(library)
    if name == "cel-python":
        from celkeeper.cel.celpython.engine import CelPythonEngine

        return CelPythonEngine(limits)
    raise ValueError(f"unknown CEL engine {name!r}; choose one of {', '.join(ENGINES)}")
