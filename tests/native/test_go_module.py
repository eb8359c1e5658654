"""The native library's Go module is gofmt-clean and passes its own checks (`go vet`, `go test`): among
them, the cel-go engine's decisions (k8scel/) against Gatekeeper's own CEL driver (k8scel.Driver
v3.23.1) on the benchmark's policies and on every case tests/cel/celgo/test_engine_decisions.py exports
(examples, suites, budget exhaustion)."""

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
    out = run_go("test", "-count=1", "./...")
    assert "ok" in out
