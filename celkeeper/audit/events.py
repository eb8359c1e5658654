"""Kubernetes Events for audit violations (`--emit-audit-events`), as Gatekeeper's audit emits them.

    sink = EventSink(client, namespace, involved_namespace=False)
    sink.start(); sink.emit(violation, audit_id); ...; sink.close()

One Warning event with reason `AuditViolation` per violation, annotated with Gatekeeper's keys
(pkg/audit/manager.go emitEvent): by default in celkeeper's namespace, its involvedObject naming the
violating object with the uid `<kind>/<namespace>/<name>/<constraint kind>//<constraint name>` (so
that events of one violation are told apart from the object's own); with `involved_namespace` in the
object's namespace with its real uid. The source component is `celkeeper-audit`.

Events are posted by a thread of their own from a bounded queue (a slow API never slows the audit;
when the queue is full, events are dropped and counted). client-go's recorder, which Gatekeeper uses,
folds repeated events into one; here the same violation (same object, constraint and message) is
emitted at most once per `repeat_after` seconds, remembered for at most MAX_REMEMBERED violations.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from celkeeper.audit.logs import constraint_fields, resource_fields
from celkeeper.audit.results import Violation, truncate
from celkeeper.kube import ApiError, Client, Resource
from celkeeper.model import JsonObject, JsonValue

log = logging.getLogger("celkeeper.audit")

REASON = "AuditViolation"
COMPONENT = "celkeeper-audit"
QUEUE_SIZE = 10_000
MAX_REMEMBERED = 100_000
REPEAT_AFTER = 600.0  # seconds: Kubernetes' event aggregation window


def events(namespace: str) -> Resource:
    return Resource("", "v1", "events", "Event", namespace=namespace)


def _time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_body(
    violation: Violation, audit_id: str, own_namespace: str, involved_namespace: bool, now: float
) -> JsonObject:
    """The Event (client-go's makeEvent with Gatekeeper's reference, annotations and message)."""
    ref = violation.ref
    kind, name = violation.constraint
    message = truncate(violation.message)
    namespace = ref.namespace if involved_namespace and ref.namespace else own_namespace
    involved: JsonObject = {"kind": ref.kind, "name": ref.name, "namespace": namespace}
    if involved_namespace:
        if ref.uid and ref.resource_version:
            involved["uid"] = ref.uid
            involved["resourceVersion"] = ref.resource_version
        text = f"Constraint: {name}, Message: {message}"
    else:
        involved["uid"] = f"{ref.kind}/{ref.namespace}/{ref.name}/{kind}//{name}"
        text = f"Resource Namespace: {ref.namespace}, Constraint: {name}, Message: {message}"
    annotations = {
        "process": "audit",
        "auditTimestamp": audit_id,
        "event_type": "violation_audited",
        **constraint_fields(kind, name),
        "constraint_action": violation.enforcement_action,
        "constraint_enforcement_actions": ",".join(violation.enforcement_actions),
        **resource_fields(ref),
    }
    stamp = _time(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{ref.name[:200]}.{int(now * 1e9):x}",
            "namespace": namespace,
            "annotations": annotations,
        },
        "involvedObject": involved,
        "reason": REASON,
        "message": text,
        "type": "Warning",
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
    }


class EventSink:
    def __init__(
        self,
        client: Client,
        namespace: str,
        *,
        involved_namespace: bool = False,
        repeat_after: float = REPEAT_AFTER,
        clock: Callable[[], float] = time.time,
        queue_size: int = QUEUE_SIZE,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.involved_namespace = involved_namespace
        self.repeat_after = repeat_after
        self.clock = clock
        self._queue: queue.Queue[Mapping[str, JsonValue] | None] = queue.Queue(queue_size)
        self._recent: OrderedDict[tuple[str, ...], float] = OrderedDict()
        self._thread: threading.Thread | None = None
        self.emitted = 0
        self.failed = 0
        self.dropped = 0
        self.suppressed = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="audit events", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 60.0) -> None:
        """Post what is queued (for at most `timeout` seconds), then stop."""
        if self._thread is None:
            return
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout)
        self._thread.join(timeout)

    def emit(self, violation: Violation, audit_id: str) -> None:
        now = self.clock()
        ref = violation.ref
        key = (ref.group, ref.kind, ref.namespace, ref.name, *violation.constraint, violation.message)
        last = self._recent.get(key)
        if last is not None and now - last < self.repeat_after:
            self.suppressed += 1
            return
        self._recent[key] = now
        self._recent.move_to_end(key)
        while len(self._recent) > MAX_REMEMBERED:
            self._recent.popitem(last=False)
        body = event_body(violation, audit_id, self.namespace, self.involved_namespace, now)
        try:
            self._queue.put_nowait(body)
        except queue.Full:
            self.dropped += 1

    def _run(self) -> None:
        while True:
            body = self._queue.get()
            if body is None:
                return
            try:
                self.client.create(events(str(body["metadata"]["namespace"])), body)
                self.emitted += 1
            except ApiError as err:
                self.failed += 1
                if self.failed <= 3 or self.failed % 1000 == 0:
                    log.warning("could not emit an audit event (%d failed so far): %s", self.failed, err)
