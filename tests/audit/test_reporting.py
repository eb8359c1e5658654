"""What the audit tells: Gatekeeper's log lines (JSON, same keys), Events (reason, annotations, where),
metrics under Gatekeeper's names, and the health/metrics endpoints over real HTTP."""

from __future__ import annotations

import json
import logging
import threading
import urllib.request
from typing import Any

import pytest

from celkeeper.audit.events import EventSink, event_body, events
from celkeeper.audit.logs import JsonFormatter, constraint_line, go_duration, run_line, violation_line
from celkeeper.audit.metrics import AuditMetrics, HealthServer
from celkeeper.audit.results import ObjectRef, RunResults, Violation
from celkeeper.kube import ApiError
from tests.kube.fakes import FakeClient
from tests.support.waiting import wait_for

REF = ObjectRef("apps", "v1", "Deployment", "shop", "web", uid="u-1", resource_version="42")
VIOLATION = Violation(
    ("K8sLabels", "must-have-owner"), "scoped", ("deny", "warn"), "missing owner", REF, {"app": "web"}
)


def rendered(message: str, extra: dict[str, Any], level: int = logging.INFO) -> dict[str, Any]:
    record = logging.LogRecord("celkeeper.audit", level, __file__, 1, message, (), None)
    for key, value in extra.items():
        setattr(record, key, value)
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed: dict[str, Any] = json.loads(line)
    return parsed


def test_a_violation_line_has_gatekeepers_keys_in_gatekeepers_order() -> None:
    message, extra = violation_line(VIOLATION, "2026-12-01T10:00:00Z", {"owner": "team-a"})
    line = rendered(message, extra)
    assert list(line) == [
        "level",
        "ts",
        "logger",
        "msg",
        "process",
        "audit_id",
        "details",
        "event_type",
        "semantic",
        "constraint_group",
        "constraint_api_version",
        "constraint_kind",
        "constraint_name",
        "constraint_namespace",
        "constraint_action",
        "constraint_enforcement_actions",
        "constraint_annotations",
        "resource_group",
        "resource_api_version",
        "resource_kind",
        "resource_namespace",
        "resource_name",
        "resource_labels",
    ]
    assert {k: v for k, v in line.items() if k not in ("ts", "logger")} == {
        "level": "info",
        "msg": "missing owner",
        "process": "audit",
        "audit_id": "2026-12-01T10:00:00Z",
        "details": None,
        "event_type": "violation_audited",
        "semantic": True,
        "constraint_group": "constraints.celkeeper.io",
        "constraint_api_version": "v1beta1",
        "constraint_kind": "K8sLabels",
        "constraint_name": "must-have-owner",
        "constraint_namespace": "",
        "constraint_action": "scoped",
        "constraint_enforcement_actions": ["deny", "warn"],
        "constraint_annotations": {"owner": "team-a"},
        "resource_group": "apps",
        "resource_api_version": "v1",
        "resource_kind": "Deployment",
        "resource_namespace": "shop",
        "resource_name": "web",
        "resource_labels": {"app": "web"},
    }


def test_run_and_constraint_lines() -> None:
    started = rendered("auditing constraints and violations", run_line("audit_started", "T"))
    assert (started["event_type"], started["process"], started["audit_id"]) == ("audit_started", "audit", "T")
    line = rendered("audit results for constraint", constraint_line("K8sLabels", "c", "deny", 12, "T"))
    assert line["event_type"] == "constraint_audited"
    assert (line["constraint_status"], line["constraint_violations"]) == (
        "enforced",
        "12",
    )  # a string, as Go's
    warned = rendered("careful", {}, logging.WARNING)
    assert warned["level"] == "warn"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (1.5, "1.5s"),
        (90, "1m30s"),
        (3723.5, "1h2m3.5s"),
        (0.0015, "1.5ms"),
        (0.000002, "2µs"),
        (0.25, "250ms"),
        (61.000001, "1m1.000001s"),
        (7200, "2h0m0s"),
    ],
)
def test_durations_are_written_as_go_writes_them(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_an_event_is_gatekeepers_audit_event() -> None:
    body = event_body(VIOLATION, "2026-12-01T10:00:00Z", "celkeeper-system", False, 1_800_000_000.0)
    assert body["metadata"]["namespace"] == "celkeeper-system"
    assert body["metadata"]["name"].startswith("web.")
    assert body["involvedObject"] == {
        "kind": "Deployment",
        "name": "web",
        "namespace": "celkeeper-system",
        "uid": "Deployment/shop/web/K8sLabels//must-have-owner",
    }
    assert (body["type"], body["reason"], body["count"]) == ("Warning", "AuditViolation", 1)
    assert body["message"] == "Resource Namespace: shop, Constraint: must-have-owner, Message: missing owner"
    assert body["metadata"]["annotations"]["constraint_enforcement_actions"] == "deny,warn"
    assert body["metadata"]["annotations"]["auditTimestamp"] == "2026-12-01T10:00:00Z"
    assert set(body["metadata"]["annotations"]) == {
        "process",
        "auditTimestamp",
        "event_type",
        "constraint_group",
        "constraint_api_version",
        "constraint_kind",
        "constraint_name",
        "constraint_namespace",
        "constraint_action",
        "constraint_enforcement_actions",
        "resource_group",
        "resource_api_version",
        "resource_kind",
        "resource_namespace",
        "resource_name",
    }
    involved = event_body(VIOLATION, "T", "celkeeper-system", True, 1_800_000_000.0)
    assert involved["metadata"]["namespace"] == "shop"
    assert involved["involvedObject"] == {
        "kind": "Deployment",
        "name": "web",
        "namespace": "shop",
        "uid": "u-1",
        "resourceVersion": "42",
    }
    assert involved["message"] == "Constraint: must-have-owner, Message: missing owner"


class SlowClient(FakeClient):
    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.created: list[dict[str, Any]] = []

    def create(self, resource: Any, body: Any) -> dict[str, Any]:
        self.entered.set()
        self.gate.wait(10)
        if body["metadata"]["annotations"]["resource_name"] == "refused":
            raise ApiError(403, "Forbidden", "no")
        self.created.append(body)
        return dict(body)


def test_events_repeat_at_most_once_per_window_and_a_full_queue_drops() -> None:
    now = [1000.0]
    client = SlowClient()
    sink = EventSink(client, "celkeeper-system", repeat_after=600, clock=lambda: now[0], queue_size=2)
    sink.start()
    sink.emit(VIOLATION, "T1")
    assert client.entered.wait(10)  # the poster took it and is held
    sink.emit(VIOLATION, "T1")  # the same violation again within the window
    assert sink.suppressed == 1
    for name in ("a", "b", "c", "d"):
        sink.emit(
            Violation(VIOLATION.constraint, "deny", (), "m", ObjectRef("", "v1", "Pod", "x", name)), "T1"
        )
    # the poster holds the first event; a and b wait in the queue (2); c and d are dropped
    assert sink.dropped == 2
    client.gate.set()
    wait_for(lambda: sink.emitted == 3, timeout=10, what="the queued events posted")
    now[0] += 601
    sink.emit(VIOLATION, "T2")  # after the window: emitted again
    sink.emit(
        Violation(VIOLATION.constraint, "deny", (), "m", ObjectRef("", "v1", "Pod", "x", "refused")), "T2"
    )
    sink.close()
    assert (sink.emitted, sink.failed, len(client.created)) == (4, 1, 4)
    assert [b["metadata"]["annotations"]["auditTimestamp"] for b in client.created].count("T2") == 1
    assert events("ns").collection_path() == "/api/v1/namespaces/ns/events"


def scrape(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_metrics_and_probes_over_http() -> None:
    metrics = AuditMetrics()
    ready = threading.Event()
    server = HealthServer(("127.0.0.1", 0), metrics, ready=ready.is_set, alive=lambda: True)
    server.start()
    try:
        assert scrape(server.port, "/readyz")[0] == 503
        assert scrape(server.port, "/healthz") == (200, "ok\n")
        assert scrape(server.port, "/nope")[0] == 404
        status, text = scrape(server.port, "/metrics")
        assert status == 200
        assert 'gatekeeper_violations{enforcement_action="deny"} 0.0' in text  # before any run: all 0
        results = RunResults()
        results.add(VIOLATION)
        results.add(Violation(("K8sLabels", "other"), "dryrun", (), "m", REF))
        results.add_error(("K8sLabels", "other"), REF, "cannot be evaluated")
        results.counted("apps", "v1", "Deployment", 7)
        results.list_errors[("", "v1", "Secret")] = "403 Forbidden"
        metrics.finished(results, 1_800_000_000.0, 1_800_000_004.5)
        ready.set()
        assert scrape(server.port, "/readyz")[0] == 200
        text = scrape(server.port, "/metrics")[1]
    finally:
        server.stop()
    expected = [
        'gatekeeper_violations{enforcement_action="scoped"} 1.0',
        'gatekeeper_violations{enforcement_action="dryrun"} 1.0',
        'gatekeeper_violations{enforcement_action="unrecognized"} 0.0',
        "gatekeeper_audit_last_run_time 1.8e+09",
        "gatekeeper_audit_last_run_end_time 1.8000000045e+09",
        'gatekeeper_audit_duration_seconds_bucket{le="60.0"} 1.0',
        'celkeeper_audit_constraint_violations{constraint_kind="K8sLabels",constraint_name="must-have-owner",'
        'enforcement_action="scoped"} 1.0',
        'celkeeper_audit_errors{constraint_kind="K8sLabels",constraint_name="other"} 1.0',
        'celkeeper_audit_objects{group="apps",kind="Deployment",version="v1"} 7.0',
        'celkeeper_audit_list_failures{group="",kind="Secret",version="v1"} 1.0',
        'celkeeper_audit_runs_total{result="complete"} 1.0',
    ]
    for line in expected:
        assert line in text, line
