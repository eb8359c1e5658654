"""Fixtures of the wheel's suite: `wheel` (session), celkeeper's wheel built from this checkout
(tests/support/wheel.py); skips with the reason when it cannot be built here (no Go), fails instead under
CELKEEPER_REQUIRE_WHEEL=1 (CI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.requirements import WHEEL
from tests.support.wheel import WheelUnavailable, built_wheel


def pytest_report_header(config: pytest.Config) -> str:
    del config
    return WHEEL.header(lambda: f"built by {Path('hack/wheel/build.sh')} (when the tests ask for it)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    WHEEL.mark(items)


@pytest.fixture(scope="session")
def wheel() -> Path:
    try:
        return built_wheel()
    except WheelUnavailable as exc:
        WHEEL.unavailable("the wheel", exc)
