"""The Kubernetes source as the informer sees it (against a fake of celkeeper's own API adapter), and the
informer's rules for sources that bootstrap: synced only once everything that existed is listed, a
constraint kind watched as soon as its template appears, a complete snapshot never replaced by a
partial one, and the source told about every snapshot the workers are to load."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from celkeeper.incluster import TEMPLATES, constraints, item_name
from celkeeper.informer import Informer, KubernetesOptions, KubernetesSource, Listing
from celkeeper.kube import NAMESPACES, WatchEvent
from celkeeper.settings import Settings
from celkeeper.snapshot import ORIGIN_OBJECT, Snapshot, SnapshotItem, StateDir
from tests.incluster.support import required_labels, required_labels_template
from tests.kube.fakes import FakeClient
from tests.support.waiting import wait_for


def api(obj: dict[str, Any], version: str, uid: str) -> dict[str, Any]:
    obj["metadata"].update(resourceVersion=version, uid=uid, generation=1)
    return obj


@pytest.fixture
def state(tmp_path: Path) -> StateDir:
    found = StateDir(tmp_path / "state")
    found.reset()
    return found


@pytest.fixture
def client() -> FakeClient:
    found = FakeClient()
    found.put(
        NAMESPACES,
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "apps", "resourceVersion": "1", "labels": {"team": "a"}},
        },
    )
    found.put(TEMPLATES, api(required_labels_template("Kept"), "2", "t1"), version="5")
    return found


@pytest.fixture
def source(client: FakeClient, state: StateDir) -> Iterator[KubernetesSource]:
    found = KubernetesSource(KubernetesOptions(state=state, pod_name="pod-a"), client=client)  # type: ignore[arg-type]
    yield found
    found.close()


def test_synced_only_once_every_constraint_kind_of_the_templates_is_listed(
    client: FakeClient, source: KubernetesSource
) -> None:
    client.put(constraints("Kept"), api(required_labels("Kept", "c1", ["x"], []), "3", "c1"), version="5")
    gate = client.hold(constraints("Kept"))
    source.start()
    listing = wait_for(lambda: (found := source.listing()).items and found, timeout=5, what="the template")
    assert not listing.synced
    assert [i.name for i in listing.items] == ["constrainttemplate/kept"]
    gate.set()
    listing = wait_for(lambda: (found := source.listing()).synced and found, timeout=5, what="synced")
    assert [i.name for i in listing.items] == ["constraint/Kept/c1", "constrainttemplate/kept"]
    assert all(i.origin == ORIGIN_OBJECT for i in listing.items)
    assert json.loads(listing.items[0].text)["spec"]["parameters"] == {"labels": ["x"]}
    assert "resourceVersion" not in listing.items[0].text
    assert listing.namespaces_complete and listing.namespaces["apps"]["metadata"]["labels"] == {"team": "a"}


def test_a_new_template_starts_its_constraint_watch_and_a_deleted_one_stops_it(
    client: FakeClient, source: KubernetesSource
) -> None:
    source.start()
    wait_for(lambda: source.listing().synced, timeout=5, what="synced")
    templates = client.stream(TEMPLATES)
    added = api(required_labels_template("Later"), "6", "t2")
    client.put(constraints("Later"), api(required_labels("Later", "c2", ["y"], []), "7", "c2"), version="8")
    templates.push(WatchEvent("ADDED", added))
    wait_for(
        lambda: "constraint/Later/c2" in {i.name for i in source.listing().items},
        timeout=5,
        what="the new kind's constraints",
    )
    later = client.stream(constraints("Later"))
    templates.push(WatchEvent("DELETED", added))
    wait_for(later.closed.is_set, timeout=5, what="the kind's watch to stop")
    assert {i.name for i in source.listing().items} == {"constrainttemplate/kept"}


class ScriptedSource:
    """A Source whose listings the test sets; it records what the informer tells it."""

    description = "scripted"

    def __init__(self, listing: Listing) -> None:
        self.current = listing
        self.told: list[tuple[int, bool, int]] = []

    def start(self) -> None: ...

    def close(self) -> None: ...

    def wait(self, timeout: float) -> None: ...

    def listing(self) -> Listing:
        return self.current

    def published(self, snapshot: Snapshot, policies: Any, errors: Any) -> None:
        self.told.append((snapshot.generation, snapshot.synced, len(policies.constraints)))


def items(*objects: dict[str, Any]) -> tuple[SnapshotItem, ...]:
    return tuple(SnapshotItem(str(item_name(o)), json.dumps(o), origin=ORIGIN_OBJECT) for o in objects)


def test_a_partial_listing_never_replaces_a_complete_snapshot(state: StateDir) -> None:
    full = items(
        api(required_labels_template("Kept"), "1", "t"),
        api(required_labels("Kept", "c", ["x"], []), "2", "c"),
    )
    source = ScriptedSource(Listing(items=full, synced=True))
    informer = Informer(source, state, Settings())
    first = informer.step()
    assert first is not None and first.synced
    assert source.told == [(1, True, 1)]
    source.current = Listing(items=full[:1], synced=False)  # e.g. the informer restarted, still listing
    assert informer.step() is None
    restarted = Informer(source, state, Settings())  # a new informer process on the same state
    assert restarted.step() is None and restarted.last is not None and restarted.last.generation == 1
    assert source.told == [(1, True, 1)]
    source.current = Listing(items=full, synced=True)  # its listing agrees with what is published
    assert restarted.step() is None
    assert source.told == [(1, True, 1), (1, True, 1)]  # told once, so it reports the pod's status
    assert restarted.step() is None and len(source.told) == 2


def test_a_cluster_source_that_cannot_work_fails_at_start_with_one_line(tmp_path: Path) -> None:
    from celkeeper.tls import write_certificates

    certs = write_certificates(tmp_path / "certs", ["localhost"], ["127.0.0.1"])
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "celkeeper",
            "serve",
            "--source",
            "kubernetes",
            "--kubeconfig",
            str(tmp_path / "missing"),
            "--cert",
            str(certs.cert),
            "--key",
            str(certs.key),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    missing = tmp_path / "missing"
    assert proc.stderr.strip().splitlines() == [f"celkeeper serve: kubeconfig {missing} does not exist"]


def test_expansion_templates_are_listed_with_the_policies(
    client: FakeClient, source: KubernetesSource
) -> None:
    from celkeeper.incluster.resources import EXPANSION_TEMPLATES

    expansion = {
        "apiVersion": "expansion.gatekeeper.sh/v1beta1",
        "kind": "ExpansionTemplate",
        "metadata": {"name": "expand-deployments"},
        "spec": {
            "applyTo": [{"groups": ["apps"], "versions": ["v1"], "kinds": ["Deployment"]}],
            "templateSource": "spec.template",
            "generatedGVK": {"version": "v1", "kind": "Pod"},
        },
        "status": {"byPod": [{"id": "gatekeeper-0"}]},
    }
    client.put(EXPANSION_TEMPLATES, api(expansion, "9", "e1"), version="9")
    source.start()
    listing = wait_for(lambda: (found := source.listing()).synced and found, timeout=5, what="synced")
    (item,) = [i for i in listing.items if i.name.startswith("expansiontemplate/")]
    assert item.name == "expansiontemplate/expand-deployments"
    assert json.loads(item.text) == {k: v for k, v in expansion.items() if k != "status"} | {
        "metadata": {"name": "expand-deployments", "uid": "e1", "generation": 1}
    }


def test_a_syncset_naming_a_kind_already_synced_is_reported_at_once(
    client: FakeClient, source: KubernetesSource, state: StateDir
) -> None:
    """The SyncPodStatus follows the synced data as it changes, not at the next resync (a minute): a kind
    listed, then a SyncSet that only adds a source to it (no list starts: nothing keeps the writer busy)."""
    from celkeeper.incluster.resources import sync_pod_statuses
    from celkeeper.incluster.syncconfig import GATEKEEPER_SYNCSETS, SYNCSETS
    from celkeeper.kube.resources import Resource

    def syncset(api_version: str, name: str) -> dict[str, Any]:
        gvk = {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"}
        return {
            "apiVersion": api_version,
            "kind": "SyncSet",
            "metadata": {"name": name},
            "spec": {"gvks": [gvk]},
        }

    def sources() -> list[str] | None:
        try:
            status = json.loads(state.data_status.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        entry = next((k for k in status.get("kinds") or () if k["kind"] == "Ingress" and k["synced"]), None)
        return entry and entry["sources"]

    client.paths["/apis/networking.k8s.io/v1"] = {
        "resources": [{"name": "ingresses", "kind": "Ingress", "namespaced": True}]
    }
    client.put(Resource("networking.k8s.io", "v1", "ingresses", "Ingress"), version="10")
    client.put(SYNCSETS, api(syncset("syncset.celkeeper.io/v1alpha1", "ours"), "10", "s1"), version="10")
    client.put(GATEKEEPER_SYNCSETS, version="10")  # installed, empty
    client.put(sync_pod_statuses(source.options.pod_namespace), version="10")  # installed: no retries
    source.start()
    wait_for(lambda: sources() == ["SyncSet/ours"], timeout=5, what="Ingresses to be synced")
    theirs = api(syncset("syncset.gatekeeper.sh/v1alpha1", "theirs"), "11", "s2")
    client.stream(GATEKEEPER_SYNCSETS).push(WatchEvent("ADDED", theirs))
    wait_for(
        lambda: sorted(sources() or ()) == ["SyncSet/ours", "SyncSet/theirs (syncset.gatekeeper.sh)"],
        timeout=5,
        what="Gatekeeper's SyncSet to be reported as a source of the synced Ingresses",
    )
