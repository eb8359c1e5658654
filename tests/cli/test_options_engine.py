"""--engine: cel-go by default; without its library the default falls back to cel-python with a
warning, and asking for cel-go then is one clear error."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from tests.cli.conftest import EXAMPLES, ROOT
from tests.support.native import require_celgo

SUITE = str(EXAMPLES / "required-labels" / "suite.yaml")


def test_the_default_is_cel_go(cli: Any) -> None:
    require_celgo()
    run = cli("verify", SUITE)
    assert run.code == 0 and "PASS" in run.out
    assert "warning" not in run.err


def _celkeeper(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """celkeeper in a process of its own (a process loads the library once)."""
    return subprocess.run(
        [sys.executable, "-m", "celkeeper", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
        check=False,
    )


def test_without_the_library_the_default_falls_back_to_cel_python() -> None:
    missing = {"CELKEEPER_NATIVE_LIB": "/nonexistent/libcelkeeper.so"}
    run = _celkeeper("verify", SUITE, **missing)
    assert run.returncode == 0 and "PASS" in run.stdout
    assert "warning: the cel-go engine is not available" in run.stderr and "using cel-python" in run.stderr
    asked = _celkeeper("verify", "--engine", "cel-go", SUITE, **missing)
    assert asked.returncode != 0
    assert "CELKEEPER_NATIVE_LIB=/nonexistent/libcelkeeper.so does not exist" in asked.stderr
    assert "Traceback" not in asked.stderr
