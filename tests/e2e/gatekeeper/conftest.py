"""Fixtures of the differential tests against Gatekeeper's manager (tests/support/gatekeeper.py).

`gatekeeper_manager` (session): the binary; skips with the reason when it cannot run here, fails instead
under CELKEEPER_REQUIRE_GATEKEEPER=1 (CI sets it). `differential` (session): both API servers, Gatekeeper's
manager and celkeeper's mutation server, set up (differential.py). The tests also need the real control
plane (`kube`) and celkeeper's native library (mutators run there).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.gatekeeper.differential import Differential
from tests.support.binaries import KubeBinaries
from tests.support.gatekeeper import GatekeeperUnavailable, find_manager
from tests.support.gator import gatekeeper_version
from tests.support.native import require_celgo
from tests.support.requirements import GATEKEEPER


def pytest_report_header(config: pytest.Config) -> str:
    del config
    return GATEKEEPER.header(lambda: f"Gatekeeper v{gatekeeper_version()} manager at {find_manager()}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    GATEKEEPER.mark(items)


@pytest.fixture(scope="session")
def gatekeeper_manager() -> Path:
    try:
        return find_manager()
    except GatekeeperUnavailable as exc:
        GATEKEEPER.unavailable("Gatekeeper's manager", exc)


@pytest.fixture(scope="session")
def differential(
    gatekeeper_manager: Path, kube_binaries: KubeBinaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Differential]:
    require_celgo()
    both = Differential(gatekeeper_manager, tmp_path_factory.mktemp("mutation"), kube_binaries)
    try:
        both.start()
        yield both
    finally:
        both.stop()
