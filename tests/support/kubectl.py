"""kubectl against a test control plane, for what a freshly created kind needs."""

from __future__ import annotations

import time
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


def wait_established(cluster: ControlPlane, crd: str, timeout: float = 30.0) -> None:
    """`kubectl wait --for=condition=Established crd/<crd>`, again while kubectl answers a CRD the API
    server has not given a status yet with `.status.conditions accessor error` instead of waiting."""
    deadline = time.monotonic() + timeout
    while True:
        left = max(1, int(deadline - time.monotonic()))
        args = ("wait", "--for=condition=Established", f"--timeout={left}s", f"crd/{crd}")
        proc = cluster.kubectl(*args, check=False)
        if proc.returncode == 0:
            return
        if "accessor error" not in proc.stderr or time.monotonic() >= deadline:
            raise AssertionError(f"CRD {crd} not established: {proc.stderr.strip()}")
        time.sleep(0.2)
