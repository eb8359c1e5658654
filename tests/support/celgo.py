"""The cel-go engine in tests: its library is built by `pip install -e .` (./dev test) when Go is
present. Without it, tests that need cel-go skip with the reason; with CELKEEPER_REQUIRE_KUBE=1 (CI)
that is a failure instead, as for the real kube-apiserver (tests/support/kube_fixtures.py)."""

from __future__ import annotations

import pytest

from celkeeper.cel.celgo.library import available
from tests.support.requirements import KUBE


def pytest_report_header(config: pytest.Config) -> str:
    del config
    ok, why = available()
    if ok:
        from celkeeper.cel.celgo.locate import find_library

        return f"cel-go: library {find_library()[0]}"
    return f"cel-go: tests that need it will {'FAIL' if KUBE.required() else 'skip'}: {why}"


def require_celgo() -> None:
    """Skip (or, on CI, fail) the calling test when the cel-go library is not available."""
    ok, why = available()
    if ok:
        return
    if KUBE.required():
        pytest.fail(f"{KUBE.env} is set but the cel-go library is not available: {why}", pytrace=False)
    pytest.skip(f"no cel-go library: {why}")
