"""Rebuild results.json: compile and evaluate every corpus case (tests/cel/corpus*.py) in real
Kubernetes 1.34 (the base CEL environment plus the admission variables; see tests/cel/goldens.py).

    .venv/bin/python tests/cel/golden/regenerate.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[2]))  # the repository root

from tests.cel.corpus import INPUTS  # noqa: E402
from tests.cel.corpus_cases import ENVIRONMENT, POLICY  # noqa: E402
from tests.cel.goldens import write_results  # noqa: E402


def case_name(inputs: str, expr: str) -> str:
    return f"{inputs}:{expr}"


def main() -> int:
    cases = [{"name": case_name(i, e), "expr": e, "inputs": i} for i, e in POLICY + ENVIRONMENT]
    return write_results("corpus", {"inputs": INPUTS, "cases": cases}, HERE / "results.json")


if __name__ == "__main__":
    raise SystemExit(main())
