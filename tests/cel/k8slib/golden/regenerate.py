"""Rebuild results.json: evaluate every case expression of the k8slib tests in real Kubernetes.

    .venv/bin/python tests/cel/k8slib/golden/regenerate.py

Needs Go; the go.mod pins toolchain go1.24.12 (downloaded by the go command from the Go module proxy) and
k8s.io/apiserver v0.34.4. Not run by the test suite.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[3]))  # the repository root, so the test modules import
MODULES = [
    "tests.cel.k8slib.test_quantity",
    "tests.cel.k8slib.test_urls",
    "tests.cel.k8slib.test_ip_cidr",
    "tests.cel.k8slib.test_semver",
    "tests.cel.k8slib.test_format",
    "tests.cel.k8slib.test_lists",
    "tests.cel.k8slib.test_regex",
]


def main() -> int:
    requests: list[dict[str, str]] = []
    for name in MODULES:
        module = importlib.import_module(name)
        requests += [{"expr": expr} for expr, _ in getattr(module, "CASES", [])]
        requests += [{"quantity_string": s} for s in getattr(module, "QUANTITY_STRINGS", [])]
    env = dict(os.environ, GOTOOLCHAIN="go1.24.12", GOFLAGS="-mod=mod")
    proc = subprocess.run(
        ["go", "run", "."],
        cwd=HERE / "gen",
        input=json.dumps(requests),
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
    sys.exit(main())
