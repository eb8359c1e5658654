"""The CEL layer: Kubernetes' CEL environment on two engines behind one interface (see api.py).

    engine = get_engine("cel-expr-python", limits)        # or "cel-python"
    program = engine.compile(source, variables={...})     # CelCompileError (line:col) if invalid
    program.output_type                                   # 'bool', 'string', 'list(dyn)', ...
    act = engine.activation(object=..., old_object=..., request=..., namespace_object=...)
    engine.evaluate(program, act, params=..., constraint=...)   # a value or a CelError

Engines are expensive to build (~50 ms, they set up cel-cpp environments): build one per process
and keep it (the caller holds it: there is no module-level cache).
"""

from __future__ import annotations

from celkeeper.cel.api import Activation, CelError, Engine, Program, VariableCompileError
from celkeeper.errors import CelCompileError
from celkeeper.settings import DEFAULT_ENGINE, ENGINES, CelLimits

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "Activation",
    "CelCompileError",
    "CelError",
    "Engine",
    "Program",
    "VariableCompileError",
    "get_engine",
]


def get_engine(name: str = DEFAULT_ENGINE, limits: CelLimits | None = None) -> Engine:
    """A new engine by name ('cel-expr-python' or 'cel-python')."""
    if name == "cel-go":
        from celkeeper.cel.celgo.engine import CelGoEngine

        return CelGoEngine()  # type: ignore[return-value]
    if name == "cel-expr-python":
        from celkeeper.cel.cpp_engine import CelExprPythonEngine

        return CelExprPythonEngine(limits)
    if name == "cel-python":
        from celkeeper.cel.py_engine import CelPythonEngine

        return CelPythonEngine(limits)
    raise ValueError(f"unknown CEL engine {name!r}; choose one of {', '.join(ENGINES)}")
