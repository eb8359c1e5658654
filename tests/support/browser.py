"""Headless Chromium for tests of the pages celkeeper writes (Debian's package `chromium`;
hack/browser/setup.sh installs it, ./dev test runs that as root). Tests that use the `chromium` fixture
skip with the reason when it is missing, and fail instead when CELKEEPER_REQUIRE_BROWSER=1 (CI sets it
in .ci/run).

    dom = chromium.dump_dom(page, fragment="q=prod")     # the DOM once the page's scripts have run
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support.requirements import BROWSER, BrowserUnavailable

SETUP = Path(__file__).resolve().parents[2] / "hack" / "browser" / "setup.sh"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
)


class Chromium:
    def __init__(self, binary: Path) -> None:
        self.binary = binary

    def version(self) -> str:
        return subprocess.run(
            [str(self.binary), "--version"], capture_output=True, text=True, timeout=60, check=False
        ).stdout.strip()

    def dump_dom(self, page: Path, fragment: str = "", budget_ms: int = 10_000) -> str:
        """The page's DOM serialised after its scripts ran (a fresh profile each time)."""
        url = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
        with tempfile.TemporaryDirectory(prefix="celkeeper-chromium-") as profile:
            proc = subprocess.run(
                [
                    str(self.binary),
                    *FLAGS,
                    f"--user-data-dir={profile}",
                    f"--virtual-time-budget={budget_ms}",
                    "--dump-dom",
                    url,
                ],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        if proc.returncode != 0 or "<html" not in proc.stdout:
            raise AssertionError(f"chromium exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        return proc.stdout


def find_chromium() -> Path:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return Path(found)
    raise BrowserUnavailable(f"chromium is not installed: run {SETUP} as root (apt-get install chromium)")


def pytest_report_header(config: pytest.Config) -> str:
    del config
    return BROWSER.header(lambda: f"{Chromium(find_chromium()).version()} ({find_chromium()})")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    BROWSER.mark(items)


@pytest.fixture(scope="session")
def chromium() -> Chromium:
    try:
        return Chromium(find_chromium())
    except BrowserUnavailable as exc:
        BROWSER.unavailable("the page tests", exc)
