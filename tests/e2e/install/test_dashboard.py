"""The chart's Grafana dashboard: every panel's query names only metrics celkeeper exports (read from the
webhook's and the audit's own metrics, each made to report), the panels cover what the dashboard is for,
and the chart ships it as a ConfigMap with the label Grafana's dashboard sidecar looks for."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from celkeeper.audit import ObjectRef, RunResults, Violation
from celkeeper.audit.metrics import AuditMetrics
from celkeeper.snapshot import StateDir, WorkerBoard, WorkerStatus
from celkeeper.webhook import metrics as webhook_metrics
from celkeeper.webhook.metrics import WebhookMetrics
from tests.e2e.install.support import find
from tests.e2e.install.test_chart import documents
from tests.support.helm import CHART, Helm

DASHBOARD = CHART / "dashboards" / "celkeeper.json"
# PromQL's own words (functions, aggregations, modifiers) and the labels the queries name
PROMQL = {
    "sum",
    "min",
    "max",
    "rate",
    "increase",
    "topk",
    "histogram_quantile",
    "by",
    "time",
    "le",
    "without",
    "on",
}
LABELS = {"decision", "operation", "action", "kind", "constraint", "result", "enforcement_action"}
LABELS |= {"constraint_kind", "constraint_name", "group", "version"}


def exported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """Every sample name celkeeper's processes expose, each metric made to report once."""
    monkeypatch.delenv(webhook_metrics.MULTIPROC_ENV, raising=False)
    state = StateDir(tmp_path / "state")
    # a worker that has loaded a snapshot (the per-pod gauges are read from the workers' status files)
    state.workers.mkdir(parents=True)
    WorkerBoard(state.workers).write(
        WorkerStatus(pid=os.getpid(), generation=3, ready=True, snapshot_created=1.0)
    )
    webhook = WebhookMetrics(state)
    webhook.observe_request("deny", "CREATE", 0.002)
    webhook.observe_evaluation("K8sLabels", 0.0001)
    webhook.count_violation("deny", "K8sLabels", "need-owner")
    webhook.count_export("written", 1)
    webhook.snapshot_loads.labels("ok").inc()
    text, _ = webhook.render()
    webhook.close()
    audit = AuditMetrics()
    results = RunResults()
    ref = ObjectRef("", "v1", "Pod", "a", "p")
    results.add(Violation(("K8sLabels", "need-owner"), "deny", (), "m", ref))
    results.add_error(("K8sLabels", "need-owner"), ref, "e")
    results.counted("", "v1", "Pod")
    results.list_errors[("", "v1", "Secret")] = "refused"
    audit.finished(results, 1.0, 2.0)
    audit.failed()
    audit.events_seen(1, 0, 0, 0)
    audit.reports_written({"created": 1})
    names: set[str] = set()
    for page in (text, audit.text()):
        for family in text_string_to_metric_families(page.decode()):
            names.update(sample.name for sample in family.samples)
    return names


def queries(panel: dict[str, Any]) -> list[str]:
    return [t["expr"] for t in panel.get("targets", [])]


def test_every_query_names_only_metrics_celkeeper_exports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = exported(tmp_path, monkeypatch)
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    used: set[str] = set()
    for panel in panels:
        exprs = queries(panel)
        assert exprs, panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        for expr in exprs:
            without_strings = re.sub(r'"[^"]*"|\[[^\]]*\]', "", expr)
            words = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", without_strings))
            metrics = words - PROMQL - LABELS
            assert metrics, f"{panel['title']}: {expr} names no metric"
            unknown = metrics - names
            assert not unknown, (
                f"{panel['title']}: {expr} names {sorted(unknown)}, which celkeeper does not export"
            )
            used |= metrics
    # what the dashboard is for
    for wanted in (
        "celkeeper_admission_requests_total",  # reviews/s, evaluation errors
        "celkeeper_admission_request_duration_seconds_bucket",  # latency percentiles
        "celkeeper_violations_total",  # denials by constraint
        "celkeeper_constraints_loaded",  # per-pod enforcement
        "gatekeeper_violations",  # audit totals
        "gatekeeper_audit_duration_seconds_sum",  # audit duration
        "celkeeper_audit_report_writes_total",
        "celkeeper_decision_export_lines_total",
    ):
        assert wanted in used, wanted


def test_the_chart_ships_it_for_grafanas_sidecar(helm: Helm) -> None:
    default = documents(helm.template())
    config = find(default, "ConfigMap", "celkeeper-grafana-dashboard")
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config["data"]["celkeeper.json"]) == json.loads(DASHBOARD.read_text(encoding="utf-8"))
    moved = documents(
        helm.template(
            "grafana.dashboard.namespace=monitoring",
            "grafana.dashboard.label=dashboards",
            "grafana.dashboard.folder=Policy",
        )
    )
    config = find(moved, "ConfigMap", "celkeeper-grafana-dashboard")
    assert config["metadata"]["namespace"] == "monitoring"
    assert config["metadata"]["labels"]["dashboards"] == "1"
    assert config["metadata"]["annotations"] == {"grafana_folder": "Policy"}
    off = documents(helm.template("grafana.dashboard.enabled=false"))
    assert not [d for d in off if d["metadata"]["name"] == "celkeeper-grafana-dashboard"]
