"""The audit's OpenReports, made from results (pure): what a result says, how a namespace's results are
split into reports of bounded size (by object, stable from run to run), digests blind to timestamps."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from celkeeper.audit.openreports import (
    BUCKET_LABEL,
    BUCKETS_LABEL,
    DIGEST_ANNOTATION,
    MANAGED_BY,
    POLICYREPORTS,
    ResultRow,
    bucket_count,
    error_row,
    report,
    reports,
    result_row,
    row_hash,
    rows_of,
    split,
)
from celkeeper.audit.results import ObjectRef, Violation

CRDS = Path(__file__).resolve().parents[2] / "crds" / "reports"


def violation(
    name: str,
    *,
    namespace: str = "team-a",
    action: str = "deny",
    actions: tuple[str, ...] = (),
    constraint: tuple[str, str] = ("K8sLabels", "need-owner"),
    message: str = "",
    kind: str = "Pod",
) -> Violation:
    ref = ObjectRef("", "v1", kind, namespace, name, uid=f"uid-{name}")
    return Violation(constraint, action, actions, message or f"{kind} {name} lacks owner", ref)


def row(name: str, **kw: Any) -> ResultRow:
    return result_row(violation(name, **kw), "k8slabels")


def test_a_result_names_the_constraint_its_template_the_object_and_the_action() -> None:
    found = result_row(violation("web-1"), "k8slabels")
    assert found.policy == "K8sLabels/need-owner" and found.rule == "k8slabels"
    assert (found.api_version, found.kind, found.namespace, found.name, found.uid) == (
        "v1",
        "Pod",
        "team-a",
        "web-1",
        "uid-web-1",
    )
    results = {
        action: result_row(violation("x", action=action), "t").result for action in ("deny", "warn", "dryrun")
    }
    assert results == {"deny": "fail", "warn": "warn", "dryrun": "warn"}
    assert result_row(violation("x", action="scoped", actions=("deny", "warn")), "t").result == "fail"
    assert result_row(violation("x", action="scoped", actions=("warn", "dryrun")), "t").result == "warn"
    long = result_row(violation("x", message="é" * 2000), "t").message
    assert len(long.encode()) <= 1024 and long.endswith("...")


def test_an_error_is_a_result_of_its_object_but_a_failed_list_is_not() -> None:
    ref = ObjectRef("apps", "v1", "Deployment", "team-a", "api")
    found = error_row(("K8sLabels", "c"), ref, "cannot be evaluated: boom", "t")
    assert found is not None and found.result == "error" and found.action == ""
    assert (
        error_row(("K8sLabels", "c"), ObjectRef("apps", "v1", "Deployment", "", ""), "listing", "t") is None
    )


def test_an_error_of_an_admission_policy_binding_names_the_policy_and_the_binding() -> None:
    ref = ObjectRef("apps", "v1", "Deployment", "team-a", "api")
    found = error_row(("ValidatingAdmissionPolicy", "limit/missing"), ref, "failed to configure binding", "")
    assert found is not None and found.result == "error"
    assert (found.policy, found.rule) == ("ValidatingAdmissionPolicy/limit", "missing")


def test_a_report_has_the_upstream_shape_and_counts_its_results() -> None:
    rows = [
        row("a"),
        row("b", action="warn"),
        row("c", action="dryrun"),
        row("d", action="scoped", actions=("deny", "warn")),
        error_row(
            ("K8sLabels", "need-owner"), ObjectRef("", "v1", "Pod", "team-a", "e"), "oops", "k8slabels"
        ),
    ]
    [piece] = split([r for r in rows if r is not None])
    body = report("team-a", piece, {}, now=1_800_000_000)
    assert body["apiVersion"] == "openreports.io/v1alpha1" and body["kind"] == "Report"
    assert body["metadata"]["name"] == "celkeeper-audit" and body["metadata"]["namespace"] == "team-a"
    assert body["metadata"]["labels"] == {MANAGED_BY: "celkeeper", BUCKET_LABEL: "0", BUCKETS_LABEL: "1"}
    assert body["source"] == "celkeeper"
    assert body["summary"] == {"pass": 0, "fail": 2, "warn": 2, "error": 1, "skip": 0}
    first = body["results"][0]
    assert first == {
        "policy": "K8sLabels/need-owner",
        "rule": "k8slabels",
        "result": "fail",
        "message": "Pod a lacks owner",
        "timestamp": {"seconds": 1_800_000_000, "nanos": 0},
        "resources": [
            {"apiVersion": "v1", "kind": "Pod", "namespace": "team-a", "name": "a", "uid": "uid-a"}
        ],
        "properties": {"enforcementAction": "deny"},
    }
    scoped = next(r for r in body["results"] if r["resources"][0]["name"] == "d")
    assert scoped["properties"] == {"enforcementAction": "scoped", "enforcementActions": "deny,warn"}
    # the upstream CRD's schema accepts it (its structural schema, read as JSON Schema)
    schema_of("openreports.io_reports.yaml").validate(json.loads(json.dumps(body)))
    cluster = report("", split([row("n", namespace="", kind="Namespace")])[0], {}, now=1)
    assert cluster["kind"] == "ClusterReport" and "namespace" not in cluster["metadata"]
    schema_of("openreports.io_clusterreports.yaml").validate(json.loads(json.dumps(cluster)))


def test_a_policyreport_holds_the_same_results_with_their_source() -> None:
    [piece] = split([row("a"), row("b", action="warn")])
    body = report("team-a", piece, {}, now=7, api=POLICYREPORTS)
    assert (body["apiVersion"], body["kind"]) == ("wgpolicyk8s.io/v1alpha2", "PolicyReport")
    assert "source" not in body and [r["source"] for r in body["results"]] == ["celkeeper", "celkeeper"]
    schema_of("wgpolicyk8s.io_policyreports.yaml").validate(json.loads(json.dumps(body)))
    openreport = report("team-a", piece, {}, now=7)
    assert [{k: v for k, v in r.items() if k != "source"} for r in body["results"]] == openreport["results"]
    assert body["summary"] == openreport["summary"]
    cluster = report("", split([row("n", namespace="", kind="Namespace")])[0], {}, now=1, api=POLICYREPORTS)
    assert cluster["kind"] == "ClusterPolicyReport"
    schema_of("wgpolicyk8s.io_clusterpolicyreports.yaml").validate(json.loads(json.dumps(cluster)))


def schema_of(file: str) -> Draft202012Validator:
    crd = yaml.safe_load((CRDS / file).read_text(encoding="utf-8"))
    [version] = crd["spec"]["versions"]
    return Draft202012Validator(version["schema"]["openAPIV3Schema"])


def test_timestamps_are_when_first_seen_and_not_part_of_the_digest() -> None:
    rows = [row("a"), row("b")]
    [piece] = split(rows)
    now = report("team-a", piece, {}, now=200)
    kept = report("team-a", piece, {rows[0].key: 100}, now=200)
    assert [r["timestamp"]["seconds"] for r in kept["results"]] == [100, 200]
    assert (
        now["metadata"]["annotations"][DIGEST_ANNOTATION]
        == kept["metadata"]["annotations"][DIGEST_ANNOTATION]
    )
    # read back from a stored report: every result's key and timestamp
    assert dict(rows_of(kept)) == {rows[0].key: 100, rows[1].key: 200}
    changed = split([row("a"), row("b", message="other")])[0]
    assert changed.digest != piece.digest


@pytest.mark.parametrize("count", [1, 500, 501, 1999, 5000])
def test_a_namespace_is_split_by_object_into_reports_of_at_most_max_results(count: int) -> None:
    rows = [row(f"pod-{i:05d}") for i in range(count)] + [
        row(f"pod-{i:05d}", constraint=("K8sTier", "gold")) for i in range(0, count, 3)
    ]
    found = split(rows, max_results=500)
    assert Counter(r for p in found for r in p.rows) == Counter(rows)  # every result once
    assert all(len(p.rows) <= 500 for p in found)
    assert len({p.name for p in found}) == len(found)
    [buckets] = {p.buckets for p in found}
    assert buckets == (1 if len(rows) <= 500 else bucket_count(Counter(row_hash(r) for r in rows), 500))
    for piece in found:  # an object's results stay together, in its bucket
        assert {row_hash(r) & (buckets - 1) for r in piece.rows} == {piece.bucket}
    if buckets > 1:  # the smallest power of two that is enough
        smaller = Counter(row_hash(r) & (buckets // 2 - 1) for r in rows)
        assert max(smaller.values()) > 500
        assert {p.name for p in found} == {f"celkeeper-audit-{p.bucket}" for p in found}


def test_one_changed_object_changes_one_report() -> None:
    rows = [row(f"pod-{i:05d}") for i in range(3000)]
    before = {p.name: p.digest for p in split(rows, max_results=500)}
    rows[1234] = row("pod-01234", message="something else")
    after = {p.name: p.digest for p in split(rows, max_results=500)}
    assert before.keys() == after.keys() and len(before) > 1
    assert sum(before[n] != after[n] for n in before) == 1


def test_an_object_with_more_results_than_fit_is_cut_into_parts() -> None:
    rows = [row("big", message=f"m{i:04d}") for i in range(1200)] + [row("small")]
    found = split(rows, max_results=500)
    assert sum(len(p.rows) for p in found) == 1201 and all(len(p.rows) <= 500 for p in found)
    names = sorted(p.name for p in found)
    assert any(n.endswith("-part1") for n in names) and any(n.endswith("-part2") for n in names)


def test_offline_reports_cover_every_namespace_cluster_first() -> None:
    rows = [row("a", namespace="b-ns"), row("b", namespace="a-ns"), row("n", namespace="", kind="Namespace")]
    found = reports(rows, now=5)
    assert [(r["kind"], r["metadata"].get("namespace", "")) for r in found] == [
        ("ClusterReport", ""),
        ("Report", "a-ns"),
        ("Report", "b-ns"),
    ]
