"""Prometheus metrics of the webhook, correct across Gunicorn workers.

Under `celkeeper serve`, PROMETHEUS_MULTIPROC_DIR is set: counters and histograms are written by
each worker to files there, and /metrics (answered by any worker) merges them
(prometheus_client.multiprocess). Without it (tests using the app directly) the metrics live
in the app's own registry.

Per request (workers):
    celkeeper_admission_requests_total{decision,operation}            decision: allow, warn, deny,
    celkeeper_admission_request_duration_seconds{decision,operation}  exempt, error, invalid
    celkeeper_constraint_evaluation_seconds{kind}                    per constraint kind and request
    celkeeper_violations_total{action,kind,constraint}               deny, warn and dryrun results
    celkeeper_snapshot_loads_total{result}                           ok, error (per worker load)
    celkeeper_decision_export_lines_total{result}                    --export-decisions: written,
                                                                     dropped (buffer full), failed
The per-request observations are gathered in the worker and written to the metric values together,
at most FLUSH_INTERVAL seconds later (by a timer thread; and when this worker answers /metrics, and
when it exits): writing each observation at once (a file-backed value per histogram bucket) cost
~40 us per review, writing them in batches almost nothing. A worker killed with SIGKILL loses at
most its last FLUSH_INTERVAL of request metrics.
State, read from the status files at scrape time (so exact, whichever worker answers):
    celkeeper_snapshot_generation            latest generation the informer published
    celkeeper_snapshot_loaded_generation     generation every live worker has loaded (the smallest)
    celkeeper_snapshot_age_seconds           time since the snapshot of that generation was published
    celkeeper_templates_loaded, celkeeper_constraints_loaded   as loaded by the workers (smallest)
    celkeeper_policy_load_errors             problems found in the policies (parse, template, constraint)
    celkeeper_policy_sources_held            sources enforced at their last good version (fail-static)
    celkeeper_workers, celkeeper_workers_ready, celkeeper_informer_up
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import threading
import time
import weakref
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from celkeeper.snapshot import InformerRecord, StateDir, WorkerBoard

log = logging.getLogger("celkeeper.webhook")

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

REQUEST_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
EVALUATION_BUCKETS = (
    0.00001,
    0.000025,
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.05,
    0.25,
)
FLUSH_INTERVAL = 0.5  # seconds: request observations reach the metric values at most this late


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
        yield gauge(
            "celkeeper_snapshot_generation",
            "Latest snapshot generation the informer published",
            informer.generation if informer else 0,
        )
        yield gauge(
            "celkeeper_policy_load_errors",
            "Problems found in the policy sources (parse, template, constraint errors) by the informer",
            len(informer.problems) if informer else 0,
        )
        held = len(informer.held) if informer else 0
        yield gauge(
            "celkeeper_policy_sources_held",
            "Policy sources (files, objects) enforced at their "
            "last good version: the current one cannot be used",
            held,
        )
        yield gauge("celkeeper_workers", "Live webhook workers", len(workers))
        yield gauge(
            "celkeeper_workers_ready",
            "Workers that have loaded a complete snapshot",
            sum(1 for w in workers if w.ready),
        )
        loaded = [w for w in workers if w.generation]
        oldest = min(loaded, key=lambda w: w.generation) if loaded and len(loaded) == len(workers) else None
        yield gauge(
            "celkeeper_snapshot_loaded_generation",
            "Snapshot generation every live worker has loaded (0: some worker has none yet)",
            oldest.generation if oldest else 0,
        )
        if oldest is not None:
            yield gauge(
                "celkeeper_snapshot_age_seconds",
                "Seconds since the snapshot every worker has loaded was published",
                max(0.0, self.clock() - oldest.snapshot_created),
            )
        yield gauge(
            "celkeeper_templates_loaded",
            "Compiled templates the workers enforce (smallest count)",
            min((w.templates for w in workers), default=0),
        )
        yield gauge(
            "celkeeper_constraints_loaded",
            "Constraints the workers enforce (smallest count)",
            min((w.constraints for w in workers), default=0),
        )


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
            "celkeeper_admission_requests",
            "Admission requests answered, by decision and operation",
            ["decision", "operation"],
            registry=reg,
        )
        self.latency = Histogram(
            "celkeeper_admission_request_duration_seconds",
            "Time to answer an admission request (body read to answer built), by decision and operation",
            ["decision", "operation"],
            buckets=REQUEST_BUCKETS,
            registry=reg,
        )
        self.evaluation = Histogram(
            "celkeeper_constraint_evaluation_seconds",
            "Time spent evaluating the constraints of one kind for one request",
            ["kind"],
            buckets=EVALUATION_BUCKETS,
            registry=reg,
        )
        self.violations = Counter(
            "celkeeper_violations",
            "Violations found at admission, by enforcement action, constraint kind and constraint",
            ["action", "kind", "constraint"],
            registry=reg,
        )
        self.snapshot_loads = Counter(
            "celkeeper_snapshot_loads",
            "Snapshots a worker loaded (ok) or could not load (error)",
            ["result"],
            registry=reg,
        )
        self.export_lines = Counter(
            "celkeeper_decision_export_lines",
            "Decision export lines (--export-decisions), by result: written, dropped (the buffer was full), "
            "failed (the write was refused)",
            ["result"],
            registry=reg,
        )
        self._lock = threading.Lock()
        self._exports: dict[str, float] = {}
        # observations not yet written: per label values, [count, sum, bucket counts...] of a
        # histogram (the request counter counts with its histogram), or [count] of a counter
        self._requests: dict[tuple[str, str], list[float]] = {}
        self._evaluations: dict[str, list[float]] = {}
        self._violations: dict[tuple[str, str, str], list[float]] = {}
        self._request_bounds = (*REQUEST_BUCKETS, math.inf)
        self._evaluation_bounds = (*EVALUATION_BUCKETS, math.inf)
        self._children: dict[tuple[Any, ...], Any] = {}
        self._flusher: threading.Thread | None = None
        self._stop = threading.Event()

    # -- recording (request path: in memory, under one lock) ------------------------------------------------
    def observe_request(self, decision: str, operation: str, seconds: float) -> None:
        with self._lock:
            acc = self._requests.get((decision, operation))
            if acc is None:
                acc = self._requests[(decision, operation)] = [0.0] * (len(self._request_bounds) + 2)
            acc[0] += 1
            acc[1] += seconds
            acc[2 + bisect_left(self._request_bounds, seconds)] += 1
        self._ensure_flusher()

    def observe_evaluation(self, kind: str, seconds: float) -> None:
        self.observe_evaluations(((kind, seconds),))

    def observe_evaluations(self, timings: Iterable[tuple[str, float]]) -> None:
        """Seconds spent per constraint kind (a Decision's timings)."""
        bounds = self._evaluation_bounds
        with self._lock:
            pending = self._evaluations  # read under the lock: flush() swaps it
            for kind, seconds in timings:
                acc = pending.get(kind)
                if acc is None:
                    acc = pending[kind] = [0.0] * (len(bounds) + 2)
                acc[0] += 1
                acc[1] += seconds
                acc[2 + bisect_left(bounds, seconds)] += 1

    def count_violation(self, action: str, kind: str, constraint: str) -> None:
        with self._lock:
            acc = self._violations.get((action, kind, constraint))
            if acc is None:
                acc = self._violations[(action, kind, constraint)] = [0.0]
            acc[0] += 1

    def count_export(self, result: str, lines: int) -> None:
        """Decision export lines: written, dropped, failed (celkeeper.webhook.export)."""
        with self._lock:
            self._exports[result] = self._exports.get(result, 0.0) + lines
        self._ensure_flusher()

    # -- writing ---------------------------------------------------------------------------------------------
    def flush(self) -> None:
        """Write the observations gathered so far to the metric values."""
        with self._lock:
            requests, self._requests = self._requests, {}
            evaluations, self._evaluations = self._evaluations, {}
            violations, self._violations = self._violations, {}
            exports, self._exports = self._exports, {}
        for (decision, operation), acc in requests.items():
            self._child(self.requests, decision, operation).inc(acc[0])
            _add(self._child(self.latency, decision, operation), acc)
        for kind, acc in evaluations.items():
            _add(self._child(self.evaluation, kind), acc)
        for labels, acc in violations.items():
            self._child(self.violations, *labels).inc(acc[0])
        for result, lines in exports.items():
            self._child(self.export_lines, result).inc(lines)

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def _ensure_flusher(self) -> None:
        if self._flusher is not None:
            return
        with self._lock:
            if self._flusher is not None:
                return
            # started on first use, so in the worker (after the fork), never in the master
            self._flusher = threading.Thread(
                target=_flush_loop, args=(weakref.ref(self), self._stop), name="metrics-flush", daemon=True
            )
            self._flusher.start()
        atexit.register(_flush_at_exit, weakref.ref(self))

    def close(self) -> None:
        """Write what is pending and stop the timer thread."""
        self._stop.set()
        self.flush()

    def render(self, accept: str | None = None) -> tuple[bytes, str]:
        """The exposition text (or OpenMetrics when asked for) and its content type."""
        from prometheus_client import CollectorRegistry
        from prometheus_client.exposition import choose_encoder

        self.flush()
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


def _add(child: Any, acc: list[float]) -> None:
    """Add [count, sum, per-bucket counts] to a histogram child, each of its values written once
    (prometheus_client keeps them as `_sum` and `_buckets`, one per bucket, not cumulative)."""
    buckets = getattr(child, "_buckets", None)
    total = getattr(child, "_sum", None)
    if not isinstance(buckets, list) or total is None or len(buckets) != len(acc) - 2:
        raise TypeError(f"unexpected prometheus_client histogram: {type(child).__name__}")
    total.inc(acc[1])
    for value, n in zip(buckets, acc[2:], strict=True):
        if n:
            value.inc(n)


def _flush_at_exit(ref: Callable[[], WebhookMetrics | None]) -> None:
    metrics = ref()
    if metrics is not None:
        metrics.close()


def _flush_loop(ref: Callable[[], WebhookMetrics | None], stop: threading.Event) -> None:
    while not stop.wait(FLUSH_INTERVAL):
        metrics = ref()
        if metrics is None:
            return
        try:
            metrics.flush()
        except Exception:  # never silently: keep trying (each flush writes what it can)
            log.exception("cannot write the request metrics")
        del metrics
