"""Real CEL engines for the tests, each built once per session (engines are expensive to build).

    engine_named("cel-python")   # that engine (cel-go: skips with the reason when its library is not built)
    installed_engine()           # the default engine as celkeeper picks it (cel-go, or cel-python without it)

Fixtures (re-exported by the conftest.py of the folders that use them): `engine`, each engine in turn
(decisions must not depend on the engine), and `default_engine`, for tests about the policy model
rather than about CEL.
"""

from __future__ import annotations

import pytest

from celkeeper.cel import get_engine
from celkeeper.cel.api import Engine
from celkeeper.settings import DEFAULT_ENGINE, ENGINES
from tests.support.native import require_celgo

_ENGINES: dict[str, Engine] = {}
_INSTALLED: list[Engine] = []


def engine_named(name: str) -> Engine:
    if name == "cel-go":
        require_celgo()
    if name not in _ENGINES:
        _ENGINES[name] = get_engine(name)
    return _ENGINES[name]


def installed_engine() -> Engine:
    if not _INSTALLED:
        _INSTALLED.append(get_engine())
    return _INSTALLED[0]


@pytest.fixture(params=ENGINES, name="engine")  # named, so it can be imported under another name
def engine(request: pytest.FixtureRequest) -> Engine:
    """Each CEL engine in turn (decisions must not depend on the engine)."""
    return engine_named(request.param)


@pytest.fixture
def default_engine() -> Engine:
    """The default engine, for tests about the policy model rather than about CEL."""
    return engine_named(DEFAULT_ENGINE)
