"""The project's own rules, checked as tests: import-linter layers, ruff (lint, format) and mypy."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: install the dev extra (pip install -e '.[test,dev]')")
    return found


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


def test_layers_and_engine_imports_follow_the_architecture() -> None:
    proc = _run(_tool("lint-imports"), "setup.cfg")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_is_clean() -> None:
    proc = _run(_tool("ruff"), "check", "celkeeper", "tests", "bench")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_is_applied() -> None:
    proc = _run(_tool("ruff"), "format", "--check", "celkeeper", "tests", "bench")
    assert proc.returncode == 0, "run `ruff format celkeeper tests bench`:\n" + proc.stdout + proc.stderr


def test_mypy_is_clean() -> None:
    proc = _run(_tool("mypy"), "--config-file", "setup.cfg")
    assert proc.returncode == 0, proc.stdout + proc.stderr
