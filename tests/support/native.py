"""celkeeper's native library in tests (the cel-go engine is its k8scel capability): it is built by
`pip install -e .` (./dev test) when Go is present. Without it, tests that need it skip with the reason;
with CELKEEPER_REQUIRE_KUBE=1 (CI) that is a failure instead, as for the real kube-apiserver
(tests/support/kube_fixtures.py). `run_go` runs the Go tool in the library's Go module."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from celkeeper.native.ffi import available
from celkeeper.native.locate import GO_DIR
from tests.support.requirements import KUBE


def pytest_report_header(config: pytest.Config) -> str:
    del config
    ok, why = available()
    if ok:
        from celkeeper.native.locate import find_library

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


def go() -> str:
    """The Go tool; skips (on CI: fails) the calling test without one."""
    found = shutil.which("go")
    if found is None:
        if KUBE.required():
            pytest.fail(f"{KUBE.env} is set but there is no Go toolchain", pytrace=False)
        pytest.skip("no Go toolchain")
    return found


def run_go(*args: str, env: dict[str, str] | None = None, timeout: float = 1500) -> str:
    """`go ARGS` in the native library's Go module; its stdout, or a failed assertion with its output."""
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
