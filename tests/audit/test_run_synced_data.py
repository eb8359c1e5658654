"""The audit reads synced data: a run lists the kinds that templates reading synced data declare (the real
kube-apiserver, listed in pages) into a store of its own, and those templates see the cluster as it was
at the start of the run, with either engine. A kind the cluster does not serve is not synced: the
templates needing it fail under their failurePolicy.
"""

from __future__ import annotations

import json
import logging
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from celkeeper.audit import AuditOptions, Evaluator, Silent, audit_cluster
from celkeeper.audit.results import Violation
from celkeeper.cel import ENGINES, get_engine
from celkeeper.documents import Document, parse_documents
from celkeeper.kube import KubeClient
from celkeeper.policy import TemplateCompiler, build_policy_set
from tests.incluster.support import ROOT, create_namespace
from tests.support.apiserver import ControlPlane
from tests.support.native import require_celgo

SUFFIX = secrets.token_hex(3)

NOT_SERVED = """
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8sneedswidgets
  annotations:
    metadata.gatekeeper.sh/requires-sync-data: >-
      [[{"groups": ["widgets.example.com"], "versions": ["v1"], "kinds": ["Widget"]}]]
spec:
  crd: {spec: {names: {kind: K8sNeedsWidgets}}}
  targets:
  - target: admission.k8s.gatekeeper.sh
    code:
    - engine: K8sNativeValidation
      source:
        validations:
        - expression: size(data.inventory.cluster) >= 0
          message: never
"""


class Collect(Silent):
    def __init__(self) -> None:
        self.violations: list[Violation] = []

    def violation(self, violation: Violation) -> None:
        self.violations.append(violation)


def ingress(name: str, namespace: str, host: str) -> dict[str, Any]:
    backend = {"service": {"name": "web", "port": {"number": 80}}}
    path = {"path": "/", "pathType": "Prefix", "backend": backend}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"rules": [{"host": host, "http": {"paths": [path]}}]},
    }


def constraint(kind: str, name: str, namespaces: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "constraints.gatekeeper.sh/v1beta1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {
            "match": {
                "kinds": [{"apiGroups": ["networking.k8s.io"], "kinds": ["Ingress"]}],
                "namespaces": namespaces,
            }
        },
    }


@pytest.mark.kube
@pytest.mark.parametrize("engine_name", ENGINES)
def test_the_audit_reads_the_clusters_objects_as_synced_data(
    kube_cluster: ControlPlane, engine_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    if engine_name == "cel-go":
        require_celgo()
    first = create_namespace(kube_cluster, "t-refdata-audit")
    second = create_namespace(kube_cluster, "t-refdata-audit")
    shared, alone = f"shared-{engine_name}-{SUFFIX}.example.com", f"alone-{engine_name}-{SUFFIX}.example.com"
    for obj in (ingress("a", first, shared), ingress("b", second, shared), ingress("c", first, alone)):
        kube_cluster.kubectl("create", "-f", "-", input=obj)
    path = ROOT / "referential" / "unique-ingress-host" / "template.yaml"
    documents = [
        *parse_documents(path.read_text(encoding="utf-8"), str(path)).documents,
        *parse_documents(NOT_SERVED, "widgets.yaml").documents,
        Document.from_object(constraint("K8sUniqueIngressHost", "unique", [first, second])),
        Document.from_object(constraint("K8sNeedsWidgets", "widgets", [first])),
    ]
    policies = build_policy_set(documents, TemplateCompiler(get_engine(engine_name)))
    assert not policies.errors

    def namespace(name: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}

    client = KubeClient.connect(str(kube_cluster.kubeconfig_path))
    reporter = Collect()
    try:
        with caplog.at_level(logging.WARNING, logger="celkeeper.audit"):
            # pages of 1: the synced kinds are listed in pages too
            audit_cluster(client, Evaluator(policies), namespace, AuditOptions(chunk_size=1), reporter)
    finally:
        client.close()
    unique = sorted(
        (v.ref.namespace, v.ref.name, v.message) for v in reporter.violations if v.constraint[1] == "unique"
    )
    assert unique == sorted(
        [
            (first, "a", f"ingress host conflicts with an existing ingress <{shared}>"),
            (second, "b", f"ingress host conflicts with an existing ingress <{shared}>"),
        ]
    )
    widgets = {(v.ref.name, v.message) for v in reporter.violations if v.constraint[1] == "widgets"}
    assert {name for name, _ in widgets} == {"a", "c"}
    assert all(
        m.startswith("data not synced: template k8sneedswidgets reads widgets.example.com/v1 Widget")
        for _, m in widgets
    )
    assert "template k8sneedswidgets reads widgets.example.com/v1 Widget, which this run could not list" in (
        caplog.text
    )
    assert "k8suniqueingresshost" not in caplog.text  # one of its alternatives is served


@pytest.mark.parametrize("engine_name", ENGINES)
def test_the_offline_audit_gives_every_object_as_synced_data(engine_name: str, tmp_path: Path) -> None:
    """`celkeeper audit --objects`: the objects given are the cluster, and the synced data too."""
    if engine_name == "cel-go":
        require_celgo()
    objects = [
        ingress("a", "one", "shared.example.com"),
        ingress("b", "two", "shared.example.com"),
        ingress("c", "one", "alone.example.com"),
    ]
    path = tmp_path / "ingresses.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}), encoding="utf-8")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "celkeeper",
            "audit",
            "--engine",
            engine_name,
            "--policy-dir",
            str(ROOT / "referential" / "unique-ingress-host"),
            "--objects",
            str(path),
            "-o",
            "json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr  # deny violations
    assert proc.stderr == "celkeeper audit: summary: 3 objects read, 3 audited, 0 not audited, 0 errors\n"
    report = json.loads(proc.stdout)
    assert report["objects"] == 3
    [found] = report["constraints"]
    assert sorted((v["namespace"], v["name"], v["message"]) for v in found["allViolations"]) == [
        ("one", "a", "ingress host conflicts with an existing ingress <shared.example.com>"),
        ("two", "b", "ingress host conflicts with an existing ingress <shared.example.com>"),
    ]
