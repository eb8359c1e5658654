"""Fixtures for the CEL layer's tests: one engine of each backend for the whole session."""

from __future__ import annotations

from typing import Any

import pytest

from celkeeper.cel import ENGINES, get_engine
from celkeeper.cel.api import Engine
from tests.support.celgo import require_celgo

_ENGINES: dict[str, Engine] = {}


def engine_named(name: str) -> Engine:
    if name == "cel-go":
        require_celgo()
    if name not in _ENGINES:
        _ENGINES[name] = get_engine(name)
    return _ENGINES[name]


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> Engine:
    """Each test runs on every engine."""
    return engine_named(request.param)


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
