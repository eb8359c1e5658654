"""Golden answers from real Kubernetes: run the Go generator (tests/cel/gen) and write what it says.

    write_results("corpus", request, path)   # tests/cel/golden/regenerate.py
    write_results("k8slib", request, path)   # tests/cel/k8slib/golden/regenerate.py

The generator compiles and evaluates CEL in k8s.io/apiserver v0.34.4's base environment (the one
Kubernetes 1.34 and Gatekeeper compile in). Needs Go; gen/go.mod pins toolchain go1.24.12 and the
Kubernetes modules (the go command fetches them from the Go module proxy, or its module cache).
Not run by the test suite: the tests only read the committed JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

GEN = Path(__file__).parent / "gen"
TOOLCHAIN = "go1.24.12"


def write_results(mode: str, request: object, path: Path) -> int:
    """Run `gen <mode>` on `request` and write its results to `path`; the exit code."""
    proc = subprocess.run(
        ["go", "run", ".", mode],
        cwd=GEN,
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env=dict(os.environ, GOTOOLCHAIN=TOOLCHAIN, GOFLAGS="-mod=mod"),
        check=False,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        return proc.returncode
    results = json.loads(proc.stdout)
    path.write_text(json.dumps(results, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"{len(results)} results written to {path}")
    return 0
