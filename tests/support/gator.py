"""Gatekeeper's `gator`, the oracle of the differential tests (built by hack/gator/build.sh).

    gator = find_gator()                    # Path; raises GatorUnavailable with the reason and the fix
    run = run_gator(["verify", "-v", "--trace", "dir/..."])

The binary lives in `${CELKEEPER_GATOR_CACHE:-~/.cache/celkeeper-gator}/<version>/gator`, with a stamp
of the module files that built it; `./dev test` builds it when missing or stale (needs Go). Tests
that need it use the `gator` fixture (tests/e2e/gator/conftest.py): they skip with the reason when it
cannot run here, and fail instead when CELKEEPER_REQUIRE_GATOR=1 (CI sets it; tests/support/requirements.py).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "hack" / "gator" / "build.sh"
GOMOD = ROOT / "hack" / "gator" / "go.mod"


class GatorUnavailable(Exception):
    """gator cannot run here; the message says why and how to fix it."""


def gatekeeper_version() -> str:
    """The Gatekeeper version hack/gator/go.mod requires, e.g. `3.23.1`."""
    text = GOMOD.read_text(encoding="utf-8")
    found = re.search(
        r"^\s*(?:require\s+)?github\.com/open-policy-agent/gatekeeper/v3\s+v(\S+)\s*$", text, re.M
    )
    if not found:
        raise GatorUnavailable(f"{GOMOD} does not require github.com/open-policy-agent/gatekeeper/v3")
    return found.group(1)


def find_gator() -> Path:
    """The up-to-date gator binary, or GatorUnavailable."""
    where = subprocess.run(
        [str(BUILD_SCRIPT), "--print"], capture_output=True, text=True, check=True
    ).stdout.strip()
    path = Path(where)
    fresh = subprocess.run([str(BUILD_SCRIPT), "--check"], capture_output=True, check=False).returncode == 0
    if fresh:
        return path
    what = "stale (built from other module files)" if path.exists() else "not built"
    if shutil.which("go") is None:
        raise GatorUnavailable(
            f"gator {what} in {path} and no Go toolchain on PATH: install Go, then run {BUILD_SCRIPT}"
        )
    raise GatorUnavailable(f"gator {what} in {path}: run {BUILD_SCRIPT} (or ./dev test)")


@dataclass(frozen=True)
class GatorRun:
    code: int
    out: str
    err: str


def run_gator(gator: Path, args: list[str], cwd: Path | None = None, timeout: float = 1200) -> GatorRun:
    done = subprocess.run(
        [str(gator), *args], capture_output=True, text=True, cwd=cwd, timeout=timeout, check=False
    )
    return GatorRun(done.returncode, done.stdout, done.stderr)
