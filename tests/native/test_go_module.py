"""The native library's Go module is gofmt-clean and passes its own checks (`go vet`, `go test`): among
them, the cel-go engine's decisions (k8scel/) against Gatekeeper's own CEL driver (k8scel.Driver
v3.23.1) on the benchmark's policies and on every case tests/cel/celgo/test_engine_decisions.py exports
(examples, suites, budget exhaustion).

`go test` runs without -count=1: Go reuses a passing package's result only for the same test binary (the
module's code, the patched dependencies, the flags) and the same files and environment variables its tests
read, so an unchanged module is not tested again in a warm CI run; any change runs its tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from celkeeper.native.locate import GO_DIR
from tests.support.native import go, run_go


def test_go_vet() -> None:
    run_go("vet", "./...")


def test_gofmt() -> None:
    gofmt = Path(go()).parent / "gofmt"
    proc = subprocess.run([gofmt, "-l", "."], cwd=GO_DIR, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "", f"not gofmt-formatted (run gofmt -w in {GO_DIR}):\n{proc.stdout}"


def test_go_test() -> None:
    out = run_go("test", "./...")
    assert "ok" in out
