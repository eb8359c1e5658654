"""kubectl against a test control plane, for what a freshly created kind needs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.support.apiserver import ControlPlane, KubectlError
from tests.support.waiting import wait_for


def apply(cluster: ControlPlane, obj: Mapping[str, Any]) -> str:
    """kubectl apply (its output), retried while the API server does not serve a new kind yet (a CRD
    just created: discovery has not caught up)."""
    out: list[str] = []

    def attempt() -> bool:
        proc = cluster.kubectl("apply", "-f", "-", input=obj, check=False)
        if proc.returncode == 0:
            out.append(proc.stdout)
            return True
        if "no matches for kind" in proc.stderr or "the server could not find" in proc.stderr:
            return False
        raise KubectlError(proc.returncode, ["kubectl", "apply"], proc.stdout, proc.stderr)

    wait_for(attempt, timeout=30, interval=0.2, what=f"kubectl apply of {obj['kind']} to be served")
    return out[0]
