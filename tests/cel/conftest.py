"""Fixtures for the CEL layer's tests: one engine of each backend for the whole session."""

from __future__ import annotations

from typing import Any

from celkeeper.cel.api import Engine
from tests.support.engines import engine, engine_named

__all__ = ["engine", "engine_named", "evaluate"]


def evaluate(
    engine: Engine,
    source: str,
    *,
    object: Any = None,
    old_object: Any = None,
    request: dict[str, Any] | None = None,
    namespace_object: Any = None,
    params: Any = None,
    constraint: Any = None,
    variables: dict[str, str] | None = None,
) -> Any:
    program = engine.compile(source, variables)
    act = engine.activation(
        object=object, old_object=old_object, request=request or {}, namespace_object=namespace_object
    )
    return engine.evaluate(program, act, params=params, constraint=constraint)
