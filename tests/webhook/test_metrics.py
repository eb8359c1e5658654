"""WebhookMetrics in-process: observations gathered in batches and written later come out exactly as
prometheus_client's own Histogram and Counter would show them observed one at a time."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from celkeeper.webhook import metrics as metrics_module
from celkeeper.webhook.metrics import EVALUATION_BUCKETS, REQUEST_BUCKETS, WebhookMetrics

# on, just below and just above bucket bounds (`le` is inclusive), far above the last, and zero
REQUEST_SECONDS = [0.0, 0.0005, 0.00049, 0.00051, 0.001, 0.0042, 0.01, 0.3, 2.5, 7.0, 0.0005]
EVALUATION_SECONDS = [0.00001, 0.000011, 0.0001, 0.25, 0.26, 0.0]


def _samples(text: str, names: tuple[str, ...]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith(names) and not s.name.endswith("_created"):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture
def webhook_metrics(monkeypatch: pytest.MonkeyPatch) -> Iterator[WebhookMetrics]:
    monkeypatch.delenv(metrics_module.MULTIPROC_ENV, raising=False)
    m = WebhookMetrics(None)
    yield m
    m.close()


def test_batched_observations_equal_one_by_one(webhook_metrics: WebhookMetrics) -> None:
    reference = CollectorRegistry()
    requests = Counter("celkeeper_admission_requests", "", ["decision", "operation"], registry=reference)
    latency = Histogram(
        "celkeeper_admission_request_duration_seconds",
        "",
        ["decision", "operation"],
        buckets=REQUEST_BUCKETS,
        registry=reference,
    )
    evaluation = Histogram(
        "celkeeper_constraint_evaluation_seconds",
        "",
        ["kind"],
        buckets=EVALUATION_BUCKETS,
        registry=reference,
    )
    violations = Counter("celkeeper_violations", "", ["action", "kind", "constraint"], registry=reference)

    for i, seconds in enumerate(REQUEST_SECONDS):
        decision = ("allow", "deny", "warn")[i % 3]
        webhook_metrics.observe_request(decision, "CREATE", seconds)
        requests.labels(decision, "CREATE").inc()
        latency.labels(decision, "CREATE").observe(seconds)
    timings = [(("K8sA", "K8sB")[i % 2], s) for i, s in enumerate(EVALUATION_SECONDS)]
    webhook_metrics.observe_evaluations(timings)
    for kind, seconds in timings:
        evaluation.labels(kind).observe(seconds)
    for _ in range(3):
        webhook_metrics.count_violation("deny", "K8sA", "a")
        violations.labels("deny", "K8sA", "a").inc()
    webhook_metrics.count_violation("warn", "K8sB", "b")
    violations.labels("warn", "K8sB", "b").inc()

    names = ("celkeeper_admission", "celkeeper_constraint_evaluation", "celkeeper_violations")
    text, _ = webhook_metrics.render()  # flushes what is pending
    ours = _samples(text.decode(), names)
    expected = _samples(generate_latest(reference).decode(), names)
    assert ours == pytest.approx(expected)
    assert ours[("celkeeper_admission_requests_total", (("decision", "allow"), ("operation", "CREATE")))] == 4

    # written once: a second flush adds nothing, later observations add to what is there
    webhook_metrics.flush()
    webhook_metrics.observe_request("allow", "CREATE", 0.002)
    latency.labels("allow", "CREATE").observe(0.002)
    requests.labels("allow", "CREATE").inc()
    text, _ = webhook_metrics.render()
    expected = _samples(generate_latest(reference).decode(), names)
    assert _samples(text.decode(), names) == pytest.approx(expected)


def test_observations_reach_the_values_without_a_scrape(webhook_metrics: WebhookMetrics) -> None:
    webhook_metrics.observe_request("deny", "UPDATE", 0.003)
    child = webhook_metrics.requests.labels("deny", "UPDATE")
    assert child._value.get() == 0  # gathered, not written yet
    webhook_metrics.close()  # what a worker does when it exits (and the timer thread every interval)
    assert child._value.get() == 1
