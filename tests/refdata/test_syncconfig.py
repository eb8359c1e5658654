"""The sync configuration as Gatekeeper reads it (pure), and the SyncPodStatus made from what is synced."""

from __future__ import annotations

from celkeeper.cel.inventory import Gvk
from celkeeper.incluster.datasync import KindState
from celkeeper.incluster.podstatus import Pod
from celkeeper.incluster.syncconfig import namespace_excluded, sync_config
from celkeeper.incluster.syncstatus import _stable, sync_pod_status
from celkeeper.kube.resources import Resource

INGRESS = Gvk("networking.k8s.io", "v1", "Ingress")
SERVICE = Gvk("", "v1", "Service")


def config(name: str, spec: dict) -> dict:
    return {
        "apiVersion": "config.gatekeeper.sh/v1alpha1",
        "kind": "Config",
        "metadata": {"name": name, "namespace": "celkeeper-system"},
        "spec": spec,
    }


def syncset(name: str, *gvks: dict) -> dict:
    return {"kind": "SyncSet", "metadata": {"name": name}, "spec": {"gvks": list(gvks)}}


def test_the_union_of_the_config_and_every_syncset() -> None:
    found = sync_config(
        [
            config(
                "config",
                {
                    "sync": {
                        "syncOnly": [{"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"}]
                    },
                    "match": [
                        {"processes": ["sync"], "excludedNamespaces": ["kube-*"]},
                        {"processes": ["*"], "excludedNamespaces": ["secret"]},
                        {"processes": ["audit", "webhook"], "excludedNamespaces": ["not-for-sync"]},
                    ],
                },
            ),
            # Gatekeeper reads only the Config named `config`
            config("other", {"sync": {"syncOnly": [{"version": "v1", "kind": "Pod"}]}}),
        ],
        [
            ("syncset.gatekeeper.sh", syncset("gk", {"group": "", "version": "v1", "kind": "Service"})),
            (
                "syncset.celkeeper.io",
                syncset("mine", {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"}),
            ),
        ],
    )
    assert found.kinds == {
        SERVICE: ("SyncSet/gk (syncset.gatekeeper.sh)",),
        INGRESS: ("Config/celkeeper-system/config", "SyncSet/mine"),
    }
    assert found.excluded_namespaces == ("kube-*", "secret")
    assert found.excludes("kube-system") and found.excludes("secret") and not found.excludes("not-for-sync")
    assert found.problems == ()


def test_entries_that_name_no_kind_are_problems() -> None:
    found = sync_config(
        [],
        [
            ("syncset.celkeeper.io", syncset("bad", {"group": "x"}, "nope")),
            ("syncset.celkeeper.io", {"metadata": {"name": "odd"}, "spec": {"gvks": {}}}),
        ],
    )
    assert found.kinds == {}
    assert found.problems == (
        "SyncSet/bad: spec.gvks[0] needs a version and a kind (strings)",
        "SyncSet/bad: spec.gvks[1] must be a map of group, version and kind",
        "SyncSet/odd: spec.gvks must be a list of {group, version, kind}",
    )


def test_wildcards_are_gatekeepers() -> None:
    assert namespace_excluded(["kube-*"], "kube-public")
    assert not namespace_excluded(["kube-*"], "kubeless")
    assert namespace_excluded(["exact"], "exact")
    assert not namespace_excluded(["exact"], "exactly")


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
