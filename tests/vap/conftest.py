"""Fixtures for the VAP tests: the default CEL engine (templates are compiled as celkeeper compiles them)."""

from __future__ import annotations

import pytest

from celkeeper.cel.api import Engine
from tests.support.engines import installed_engine


@pytest.fixture(scope="session")
def engine() -> Engine:
    return installed_engine()
