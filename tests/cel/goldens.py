"""Golden answers from real Kubernetes: run the Go generator (tests/cel/gen) and write what it says.

    write_results("corpus", request, path)   # tests/cel/golden/regenerate.py
    write_results("k8slib", request, path)   # tests/cel/k8slib/golden/regenerate.py

The generator compiles and evaluates CEL as Gatekeeper v3.23.1 compiles a template variable
(k8s.io/apiserver v0.36.2, cel-go v0.30.0; see gen/main.go). Needs Go: the local toolchain, the one
the cel-go engine's library is built with (gen/go.mod pins the modules; the go command fetches
them from the Go module proxy, or its module cache).
Not run by the test suite: the tests only read the committed JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

GEN = Path(__file__).parent / "gen"
TOOLCHAIN = "local"


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
