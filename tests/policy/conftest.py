"""Fixtures for the policy model tests: real CEL engines (each engine in turn where it matters)."""

from __future__ import annotations

import pytest

from celkeeper.cel import get_engine
from celkeeper.cel.api import Engine
from celkeeper.settings import ENGINES

_ENGINES: dict[str, Engine] = {}  # engines are expensive to build: one per test session


def _engine(name: str) -> Engine:
    if name not in _ENGINES:
        try:
            _ENGINES[name] = get_engine(name)
        except ImportError as err:  # an engine the CEL work has not delivered yet
            pytest.skip(f"CEL engine {name} is not available: {err}")
    return _ENGINES[name]


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> Engine:
    """Each CEL engine in turn (decisions must not depend on the engine)."""
    return _engine(request.param)


@pytest.fixture
def cpp_engine() -> Engine:
    """The default engine, for tests about the policy model rather than about CEL."""
    return _engine("cel-expr-python")
