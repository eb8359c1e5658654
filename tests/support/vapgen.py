"""Gatekeeper's own ValidatingAdmissionPolicy transform (hack/vap: `vapgen`), for golden comparisons.

hack/vap/build.sh builds it into `${CELKEEPER_VAPGEN_CACHE:-~/.cache/celkeeper-vapgen}/<version>/`
(`./dev test` runs it when Go is on PATH). Without it the tests that need it skip with the reason; with
CELKEEPER_REQUIRE_KUBE=1 (CI) they fail instead.

    results = run_vapgen([{"id": "t", "template": {...}}, {"id": "c", "constraint": {...}}])
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "hack" / "vap" / "build.sh"
REQUIRE_ENV = "CELKEEPER_REQUIRE_KUBE"


def vapgen_binary() -> Path:
    """The built vapgen; skips the calling test (fails under CELKEEPER_REQUIRE_KUBE) when it is not built
    from the module in the tree."""
    printed = subprocess.run([str(BUILD), "--print"], capture_output=True, text=True, check=True)
    path = Path(printed.stdout.strip())
    current = subprocess.run([str(BUILD), "--check"], capture_output=True, check=False).returncode == 0
    if not current:
        reason = f"Gatekeeper's transform is not built ({path} missing or stale): run hack/vap/build.sh"
        if os.environ.get(REQUIRE_ENV, "") not in ("", "0", "false", "no"):
            pytest.fail(f"{REQUIRE_ENV} is set: {reason}", pytrace=False)
        pytest.skip(reason)
    return path


def run_vapgen(cases: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """id -> {"generate", "object", "error"} as Gatekeeper's code makes them."""
    proc = subprocess.run(
        [str(vapgen_binary())],
        input=json.dumps({"cases": list(cases)}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    results = {r["id"]: r for r in json.loads(proc.stdout)["results"]}
    for result in results.values():
        obj = result.get("object")
        if isinstance(obj, dict):  # what Go writes for fields the controllers never set
            if obj.get("status") == {}:
                del obj["status"]
            if obj.get("metadata", {}).get("creationTimestamp", "") is None:
                del obj["metadata"]["creationTimestamp"]
    return results
