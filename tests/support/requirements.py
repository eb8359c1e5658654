"""What a group of tests needs from the machine, and what happens when it is missing: a skip with the
reason, or a failure where an environment variable says the group must run (CI sets them in .ci/run)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

import pytest

from tests.support.binaries import BinariesUnavailable
from tests.support.gatekeeper import GatekeeperUnavailable
from tests.support.gator import GatorUnavailable
from tests.support.wheel import WheelUnavailable


class BrowserUnavailable(Exception):
    """Headless Chromium cannot run here; the message says why and how to fix it."""


@dataclass(frozen=True)
class Requirement:
    """Tests that use `fixture` get `marker`; a missing prerequisite (`missing`: the exception that
    says so) skips them unless `env` is set."""

    env: str
    marker: str
    fixture: str
    missing: type[Exception] = BinariesUnavailable

    def required(self) -> bool:
        return os.environ.get(self.env, "") not in ("", "0", "false", "no")

    def header(self, describe: Callable[[], str]) -> str:
        """The pytest header line: `describe()`, or what will happen to the tests and why."""
        try:
            return f"{self.marker}: {describe()}"
        except self.missing as exc:
            outcome = "FAIL" if self.required() else "skip"
            return f"{self.marker}: tests marked {self.marker} will {outcome}: {exc}"

    def mark(self, items: list[pytest.Item]) -> None:
        for item in items:
            if (
                self.fixture in getattr(item, "fixturenames", ())
                and item.get_closest_marker(self.marker) is None
            ):
                item.add_marker(getattr(pytest.mark, self.marker))

    def unavailable(self, what: str, exc: Exception) -> NoReturn:
        """Fail (when required) or skip, saying that `what` cannot run and why."""
        if self.required():
            pytest.fail(f"{self.env} is set but {what} cannot run: {exc}", pytrace=False)
        pytest.skip(f"{what} cannot run: {exc}")


KUBE = Requirement("CELKEEPER_REQUIRE_KUBE", "kube", "kube_cluster")
NODE = Requirement("CELKEEPER_REQUIRE_NODE", "node", "node_cluster")
GATOR = Requirement("CELKEEPER_REQUIRE_GATOR", "gator", "gator", GatorUnavailable)
GATEKEEPER = Requirement(
    "CELKEEPER_REQUIRE_GATEKEEPER", "gatekeeper", "gatekeeper_manager", GatekeeperUnavailable
)
BROWSER = Requirement("CELKEEPER_REQUIRE_BROWSER", "browser", "chromium", BrowserUnavailable)
WHEEL = Requirement("CELKEEPER_REQUIRE_WHEEL", "wheel", "wheel", WheelUnavailable)
