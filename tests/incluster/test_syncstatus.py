"""This pod's SyncPodStatus (pure), made from what is synced, and what changes it at once."""

from __future__ import annotations

from celkeeper.cel.inventory import Gvk
from celkeeper.incluster.datasync import KindState
from celkeeper.incluster.podstatus import Pod
from celkeeper.incluster.syncstatus import _stable, sync_pod_status
from celkeeper.kube.resources import Resource

INGRESS = Gvk("networking.k8s.io", "v1", "Ingress")
SERVICE = Gvk("", "v1", "Service")


def test_the_sync_pod_status_and_what_changes_it_at_once() -> None:
    ingresses = Resource("networking.k8s.io", "v1", "ingresses", "Ingress")
    states = [
        KindState(
            INGRESS,
            ("SyncSet/mine",),
            ingresses,
            synced=True,
            objects=3,
            resource_version="42",
            listed_at=1_800_000_000.0,
            observed_at=1_800_000_060.0,
        ),
        KindState(
            Gvk("example.com", "v1", "Widget"),
            ("SyncSet/mine",),
            None,
            error="not served: the API server serves no example.com/v1",
        ),
    ]
    status = sync_pod_status(Pod("pod-a", "celkeeper-system"), states, ["kube-*"], [])
    assert status["metadata"]["name"] == "pod-a"
    assert status["status"] == {
        "id": "pod-a",
        "kinds": [
            {
                "group": "networking.k8s.io",
                "version": "v1",
                "kind": "Ingress",
                "resource": "ingresses",
                "synced": True,
                "objects": 3,
                "sources": ["SyncSet/mine"],
                "resourceVersion": "42",
                "listedAt": "2027-01-15T08:00:00Z",
                "observedAt": "2027-01-15T08:01:00Z",
            },
            {
                "group": "example.com",
                "version": "v1",
                "kind": "Widget",
                "resource": "",
                "synced": False,
                "objects": 0,
                "sources": ["SyncSet/mine"],
                "error": "not served: the API server serves no example.com/v1",
            },
        ],
        "excludedNamespaces": ["kube-*"],
    }
    # freshness alone is written at most every interval; whether a kind is synced, at once
    fresher = sync_pod_status(
        Pod("pod-a", "celkeeper-system"),
        [
            KindState(
                INGRESS,
                ("SyncSet/mine",),
                ingresses,
                synced=True,
                objects=4,
                resource_version="43",
                listed_at=1_800_000_000.0,
                observed_at=1_800_000_090.0,
            ),
            states[1],
        ],
        ["kube-*"],
        [],
    )
    assert _stable(fresher["status"]) == _stable(status["status"])
    unsynced = sync_pod_status(Pod("pod-a", "celkeeper-system"), [states[1]], ["kube-*"], [])
    assert _stable(unsynced["status"]) != _stable(status["status"])
