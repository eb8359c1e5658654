"""Rebuild results.json: compile and evaluate every corpus case (tests/cel/corpus*.py) in real
Kubernetes 1.34 (k8s.io/apiserver v0.34.4's base CEL environment plus the admission variables).

    .venv/bin/python tests/cel/golden/regenerate.py

Needs Go; go.mod pins toolchain go1.24.12 and k8s.io/apiserver v0.34.4 (fetched by the go command
from the Go module proxy, or its module cache). Not run by the test suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[2]))  # the repository root

from tests.cel.corpus import INPUTS  # noqa: E402
from tests.cel.corpus_cases import ENVIRONMENT, POLICY  # noqa: E402


def case_name(inputs: str, expr: str) -> str:
    return f"{inputs}:{expr}"


def main() -> int:
    cases = [{"name": case_name(i, e), "expr": e, "inputs": i} for i, e in POLICY + ENVIRONMENT]
    request = {"inputs": INPUTS, "cases": cases}
    env = dict(os.environ, GOTOOLCHAIN="go1.24.12", GOFLAGS="-mod=mod")
    proc = subprocess.run(
        ["go", "run", "."],
        cwd=HERE / "gen",
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        return proc.returncode
    results = json.loads(proc.stdout)
    (HERE / "results.json").write_text(
        json.dumps(results, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    )
    print(f"{len(results)} results written to {HERE / 'results.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
