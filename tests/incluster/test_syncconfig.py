"""The sync configuration as Gatekeeper reads it (pure): the union of the Config and every SyncSet."""

from __future__ import annotations

from celkeeper.cel.inventory import Gvk
from celkeeper.incluster.syncconfig import namespace_excluded, sync_config

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
