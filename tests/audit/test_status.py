"""The audit's status writes (celkeeper.audit.status) on a fake of our own Client: the audit's fields replaced
whole and the pods' kept, conflicts settled, a deleted or re-created constraint never written."""

from __future__ import annotations

from typing import Any

from celkeeper.audit.results import ObjectRef, RunResults, Violation
from celkeeper.audit.status import Audited, with_audit_status, write_results
from celkeeper.incluster.resources import constraints
from tests.kube.fakes import FakeClient

KIND = "K8sLabels"


RESOURCE = constraints(KIND)


def constraint(name: str, uid: str, status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "constraints.celkeeper.io/v1beta1",
        "kind": KIND,
        "metadata": {"name": name, "uid": uid, "resourceVersion": "5"},
    }
    if status is not None:
        obj["status"] = status
    return obj


def test_audit_fields_are_replaced_whole_and_the_pods_fields_kept() -> None:
    stored = constraint(
        "c",
        "u1",
        {
            "byPod": [{"id": "pod-a"}],
            "enforced": True,
            "totalViolations": 9,
            "violations": [{"name": "old"}],
            "auditTimestamp": "then",
        },
    )
    body = with_audit_status(stored, {"auditTimestamp": "now", "totalViolations": 0})
    assert body["status"] == {
        "byPod": [{"id": "pod-a"}],
        "enforced": True,
        "auditTimestamp": "now",
        "totalViolations": 0,
    }
    assert body["metadata"]["resourceVersion"] == "5"
    assert stored["status"]["violations"] == [{"name": "old"}]  # the watched copy is not changed


def test_status_writes_retry_conflicts_and_skip_deleted_and_recreated_constraints() -> None:
    fake = FakeClient()
    fake.put(
        RESOURCE,
        constraint("conflicted", "u1"),
        constraint("recreated", "u-new"),
        constraint("steady", "u3", {"byPod": [{"id": "p"}]}),
    )
    fake.conflicts[(RESOURCE, "conflicted")] = 2
    results = RunResults(limit=5)
    ref = ObjectRef("", "v1", "Pod", "ns", "web")
    results.add(Violation((KIND, "steady"), "deny", (), "bad", ref))
    audited = [
        (Audited(RESOURCE, "conflicted", "u1"), fake.get(RESOURCE, "conflicted")),
        (Audited(RESOURCE, "deleted", "u2"), None),
        (Audited(RESOURCE, "recreated", "u-old"), fake.get(RESOURCE, "recreated")),
        (Audited(RESOURCE, "steady", "u3"), fake.get(RESOURCE, "steady")),
    ]
    written = write_results(fake, audited, results, "2026-12-01T10:00:00Z")
    assert (written.written, written.gone, written.failed) == (2, 2, ())
    assert [w for w in fake.writes if w[0] == "replace/status"] == [
        ("replace/status", RESOURCE, "conflicted"),
        ("replace/status", RESOURCE, "steady"),
    ]
    steady = fake.get(RESOURCE, "steady")["status"]
    assert steady == {
        "byPod": [{"id": "p"}],
        "auditTimestamp": "2026-12-01T10:00:00Z",
        "totalViolations": 1,
        "violations": [
            {
                "group": "",
                "version": "v1",
                "kind": "Pod",
                "namespace": "ns",
                "name": "web",
                "message": "bad",
                "enforcementAction": "deny",
            }
        ],
    }
    assert "status" not in fake.get(RESOURCE, "recreated")
    assert fake.get(RESOURCE, "conflicted")["status"]["totalViolations"] == 0


def test_a_constraint_that_keeps_conflicting_is_reported_and_the_others_written() -> None:
    fake = FakeClient()
    fake.put(RESOURCE, constraint("busy", "u1"), constraint("calm", "u2"))
    fake.conflicts[(RESOURCE, "busy")] = 100
    written = write_results(
        fake,
        [(Audited(RESOURCE, "busy", "u1"), None), (Audited(RESOURCE, "calm", "u2"), None)],
        RunResults(),
        "t",
    )
    assert written.written == 1 and len(written.failed) == 1 and "kept changing" in written.failed[0]
