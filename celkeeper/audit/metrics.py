"""The audit's Prometheus metrics, and the small HTTP server that serves them with the health probes.

Gatekeeper's audit metrics, under Gatekeeper's names (pkg/audit/stats_reporter.go with its Prometheus
exporter's `gatekeeper` prefix), so that dashboards and alerts built for it work unchanged:
    gatekeeper_violations{enforcement_action}   violations found by the last run, per action
                                                (deny, dryrun, warn, scoped, unrecognized; 0 when none)
    gatekeeper_audit_duration_seconds           histogram of run durations (Gatekeeper's buckets)
    gatekeeper_audit_last_run_time              start of the last run (Unix seconds)
    gatekeeper_audit_last_run_end_time          end of the last run (Unix seconds)
celkeeper's own, about the last complete run:
    celkeeper_audit_constraint_violations{constraint_kind,constraint_name,enforcement_action}
    celkeeper_audit_errors{constraint_kind,constraint_name}   objects (or kinds) that could not be evaluated
    celkeeper_audit_objects{group,version,kind}               objects audited
    celkeeper_audit_list_failures{group,version,kind}         1 for each kind whose list failed
    celkeeper_audit_runs_total{result}                        complete, failed
    celkeeper_audit_events_total{result}                      emitted, failed, dropped, suppressed
    celkeeper_audit_report_writes_total{operation}            OpenReports created, updated, deleted,
                                                              unchanged (not written), failed
The per-run gauges come from one snapshot of the last run, replaced in one step: a scrape never sees
half of one run and half of another, and constraints that are gone disappear.

    metrics = AuditMetrics(); metrics.finished(results, started, ended)
    server = HealthServer(("0.0.0.0", 8888), metrics.registry, ready=lambda: ..., alive=lambda: ...)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from celkeeper.audit.results import KNOWN_ACTIONS, RunResults

REPORT_OPERATIONS = ("created", "updated", "deleted", "unchanged", "failed")
DURATION_BUCKETS = (60, 180, 300, 600, 900, 1200, 2400, 4800, 9600, 19200)  # Gatekeeper's


class _LastRun(Collector):
    def __init__(self) -> None:
        self.results: RunResults | None = None
        self.started = 0.0
        self.ended = 0.0

    def collect(self) -> Iterator[Any]:
        results, started, ended = self.results, self.started, self.ended  # one consistent snapshot
        violations = GaugeMetricFamily(
            "gatekeeper_violations", "Total number of audited violations", labels=["enforcement_action"]
        )
        by_action = results.by_action if results is not None else dict.fromkeys(KNOWN_ACTIONS, 0)
        for action, total in by_action.items():
            violations.add_metric([action], total)
        yield violations
        yield GaugeMetricFamily(
            "gatekeeper_audit_last_run_time", "Timestamp of last audit run starting time", value=started
        )
        yield GaugeMetricFamily(
            "gatekeeper_audit_last_run_end_time", "Timestamp of last audit run ending time", value=ended
        )
        per_constraint = GaugeMetricFamily(
            "celkeeper_audit_constraint_violations",
            "Violations of each constraint found by the last audit",
            labels=["constraint_kind", "constraint_name", "enforcement_action"],
        )
        errors = GaugeMetricFamily(
            "celkeeper_audit_errors",
            "Objects (or whole kinds) the last audit could not evaluate, per constraint",
            labels=["constraint_kind", "constraint_name"],
        )
        objects = GaugeMetricFamily(
            "celkeeper_audit_objects",
            "Objects audited by the last audit, per kind",
            labels=["group", "version", "kind"],
        )
        failures = GaugeMetricFamily(
            "celkeeper_audit_list_failures",
            "Kinds the last audit could not list (1 each)",
            labels=["group", "version", "kind"],
        )
        if results is not None:
            for (kind, name), found in sorted(results.constraints.items()):
                if found.total:
                    per_constraint.add_metric([kind, name, found.action], found.total)
                if found.errors:
                    errors.add_metric([kind, name], found.errors)
            for (group, version, kind), count in sorted(results.objects.items()):
                objects.add_metric([group, version, kind], count)
            for group, version, kind in sorted(results.list_errors):
                failures.add_metric([group, version, kind], 1)
        yield per_constraint
        yield errors
        yield objects
        yield failures


class AuditMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self._last = _LastRun()
        self.registry.register(self._last)
        self.duration = Histogram(
            "gatekeeper_audit_duration_seconds",
            "Latency of audit operation in seconds",
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.runs = Counter(
            "celkeeper_audit_runs",
            "Audit runs, by result (complete, failed)",
            ["result"],
            registry=self.registry,
        )
        self.events = Counter(
            "celkeeper_audit_events",
            "Audit events, by result (emitted, failed, dropped, suppressed)",
            ["result"],
            registry=self.registry,
        )
        self.report_writes = Counter(
            "celkeeper_audit_report_writes",
            "OpenReports written by the audit, by operation (created, updated, deleted, unchanged, failed)",
            ["operation"],
            registry=self.registry,
        )
        for operation in REPORT_OPERATIONS:
            self.report_writes.labels(operation)
        self._events_seen: dict[str, int] = {}

    def started(self, at: float) -> None:
        self._last.started = at

    def finished(self, results: RunResults, started: float, ended: float) -> None:
        self._last.results = results
        self._last.started, self._last.ended = started, ended
        self.duration.observe(max(0.0, ended - started))
        self.runs.labels("complete").inc()

    def reports_written(self, counts: Mapping[str, int]) -> None:
        """One run's report writes, by operation (REPORT_OPERATIONS)."""
        for operation, n in counts.items():
            if n:
                self.report_writes.labels(operation).inc(n)

    def failed(self) -> None:
        self.runs.labels("failed").inc()

    def events_seen(self, emitted: int, failed: int, dropped: int, suppressed: int) -> None:
        """The event sink's running totals (the counters move to them)."""
        for result, total in (
            ("emitted", emitted),
            ("failed", failed),
            ("dropped", dropped),
            ("suppressed", suppressed),
        ):
            delta = total - self._events_seen.get(result, 0)
            if delta > 0:
                self.events.labels(result).inc(delta)
                self._events_seen[result] = total

    def text(self) -> bytes:
        return generate_latest(self.registry)


class HealthServer:
    """GET /metrics, /healthz (the audit loop is alive), /readyz (it has the policies and has started)."""

    def __init__(
        self,
        address: tuple[str, int],
        metrics: AuditMetrics,
        *,
        ready: Callable[[], bool],
        alive: Callable[[], bool],
    ) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._answer(200, metrics.text(), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/livez"):
                    ok = alive()
                    self._answer(200 if ok else 503, b"ok\n" if ok else b"audit loop stopped\n")
                elif path == "/readyz":
                    ok = ready()
                    self._answer(200 if ok else 503, b"ok\n" if ok else b"policies not listed yet\n")
                else:
                    self._answer(404, b"not found\n")

            def _answer(
                self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8"
            ) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                del format, args  # probes every few seconds: not worth a log line

        self.server = ThreadingHTTPServer(address, Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, name="audit http", daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
