"""Fixtures for the policy model tests: real CEL engines (each engine in turn where it matters)."""

from __future__ import annotations

import pytest

from celkeeper.cel import get_engine
from celkeeper.cel.api import Engine
from celkeeper.settings import DEFAULT_ENGINE, ENGINES
from tests.support.celgo import require_celgo

_ENGINES: dict[str, Engine] = {}  # engines are expensive to build: one per test session


def _engine(name: str) -> Engine:
    if name == "cel-go":
        require_celgo()
    if name not in _ENGINES:
        _ENGINES[name] = get_engine(name)
    return _ENGINES[name]


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> Engine:
    """Each CEL engine in turn (decisions must not depend on the engine)."""
    return _engine(request.param)


@pytest.fixture
def default_engine() -> Engine:
    """The default engine, for tests about the policy model rather than about CEL."""
    return _engine(DEFAULT_ENGINE)
