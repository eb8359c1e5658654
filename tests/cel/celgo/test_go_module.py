"""The cel-go engine's Go module passes its own tests (`go vet`, `go test`): among them, the engine's
decisions against Gatekeeper's own CEL driver (k8scel.Driver v3.23.1) on the benchmark's policies and
on every case tests/cel/celgo/test_engine_decisions.py exports (examples, suites, budget exhaustion)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from celkeeper.cel.celgo.locate import GO_DIR
from tests.support.requirements import KUBE


def go() -> str:
    found = shutil.which("go")
    if found is None:
        if KUBE.required():
            pytest.fail(f"{KUBE.env} is set but there is no Go toolchain", pytrace=False)
        pytest.skip("no Go toolchain")
    return found


def run_go(*args: str, env: dict[str, str] | None = None, timeout: float = 1500) -> str:
    proc = subprocess.run(
        [go(), *args],
        cwd=GO_DIR,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, GOFLAGS="-mod=readonly", **(env or {})),
        check=False,
    )
    assert proc.returncode == 0, f"go {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_go_vet() -> None:
    run_go("vet", "./...")


def test_go_test(tmp_path: Path) -> None:
    out = run_go("test", "-count=1", "./...")
    assert "ok" in out
