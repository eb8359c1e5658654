"""Fixtures for the VAP tests: the default CEL engine (templates are compiled as celkeeper compiles them)."""

from __future__ import annotations

import pytest

from celkeeper.cel import get_engine
from celkeeper.cel.api import Engine


@pytest.fixture(scope="session")
def engine() -> Engine:
    return get_engine()
