"""Prometheus metrics of the webhook, correct across Gunicorn workers.

Under `celkeeper serve`, PROMETHEUS_MULTIPROC_DIR is set: counters and histograms are written by
each worker to files there, and /metrics (answered by any worker) merges them
(prometheus_client.multiprocess). Without it (tests using the Flask app directly) the metrics live
in the app's own registry.

Per request (workers):
    celkeeper_admission_requests_total{decision,operation}            decision: allow, warn, deny,
    celkeeper_admission_request_duration_seconds{decision,operation}  exempt, error, invalid
    celkeeper_constraint_evaluation_seconds{kind}                    per constraint kind and request
    celkeeper_violations_total{action,kind,constraint}               deny, warn and dryrun results
    celkeeper_snapshot_loads_total{result}                           ok, error (per worker load)
State, read from the status files at scrape time (so exact, whichever worker answers):
    celkeeper_snapshot_generation            latest generation the informer published
    celkeeper_snapshot_loaded_generation     generation every live worker has loaded (the smallest)
    celkeeper_snapshot_age_seconds           time since the snapshot of that generation was published
    celkeeper_templates_loaded, celkeeper_constraints_loaded   as loaded by the workers (smallest)
    celkeeper_policy_load_errors             problems found in the policies (parse, template, constraint)
    celkeeper_workers, celkeeper_workers_ready, celkeeper_informer_up
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from celkeeper.snapshot import InformerRecord, StateDir, WorkerBoard

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

REQUEST_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
EVALUATION_BUCKETS = (
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25,
)


def _multiprocess_dir() -> str | None:
    return os.environ.get(MULTIPROC_ENV) or None


class StateCollector:
    """Gauges computed when scraped, from the informer's and the workers' status files."""

    def __init__(self, state: StateDir, clock: Callable[[], float] = time.time) -> None:
        self.board = WorkerBoard(state.workers)
        self.informer = InformerRecord(state.informer)
        self.clock = clock

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, value=value)

        informer = self.informer.read()
        workers = self.board.read_all()
        alive = informer is not None and _alive(informer.pid)
        yield gauge("celkeeper_informer_up", "1 when the informer process runs", 1.0 if alive else 0.0)
        yield gauge("celkeeper_snapshot_generation", "Latest snapshot generation the informer published",
                    informer.generation if informer else 0)
        yield gauge("celkeeper_policy_load_errors", "Problems found in the policy sources (parse, template, "
                    "constraint errors) by the informer", len(informer.problems) if informer else 0)
        yield gauge("celkeeper_workers", "Live webhook workers", len(workers))
        yield gauge("celkeeper_workers_ready", "Workers that have loaded a complete snapshot",
                    sum(1 for w in workers if w.ready))
        loaded = [w for w in workers if w.generation]
        oldest = min(loaded, key=lambda w: w.generation) if loaded and len(loaded) == len(workers) else None
        yield gauge("celkeeper_snapshot_loaded_generation",
                    "Snapshot generation every live worker has loaded (0: some worker has none yet)",
                    oldest.generation if oldest else 0)
        if oldest is not None:
            yield gauge("celkeeper_snapshot_age_seconds",
                        "Seconds since the snapshot every worker has loaded was published",
                        max(0.0, self.clock() - oldest.snapshot_created))
        yield gauge("celkeeper_templates_loaded", "Compiled templates the workers enforce (smallest count)",
                    min((w.templates for w in workers), default=0))
        yield gauge("celkeeper_constraints_loaded", "Constraints the workers enforce (smallest count)",
                    min((w.constraints for w in workers), default=0))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class WebhookMetrics:
    """The per-request metrics of one worker (process)."""

    def __init__(self, state: StateDir | None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram, values

        self.multiprocess = _multiprocess_dir()
        if self.multiprocess and values.ValueClass is values.MutexValue:
            # prometheus_client was imported before the variable was set: choose the file-backed
            # values now, before any metric is made (only metrics made from here on are shared)
            values.ValueClass = values.get_value_class()
        # in multiprocess mode the values live in files: nothing needs registering in-process
        self.registry = None if self.multiprocess else CollectorRegistry(auto_describe=True)
        self.state = state
        reg = self.registry
        self.requests = Counter(
            "celkeeper_admission_requests", "Admission requests answered, by decision and operation",
            ["decision", "operation"], registry=reg,
        )
        self.latency = Histogram(
            "celkeeper_admission_request_duration_seconds",
            "Time to answer an admission request (body read to answer built), by decision and operation",
            ["decision", "operation"], buckets=REQUEST_BUCKETS, registry=reg,
        )
        self.evaluation = Histogram(
            "celkeeper_constraint_evaluation_seconds",
            "Time spent evaluating the constraints of one kind for one request",
            ["kind"], buckets=EVALUATION_BUCKETS, registry=reg,
        )
        self.violations = Counter(
            "celkeeper_violations",
            "Violations found at admission, by enforcement action, constraint kind and constraint",
            ["action", "kind", "constraint"], registry=reg,
        )
        self.snapshot_loads = Counter(
            "celkeeper_snapshot_loads", "Snapshots a worker loaded (ok) or could not load (error)",
            ["result"], registry=reg,
        )
        self._request_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._kind_children: dict[str, Any] = {}

    def observe_request(self, decision: str, operation: str, seconds: float) -> None:
        key = (decision, operation)
        children = self._request_children.get(key)
        if children is None:
            children = (self.requests.labels(decision, operation), self.latency.labels(decision, operation))
            self._request_children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def observe_evaluation(self, kind: str, seconds: float) -> None:
        child = self._kind_children.get(kind)
        if child is None:
            child = self._kind_children[kind] = self.evaluation.labels(kind)
        child.observe(seconds)

    def count_violation(self, action: str, kind: str, constraint: str) -> None:
        self.violations.labels(action, kind, constraint).inc()

    def render(self, accept: str | None = None) -> tuple[bytes, str]:
        """The exposition text (or OpenMetrics when asked for) and its content type."""
        from prometheus_client import CollectorRegistry
        from prometheus_client.exposition import choose_encoder

        if self.multiprocess:
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry, path=self.multiprocess)
        else:
            assert self.registry is not None
            registry = CollectorRegistry()
            registry.register(_Forward(self.registry))
        if self.state is not None:
            registry.register(StateCollector(self.state))
        encoder, content_type = choose_encoder(accept or "")
        return encoder(registry), content_type


class _Forward:
    """Collects another registry's metrics (so the state gauges can be added per scrape)."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Any]:
        yield from self.registry.collect()
