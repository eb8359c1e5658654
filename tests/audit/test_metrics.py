"""The audit's metrics under Gatekeeper's names and its health/metrics endpoints over real HTTP
(celkeeper.audit.metrics)."""

from __future__ import annotations

import threading
import urllib.request

from celkeeper.audit.metrics import AuditMetrics, HealthServer
from celkeeper.audit.results import RunResults, Violation
from tests.audit.values import REF, VIOLATION


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
