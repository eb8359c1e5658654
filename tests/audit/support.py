"""Helpers for the audit tests on a real kube-apiserver: templates and constraints (with the constraint
CRDs the webhook pods would make), `celkeeper audit` as a real process, its JSON log lines."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from celkeeper.crds import constraint_crd
from tests.support.apiserver import ControlPlane
from tests.support.kubectl import apply, wait_established
from tests.support.processes import ManagedProcess, free_port
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
AUDIT_ROLES = ("celkeeper-audit",)  # the audit's (Cluster)Role(Binding)s in deploy/celkeeper.yaml
CELKEEPER = Path(sys.executable).parent / "celkeeper"


def template(
    kind: str, expression: str, message_expression: str, schema: dict[str, Any] | None = None
) -> dict[str, Any]:
    crd_spec: dict[str, Any] = {"names": {"kind": kind}}
    if schema is not None:
        crd_spec["validation"] = {"openAPIV3Schema": schema}
    return {
        "apiVersion": "templates.celkeeper.io/v1",
        "kind": "ConstraintTemplate",
        "metadata": {"name": kind.lower()},
        "spec": {
            "crd": {"spec": crd_spec},
            "targets": [
                {
                    "target": "admission.k8s.gatekeeper.sh",
                    "code": [
                        {
                            "engine": "K8sNativeValidation",
                            "source": {
                                "validations": [
                                    {"expression": expression, "messageExpression": message_expression}
                                ]
                            },
                        }
                    ],
                }
            ],
        },
    }


def labels_template(kind: str) -> dict[str, Any]:
    """Objects must carry the label `parameters.key`; message `<Kind> <name> lacks <key>`."""
    return template(
        kind,
        "has(object.metadata.labels) && variables.params.key in object.metadata.labels",
        "object.kind + ' ' + object.metadata.name + ' lacks ' + variables.params.key",
        {"type": "object", "properties": {"key": {"type": "string"}}},
    )


def tier_template(kind: str) -> dict[str, Any]:
    """Objects must live in a namespace labelled tier=gold (read from namespaceObject)."""
    return template(
        kind,
        "has(namespaceObject.metadata.labels) && namespaceObject.metadata.labels.tier == 'gold'",
        "'namespace ' + namespaceObject.metadata.name + ' is not gold'",
    )


def install_template(cluster: ControlPlane, data: dict[str, Any]) -> None:
    """The template, and its constraint CRD as the webhook pods' informer makes it."""
    apply(cluster, data)
    crd = constraint_crd(data)
    cluster.kubectl("apply", "-f", "-", input=crd)
    wait_established(cluster, crd["metadata"]["name"])


def constraint(
    kind: str,
    name: str,
    match: dict[str, Any],
    parameters: Any = None,
    action: str = "deny",
    scoped: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"enforcementAction": action, "match": match}
    if parameters is not None:
        spec["parameters"] = parameters
    if scoped is not None:
        spec["scopedEnforcementActions"] = scoped
    return {
        "apiVersion": "constraints.celkeeper.io/v1beta1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }


def configmaps(namespace: str, count: int, unlabelled_every: int) -> list[dict[str, Any]]:
    """`cm-0000`... in `namespace`; every `unlabelled_every`-th (from the first) lacks the label `owner`."""
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"cm-{i:04d}",
                "namespace": namespace,
                "labels": {} if i % unlabelled_every == 0 else {"owner": "x"},
            },
        }
        for i in range(count)
    ]


def audit_argv(kubeconfig: Path, *args: str) -> list[str]:
    return [str(CELKEEPER), "audit", "--source", "kubernetes", "--kubeconfig", str(kubeconfig), *args]


def lines_of(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def run_once(kubeconfig: Path, *args: str, timeout: float = 240) -> tuple[int, list[dict[str, Any]], str]:
    """`celkeeper audit --once`: (exit code, its JSON log lines, its raw output)."""
    proc = subprocess.run(
        audit_argv(kubeconfig, "--once", "--metrics-bind", "", *args),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return proc.returncode, lines_of(proc.stderr), proc.stderr


def events_of(lines: Sequence[dict[str, Any]], event_type: str) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("event_type") == event_type]


class AuditServer:
    """`celkeeper audit --source kubernetes` running on, with /metrics on a free port."""

    def __init__(self, workdir: Path, kubeconfig: Path, *args: str) -> None:
        self.port = free_port()
        self.log_path = workdir / f"audit-{self.port}.log"
        self.process = ManagedProcess(
            "celkeeper audit",
            audit_argv(kubeconfig, "--metrics-bind", f"127.0.0.1:{self.port}", *args),
            self.log_path,
        )

    def start(self) -> AuditServer:
        self.process.start()
        return self

    def stop(self) -> None:
        self.process.stop()

    def lines(self) -> list[dict[str, Any]]:
        return lines_of(self.log_path.read_text(encoding="utf-8", errors="replace"))

    def wait_started(self) -> None:
        """Until the first run has started (it is then in the middle of listing)."""
        wait_for(
            lambda: events_of(self.lines(), "audit_started"),
            timeout=60,
            interval=0.05,
            what="the first run to start",
        )

    def finished_runs(self) -> list[str]:
        return [line["audit_id"] for line in events_of(self.lines(), "audit_finished")]

    def wait_runs(self, count: int, timeout: float = 90) -> list[str]:
        def enough() -> list[str] | None:
            if not self.process.running():
                raise AssertionError(f"celkeeper audit exited:\n{self.process.log_tail(60)}")
            runs = self.finished_runs()
            return runs if len(runs) >= count else None

        found = wait_for(enough, timeout=timeout, interval=0.2, what=f"{count} complete audit run(s)")
        assert found is not None
        return found


REPORT_CRDS = ROOT / "crds" / "reports"


def install_report_crds(cluster: ControlPlane) -> None:
    """The report CRDs celkeeper vendors (crds/reports: OpenReports and wgpolicyk8s.io PolicyReports), as the
    chart installs them; idempotent."""
    cluster.kubectl("apply", "-f", str(REPORT_CRDS))
    names = ("reports.openreports.io", "clusterreports.openreports.io")
    for name in (*names, "policyreports.wgpolicyk8s.io", "clusterpolicyreports.wgpolicyk8s.io"):
        wait_established(cluster, name)
        # served only once its storage is initialised (a list answers 429 until then)
        wait_for(
            lambda name=name: cluster.kubectl("get", name, "-A", check=False).returncode == 0,
            timeout=30,
            interval=0.2,
            what=f"{name} to be listable",
        )
