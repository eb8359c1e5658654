"""The adapter parts audit adds to celkeeper.kube, on a fake of our own Client: paged lists that restart
after an expired continue token without delivering an object twice, discovery's preferred versions,
status writes that settle conflicts and never write a deleted or re-created constraint, deep JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest

from celkeeper.audit.results import ObjectRef, RunResults, Violation
from celkeeper.audit.status import Audited, with_audit_status, write_results
from celkeeper.incluster.resources import constraints
from celkeeper.kube import ApiError, Resource, discover, pages
from celkeeper.kube.jsondeep import depth, loads_deep
from tests.kube.fakes import FakeClient

PODS = Resource("", "v1", "pods", "Pod")
GONE = ApiError(410, "Expired", "The provided continue parameter is too old")


def pod(namespace: str, name: str, version: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": namespace, "name": name, "resourceVersion": version},
    }


def names(found: list[Any]) -> list[str]:
    return [f"{o['metadata']['namespace']}/{o['metadata']['name']}" for page in found for o in page.items]


def test_pages_are_chunks_in_key_order() -> None:
    fake = FakeClient()
    fake.put(PODS, *[pod("a", f"p{i}") for i in range(7)])
    found = list(pages(fake, PODS, 3))
    assert [len(p.items) for p in found] == [3, 3, 1]
    assert names(found) == [f"a/p{i}" for i in range(7)]


def test_an_expired_continue_token_restarts_without_delivering_an_object_twice() -> None:
    fake = FakeClient()
    fake.put(PODS, *[pod("a", f"p{i}") for i in range(6)])
    fake.expire[PODS] = [GONE]
    restarts: list[ApiError] = []
    found = []
    for page in pages(fake, PODS, 2, on_restart=restarts.append):
        found.append(page)
        if len(found) == 1:  # meanwhile: one object before the point reached goes, one after comes
            del fake.collections[PODS]["a/p0"]
            fake.put(PODS, pod("a", "p9"))
    assert restarts == [GONE]
    assert names(found) == ["a/p0", "a/p1", "a/p2", "a/p3", "a/p4", "a/p5", "a/p9"]
    assert [token for _, token in fake.pages] == ["", "a/p1", "", "a/p2", "a/p4"]


def test_a_list_that_keeps_expiring_gives_up_with_the_error() -> None:
    fake = FakeClient()
    fake.put(PODS, *[pod("a", f"p{i}") for i in range(6)])
    fake.expire[PODS] = [GONE] * 10
    with pytest.raises(ApiError) as raised:
        list(pages(fake, PODS, 2, max_restarts=2))
    assert raised.value.gone


def test_other_errors_are_not_retried() -> None:
    with pytest.raises(ApiError) as raised:
        list(pages(FakeClient(), PODS, 2))
    assert raised.value.not_found


def test_discovery_gives_each_resource_in_its_preferred_version_and_reports_broken_groups() -> None:
    fake = FakeClient()
    fake.paths = {
        "/api": {"versions": ["v1"]},
        "/api/v1": {
            "resources": [
                {"name": "pods", "kind": "Pod", "namespaced": True, "verbs": ["get", "list", "watch"]},
                {"name": "pods/status", "kind": "Pod", "namespaced": True, "verbs": ["get", "update"]},
                {"name": "bindings", "kind": "Binding", "namespaced": True, "verbs": ["create"]},
            ]
        },
        "/apis": {
            "groups": [
                {
                    "name": "widgets.example.com",
                    "preferredVersion": {"version": "v2"},
                    "versions": [{"version": "v1"}, {"version": "v2"}, {"version": "v3alpha1"}],
                },
                {
                    "name": "metrics.k8s.io",
                    "preferredVersion": {"version": "v1beta1"},
                    "versions": [{"version": "v1beta1"}],
                },
            ]
        },
        "/apis/widgets.example.com/v1": {
            "resources": [
                {"name": "widgets", "kind": "Widget", "namespaced": True, "verbs": ["list"]},
                {"name": "gadgets", "kind": "Gadget", "namespaced": False, "verbs": ["list"]},
            ]
        },
        "/apis/widgets.example.com/v2": {
            "resources": [
                {"name": "widgets", "kind": "Widget", "namespaced": True, "verbs": ["list"]},
            ]
        },
        "/apis/widgets.example.com/v3alpha1": {
            "resources": [
                {"name": "widgets", "kind": "Widget", "namespaced": True, "verbs": ["list"]},
                {"name": "sprockets", "kind": "Sprocket", "namespaced": True, "verbs": ["list"]},
            ]
        },
    }
    found = discover(fake)
    by_name = {str(r): (r.version, r.listable, r.namespaced) for r in found.resources}
    assert by_name == {
        "pods": ("v1", True, True),
        "bindings": ("v1", False, True),
        "widgets.widgets.example.com": ("v2", True, True),  # the preferred version
        "gadgets.widgets.example.com": ("v1", True, False),  # only served there
        "sprockets.widgets.example.com": ("v3alpha1", True, True),
    }
    assert len(found.errors) == 1 and found.errors[0].startswith("metrics.k8s.io/v1beta1: 404")


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


def test_json_as_deep_as_the_api_server_allows() -> None:
    text = '{"a":' * 10_000 + "1" + "}" * 10_000
    value = loads_deep(text.encode())
    assert depth(value) == 10_000
    assert depth(value, stop=50) == 50
    assert depth({"a": [1, {"b": []}]}) == 4 and depth(1) == 0
    with pytest.raises(ValueError):
        loads_deep(b"{not json")
    assert json.loads("[1]") == loads_deep("[1]")
