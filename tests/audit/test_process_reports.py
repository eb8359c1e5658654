"""The audit's OpenReports on a real kube-apiserver: 20,000 Pods in 20 namespaces (the count issue 28
names), the real `celkeeper audit` process under the audit's RBAC of deploy/celkeeper.yaml, with the
vendored OpenReports CRDs.

What is expected is worked out here from the objects created (which Pod lacks which label), never read back
from celkeeper: each report's results and summary add up to the audit's totals per constraint and per
namespace; a namespace over 500 results is split into bounded reports; the constraint status keeps its
capped list and says where the complete one is; a second run over the same cluster writes no report (the
reports' resourceVersions do not move); fixing the one violating Pod of a namespace deletes its report.

Uses a control plane of its own (20,000 Pods would slow the session's other tests).
"""

from __future__ import annotations

import json
import secrets
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.audit.support import (
    AUDIT_ROLES,
    constraint,
    events_of,
    install_report_crds,
    install_template,
    labels_template,
    run_once,
)
from tests.incluster.support import install_crds, rbac_kubeconfig, status
from tests.support.apiserver import ControlPlane
from tests.support.binaries import KubeBinaries
from tests.support.bulk import create_many
from tests.support.kubectl import apply

pytestmark = pytest.mark.kube

KIND = "ReportLabels"
NAMESPACES = [f"team-{i:02d}" for i in range(20)]
PODS = 1_000  # per namespace: 20,000 in all
BIG = "team-00"  # every Pod lacks both labels: 2,000 results, more than one report holds
SINGLE = "team-19"  # only pod-0000 violates anything
MAX_RESULTS = 500
# constraint -> (label it requires, enforcement action, the OpenReports result of its violations)
CONSTRAINTS = {
    "pods-owner": ("owner", "deny", "fail"),
    "pods-team": ("team", "dryrun", "warn"),
    "namespaces-owner": ("owner", "deny", "fail"),
}


def labels(namespace: str, i: int) -> dict[str, str]:
    if namespace == BIG:
        return {}
    if namespace == SINGLE:
        return {"owner": "x", "team": "a"} if i else {}
    found = {}
    if i % 10:
        found["owner"] = "x"
    if i % 4:
        found["team"] = "a"
    return found


def pod(namespace: str, i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i:04d}", "namespace": namespace, "labels": labels(namespace, i)},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]},
    }


@dataclass
class World:
    cluster: ControlPlane
    kubeconfig: Path
    # (namespace, constraint) -> violations expected ("" namespace: cluster-scoped)
    expected: Counter[tuple[str, str]]


@pytest.fixture(scope="module")
def world(kube_binaries: KubeBinaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with ControlPlane(tmp_path_factory.mktemp("kube-reports"), kube_binaries) as plane:
        yield build(plane)


def build(cluster: ControlPlane) -> World:
    install_crds(cluster)
    install_report_crds(cluster)
    own = "celkeeper-system"
    cluster.kubectl("create", "namespace", own)
    kubeconfig = rbac_kubeconfig(cluster, own, f"audit-{secrets.token_hex(3)}", roles=AUDIT_ROLES)
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": {"reports-test": "yes"}}}
        for n in NAMESPACES
    ]
    create_many(cluster, namespaces)
    pods = [pod(n, i) for n in NAMESPACES for i in range(PODS)]
    assert create_many(cluster, pods, threads=8) == len(pods)
    install_template(cluster, labels_template(KIND))
    core = {"apiGroups": [""]}
    for name, (key, action, _) in CONSTRAINTS.items():
        kinds = ["Namespace"] if name.startswith("namespaces") else ["Pod"]
        match: dict[str, Any] = {"kinds": [{**core, "kinds": kinds}]}
        if kinds == ["Namespace"]:
            match["labelSelector"] = {"matchLabels": {"reports-test": "yes"}}
        apply(cluster, constraint(KIND, name, match, {"key": key}, action=action))
    expected: Counter[tuple[str, str]] = Counter()
    for obj in pods:
        for name, (key, _, _) in CONSTRAINTS.items():
            if name.startswith("pods") and key not in obj["metadata"]["labels"]:
                expected[(obj["metadata"]["namespace"], name)] += 1
    expected[("", "namespaces-owner")] = len(NAMESPACES)
    return World(cluster, kubeconfig, expected)


def reports(cluster: ControlPlane) -> dict[str, dict[str, Any]]:
    """celkeeper's Reports and ClusterReports, by namespace/name."""
    found = {}
    for resource, where in (("reports", ("-A",)), ("clusterreports", ())):
        listed = cluster.kubectl(
            "get", resource, *where, "-l", "app.kubernetes.io/managed-by=celkeeper", "-o", "json", timeout=120
        ).stdout
        for item in json.loads(listed)["items"]:
            found[f"{item['metadata'].get('namespace', '')}/{item['metadata']['name']}"] = item
    return found


def audit(world: World) -> dict[str, Any]:
    code, lines, raw = run_once(world.kubeconfig, timeout=300)
    assert code == 0, raw[-4000:]
    [finished] = events_of(lines, "audit_finished")
    assert finished["reports_failed"] == 0, raw[-4000:]
    assert finished["reports_duration"].endswith("s")  # how long writing them took (Go's duration)
    return finished


def test_the_reports_hold_every_violation_and_an_unchanged_run_writes_none(world: World) -> None:
    cluster = world.cluster
    first = audit(world)
    found = reports(cluster)
    assert (
        first["reports_created"] == len(found) and first["reports_updated"] == first["reports_deleted"] == 0
    )

    # every result, per namespace and constraint, as expected from the Pods; the summaries agree
    results: Counter[tuple[str, str]] = Counter()
    by_result: Counter[str] = Counter()
    for key, report in found.items():
        namespace = key.split("/")[0]
        assert report["kind"] == ("Report" if namespace else "ClusterReport")
        assert len(report["results"]) <= MAX_RESULTS
        assert report["summary"] == {
            "pass": 0,
            "fail": sum(r["result"] == "fail" for r in report["results"]),
            "warn": sum(r["result"] == "warn" for r in report["results"]),
            "error": 0,
            "skip": 0,
        }
        for result in report["results"]:
            kind, name = result["policy"].split("/")
            assert kind == KIND and result["rule"] == KIND.lower()
            assert result["result"] == CONSTRAINTS[name][2]
            assert result["properties"]["enforcementAction"] == CONSTRAINTS[name][1]
            [resource] = result["resources"]
            assert resource.get("namespace", "") == namespace
            results[(namespace, name)] += 1
            by_result[result["result"]] += 1
    assert results == world.expected
    # ... and equal the audit's own totals, on each constraint's status, which says where they are
    for name in CONSTRAINTS:
        found_status = status(cluster, KIND.lower(), name)
        total = sum(n for (_, c), n in world.expected.items() if c == name)
        assert found_status["totalViolations"] == total
        assert len(found_status["violations"]) == 20
        assert found_status["reports"] == {
            "apiVersion": "openreports.io/v1alpha1",
            "kinds": ["Report", "ClusterReport"],
            "labelSelector": "app.kubernetes.io/managed-by=celkeeper",
            "policy": f"{KIND}/{name}",
        }
    assert first["violations"] == sum(world.expected.values()) == sum(by_result.values())
    # the big namespace is split into bounded reports; the others hold one each
    assert sum(n for (namespace, _), n in world.expected.items() if namespace == BIG) > MAX_RESULTS
    big = sorted(k for k in found if k.startswith(f"{BIG}/"))
    assert len(big) > 1 and f"{BIG}/celkeeper-audit" not in big
    assert f"{SINGLE}/celkeeper-audit" in found

    versions = {k: r["metadata"]["resourceVersion"] for k, r in found.items()}
    second = audit(world)
    assert (second["reports_created"], second["reports_updated"], second["reports_deleted"]) == (0, 0, 0)
    assert second["reports_unchanged"] == len(found)
    assert {k: r["metadata"]["resourceVersion"] for k, r in reports(cluster).items()} == versions

    # the one violating Pod of a namespace fixed: its report goes, nothing else is written
    cluster.kubectl("label", "pod", "pod-0000", "-n", SINGLE, "owner=x", "team=a", "--overwrite")
    third = audit(world)
    assert (third["reports_created"], third["reports_updated"], third["reports_deleted"]) == (0, 0, 1)
    after = {k: r["metadata"]["resourceVersion"] for k, r in reports(cluster).items()}
    assert after == {k: v for k, v in versions.items() if not k.startswith(f"{SINGLE}/")}
