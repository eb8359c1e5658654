"""The audit's Events (celkeeper.audit.events): Gatekeeper's reason, annotations and involved object; at
most one per object and window, and a full queue drops rather than blocks."""

from __future__ import annotations

import threading
from typing import Any

from celkeeper.audit.events import EventSink, event_body, events
from celkeeper.audit.results import ObjectRef, Violation
from celkeeper.kube import ApiError
from tests.audit.values import VIOLATION
from tests.kube.fakes import FakeClient
from tests.support.waiting import wait_for


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
