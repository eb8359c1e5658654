"""Gatekeeper v3.23.1's own files (CRDs), from the Go module cache, for tests that compare with them or
install them on a test control plane. The cel-go engine's Go module requires Gatekeeper, so building it
(./dev test, CI) has downloaded the module; otherwise `go mod download` fetches it. Without Go the calling
test skips with the reason (fails under CELKEEPER_REQUIRE_KUBE=1, as on CI)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.requirements import KUBE

ROOT = Path(__file__).resolve().parents[2]
MODULE = "github.com/open-policy-agent/gatekeeper/v3"
VERSION = "v3.23.1"
GO_MODULE_DIR = ROOT / "celkeeper" / "native" / "go"  # requires Gatekeeper


def _unavailable(reason: str) -> None:
    if KUBE.required():
        pytest.fail(f"{KUBE.env} is set: {reason}", pytrace=False)
    pytest.skip(reason)


def gatekeeper_dir() -> Path:
    """The Gatekeeper module's folder in the Go module cache (downloaded when missing)."""
    go = shutil.which("go")
    if go is None:
        _unavailable("Gatekeeper's sources need Go (the module cache): go is not on PATH")
        raise AssertionError  # unreachable: skip/fail raise
    cache = subprocess.run(
        [go, "env", "GOMODCACHE"], capture_output=True, text=True, check=True
    ).stdout.strip()
    found = Path(cache) / f"{MODULE}@{VERSION}"
    if not found.is_dir():
        done = subprocess.run(
            [go, "mod", "download", f"{MODULE}@{VERSION}"],
            cwd=GO_MODULE_DIR,
            capture_output=True,
            text=True,
            check=False,
            timeout=900,
        )
        if done.returncode != 0 or not found.is_dir():
            _unavailable(f"cannot download {MODULE}@{VERSION}: {done.stderr.strip()[-300:]}")
    return found


def gatekeeper_crd(name: str) -> Path:
    """A CRD file of Gatekeeper's config/crd/bases (e.g. expansion.gatekeeper.sh_expansiontemplate.yaml)."""
    return gatekeeper_dir() / "config" / "crd" / "bases" / name
