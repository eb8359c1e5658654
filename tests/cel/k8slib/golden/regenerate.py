"""Rebuild results.json: evaluate every case expression of the k8slib tests in real Kubernetes
(Gatekeeper v3.23.1's: k8s.io/apiserver v0.36.2, the base CEL environment; see tests/cel/goldens.py).

    .venv/bin/python tests/cel/k8slib/golden/regenerate.py
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[3]))  # the repository root, so the test modules import

from tests.cel.goldens import write_results  # noqa: E402

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
    return write_results("k8slib", requests, HERE / "results.json")


if __name__ == "__main__":
    raise SystemExit(main())
