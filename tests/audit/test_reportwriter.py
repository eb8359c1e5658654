"""The audit's OpenReports written through the real API server (the vendored upstream CRDs): created once,
not written again while their results are the same, updated with the first-seen timestamps of the results
that stay, split and merged by bucket, deleted when their violations are gone; someone else's report left
alone; nothing written without the CRDs."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest

from celkeeper.audit.openreports import OPENREPORTS, POLICYREPORTS, ReportApi, ResultRow, result_row
from celkeeper.audit.reportrows import ReportRows
from celkeeper.audit.reportwriter import ReportsWritten, write_reports
from celkeeper.audit.results import ObjectRef, Violation
from celkeeper.kube import ApiError, KubeClient, Page, Resource
from tests.audit.support import install_report_crds
from tests.incluster.support import create_namespace
from tests.kube.fakes import FakeClient
from tests.support.apiserver import ControlPlane


def row(namespace: str, name: str, message: str = "", kind: str = "Pod") -> ResultRow:
    ref = ObjectRef("", "v1", kind, namespace, name, uid=f"uid-{name}")
    found = Violation(("K8sLabels", "need-owner"), "deny", (), message or f"{name} lacks owner", ref)
    return result_row(found, "k8slabels")


def write(
    client: KubeClient,
    rows: Iterable[ResultRow],
    now: int,
    max_results: int = 500,
    api: ReportApi = OPENREPORTS,
) -> ReportsWritten:
    with ReportRows.temporary() as store:
        for r in rows:
            store.add(r)
        return write_reports(client, store, now, max_results, api=api)


def stored(cluster: ControlPlane, resource: str, *where: str) -> dict[str, dict[str, Any]]:
    listed = json.loads(
        cluster.kubectl(
            "get", resource, *where, "-l", "app.kubernetes.io/managed-by=celkeeper", "-o", "json"
        ).stdout
    )
    return {f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o for o in listed["items"]}


def versions(cluster: ControlPlane) -> dict[str, str]:
    every = {**stored(cluster, "reports", "-A"), **stored(cluster, "clusterreports")}
    return {key: o["metadata"]["resourceVersion"] for key, o in every.items()}


def results(report: dict[str, Any]) -> dict[str, int]:
    """Each result's object name -> its timestamp."""
    return {r["resources"][0]["name"]: r["timestamp"]["seconds"] for r in report.get("results", [])}


@pytest.fixture(scope="module")
def client(kube_cluster: ControlPlane) -> KubeClient:
    install_report_crds(kube_cluster)
    return KubeClient.connect(str(kube_cluster.kubeconfig_path))


@pytest.mark.kube
def test_reports_are_written_once_kept_while_unchanged_updated_and_deleted(
    kube_cluster: ControlPlane, client: KubeClient, kube_namespace: str
) -> None:
    other = create_namespace(kube_cluster, "reports-other")
    ns = kube_namespace
    first = [row(ns, "a"), row(ns, "b"), row(ns, "c"), row(other, "x"), row("", ns, kind="Namespace")]
    out = write(client, first, now=1000)
    assert (out.created, out.updated, out.deleted, out.failed) == (3, 0, 0, [])
    mine = stored(kube_cluster, "reports", "-n", ns)[f"{ns}/celkeeper-audit"]
    assert results(mine) == {"a": 1000, "b": 1000, "c": 1000}
    assert mine["summary"] == {"pass": 0, "fail": 3, "warn": 0, "error": 0, "skip": 0}
    assert (
        stored(kube_cluster, "clusterreports")["/celkeeper-audit"]["results"][0]["resources"][0]["name"] == ns
    )
    before = versions(kube_cluster)

    again = write(client, first, now=2000)
    assert (again.writes, again.unchanged, again.failed) == (0, 3, [])
    assert versions(kube_cluster) == before

    # b's violation goes, d's comes; the other namespace's go: one update, one delete
    third = [row(ns, "a"), row(ns, "c"), row(ns, "d"), row("", ns, kind="Namespace")]
    out = write(client, third, now=3000)
    assert (out.created, out.updated, out.deleted, out.unchanged) == (0, 1, 1, 1)
    mine = stored(kube_cluster, "reports", "-n", ns)[f"{ns}/celkeeper-audit"]
    assert results(mine) == {"a": 1000, "c": 1000, "d": 3000}  # a and c were first found at 1000
    assert not stored(kube_cluster, "reports", "-n", other)

    out = write(client, [], now=4000)
    assert (out.deleted, out.writes) == (2, 2)
    assert not stored(kube_cluster, "reports", "-n", ns) and not stored(kube_cluster, "clusterreports")


@pytest.mark.kube
def test_a_namespace_over_the_bound_is_split_then_merged_keeping_timestamps(
    kube_cluster: ControlPlane, client: KubeClient, kube_namespace: str
) -> None:
    ns = kube_namespace
    many = [row(ns, f"pod-{i:03d}") for i in range(40)]
    out = write(client, many, now=100, max_results=8)
    reports = stored(kube_cluster, "reports", "-n", ns)
    assert out.created == len(reports) > 5
    assert all(len(r["results"]) <= 8 for r in reports.values())
    assert sum(len(r["results"]) for r in reports.values()) == 40
    # fewer violations: fewer buckets; the results that stay keep when they were first found
    out = write(client, [*many[:6], row(ns, "new")], now=200, max_results=8)
    reports = stored(kube_cluster, "reports", "-n", ns)
    assert list(reports) == [f"{ns}/celkeeper-audit"]
    assert results(reports[f"{ns}/celkeeper-audit"]) == {
        **{f"pod-{i:03d}": 100 for i in range(6)},
        "new": 200,
    }
    assert out.deleted >= 5 and out.failed == []
    write(client, [], now=300)


@pytest.mark.kube
def test_a_report_celkeeper_did_not_write_is_left_alone(
    kube_cluster: ControlPlane, client: KubeClient, kube_namespace: str
) -> None:
    ns = kube_namespace
    theirs = {
        "apiVersion": "openreports.io/v1alpha1",
        "kind": "Report",
        "metadata": {"name": "celkeeper-audit", "namespace": ns, "labels": {"owner": "someone"}},
        "source": "someone",
    }
    kube_cluster.kubectl("create", "-f", "-", input=theirs)
    other = create_namespace(kube_cluster, "reports-ok")
    out = write(client, [row(ns, "a"), row(other, "b")], now=10)
    assert out.created == 1 and len(out.failed) == 1 and ns in out.failed[0]
    kept = json.loads(kube_cluster.kubectl("get", "report", "celkeeper-audit", "-n", ns, "-o", "json").stdout)
    assert kept["source"] == "someone" and "results" not in kept
    write(client, [], now=20)
    assert kube_cluster.kubectl("get", "report", "celkeeper-audit", "-n", ns, check=False).returncode == 0


def test_nothing_is_written_without_the_crds() -> None:
    fake = FakeClient()  # it serves no reports: 404, as the API server answers for a kind it does not serve
    with ReportRows.temporary() as store:
        store.add(row("ns", "a"))
        out = write_reports(fake, store, now=1)
    assert not out.installed and out.writes == 0 and fake.writes == []


class Initialising(FakeClient):
    """An API server whose reports' storage answers 429 to the first lists (CRDs just installed)."""

    def __init__(self, refusals: int) -> None:
        super().__init__()
        self.refusals = refusals

    def list_page(self, resource: Resource, limit: int, continue_token: str = "") -> Page:
        if self.refusals:
            self.refusals -= 1
            raise ApiError(429, "TooManyRequests", "storage is (re)initializing")
        return super().list_page(resource, limit, continue_token)


def test_crds_just_installed_are_waited_for_a_few_seconds() -> None:
    slept: list[float] = []
    with ReportRows.temporary() as store:
        out = write_reports(Initialising(2), store, now=1, sleep=slept.append)
        assert not out.installed and out.failed == [] and slept == [0.5, 1.0]  # then: not installed (404)
        out = write_reports(Initialising(99), store, now=1, sleep=slept.append)
    assert len(out.failed) == 1 and "429" in out.failed[0]


@pytest.mark.kube
def test_policyreports_are_written_the_same_way(
    kube_cluster: ControlPlane, client: KubeClient, kube_namespace: str
) -> None:
    ns = kube_namespace
    rows = [row(ns, "a"), row(ns, "b"), row("", ns, kind="Namespace")]
    out = write(client, rows, now=50, api=POLICYREPORTS)
    assert (out.created, out.failed) == (2, [])
    mine = stored(kube_cluster, "policyreports.wgpolicyk8s.io", "-n", ns)[f"{ns}/celkeeper-audit"]
    assert mine["kind"] == "PolicyReport" and "source" not in mine
    assert {r["source"] for r in mine["results"]} == {"celkeeper"}
    assert results(mine) == {"a": 50, "b": 50}
    cluster_scoped = stored(kube_cluster, "clusterpolicyreports.wgpolicyk8s.io")["/celkeeper-audit"]
    assert cluster_scoped["kind"] == "ClusterPolicyReport"
    again = write(client, rows, now=60, api=POLICYREPORTS)
    assert (again.writes, again.unchanged) == (0, 2)
    assert write(client, [], now=70, api=POLICYREPORTS).deleted == 2
