"""Per-pod status and its aggregation (pure): what each pod reports, and when a constraint is enforced."""

from __future__ import annotations

from typing import Any

from celkeeper.cel import get_engine
from celkeeper.crds import names
from celkeeper.documents import Document
from celkeeper.incluster import (
    Observation,
    ObservationTracker,
    Pod,
    constraint_status,
    observe,
    pod_status,
    pod_status_current,
    template_status,
)
from celkeeper.incluster.objects import item_name, policy_object
from celkeeper.policy import TemplateCompiler, build_policy_set
from tests.incluster.support import required_labels, required_labels_template

POD = Pod("pod-a", "celkeeper-system")


def with_meta(obj: dict[str, Any], uid: str, generation: int = 1) -> dict[str, Any]:
    obj["metadata"].update(uid=uid, generation=generation, resourceVersion="99", managedFields=[{}])
    obj["status"] = {"byPod": []}
    return obj


def observe_objects(*objects: dict[str, Any]) -> dict[tuple[str, str], Observation]:
    """What a pod observes of these API objects: built the way the informer builds it."""
    items = {}
    for obj in objects:
        name = item_name(obj)
        assert name is not None
        items[name] = policy_object(obj)
    documents = [Document.from_object(o, file=n) for n, o in items.items()]
    policies = build_policy_set(documents, TemplateCompiler(get_engine("cel-python")))
    return observe(items, policies, policies.errors)


def test_policy_objects_keep_what_defines_the_policy_only() -> None:
    template = with_meta(required_labels_template("Keep"), "t1")
    template["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": "{...}",
        "team": "x",
    }
    kept = policy_object(template)
    assert set(kept) == {"apiVersion", "kind", "metadata", "spec"}
    assert set(kept["metadata"]) == {"name", "uid", "generation", "annotations"}
    assert kept["metadata"]["annotations"] == {"team": "x"}


def test_observations_say_what_is_enforced_and_where_errors_are() -> None:
    template = with_meta(required_labels_template("Obs"), "t1", generation=3)
    template["spec"]["targets"][0]["code"][0]["source"]["validations"].append(
        {"expression": "object.metadata.name == 'a' &&\n  object.nope(1)"}
    )
    good = with_meta(required_labels("Obs", "good", ["owner"], ["ns"]), "c1", generation=2)
    bad = with_meta(required_labels("Obs", "bad", ["owner"], ["ns"]), "c2")
    bad["spec"]["parameters"] = {"labels": "not-a-list"}
    found = observe_objects(template, good, bad)
    t = found[("ConstraintTemplate", "obs")]
    assert (t.uid, t.generation, t.enforced) == ("t1", 3, True)
    assert [(e.code, e.location) for e in t.errors] == [
        ("compile_error", "spec.targets[0].code[0].source.validations[1].expression:2:14")  # the call's `(`
    ]
    assert t.errors[0].message.startswith("validation does not compile: ")
    assert found[("Obs", "good")] == Observation("Obs", "good", "c1", 2, True)
    b = found[("Obs", "bad")]
    assert not b.enforced
    assert [(e.code, e.location) for e in b.errors] == [("invalid_constraint", "spec.parameters.labels")]


def test_pod_status_objects_and_their_names() -> None:
    obs = Observation("Obs", "good", "c1", 2, True)
    resource, obj = pod_status(POD, obs, 17)
    assert resource.plural == "constraintpodstatuses" and resource.namespace == "celkeeper-system"
    assert obj["metadata"]["name"] == "pod--a-obs-good"
    assert obj["metadata"]["labels"] == {
        names.CONSTRAINT_NAME_LABEL: "good",
        names.CONSTRAINT_KIND_LABEL: "Obs",
        names.TEMPLATE_NAME_LABEL: "obs",
        names.POD_LABEL: "pod-a",
    }
    assert obj["status"] == {
        "id": "pod-a",
        "operations": ["webhook"],
        "observedGeneration": 2,
        "snapshotGeneration": 17,
        "constraintUID": "c1",
        "enforced": True,
    }
    stored = {**obj, "metadata": {**obj["metadata"], "uid": "x", "resourceVersion": "5"}}
    assert pod_status_current(stored, obj)
    assert not pod_status_current(stored, pod_status(POD, obs, 18)[1])


def test_snapshot_generation_stays_while_an_object_does_not_change() -> None:
    tracker = ObservationTracker()
    a, b = Observation("K", "a", "u1", 1, True), Observation("K", "b", "u2", 1, True)
    tracker.advance(5, {a.key: a})
    tracker.advance(6, {a.key: a, b.key: b})  # another object arrived
    assert tracker.current[a.key] == (a, 5)
    assert tracker.current[b.key] == (b, 6)
    a2 = Observation("K", "a", "u1", 2, True)
    tracker.advance(9, {a2.key: a2, b.key: b})
    assert tracker.current[a2.key] == (a2, 9)
    assert tracker.current[b.key] == (b, 6)


def pod_entry(
    pod: str, kind: str, name: str, uid: str, generation: int, enforced: bool = True
) -> dict[str, Any]:
    return pod_status(Pod(pod, "ns"), Observation(kind, name, uid, generation, enforced), 1)[1]


def test_a_constraint_is_enforced_only_when_enough_pods_have_its_generation() -> None:
    constraint = with_meta(required_labels("Agg", "c", ["x"], []), "c-uid", generation=3)
    statuses = [
        pod_entry("pod-a", "Agg", "c", "c-uid", 3),
        pod_entry("pod-b", "Agg", "c", "c-uid", 2),  # behind
        pod_entry("pod-c", "Agg", "c", "old-uid", 3),  # a constraint of the same name, deleted since
        pod_entry("pod-d", "Agg", "other", "o-uid", 3),
        pod_entry("pod-e", "Agg2", "c", "c-uid", 3),
    ]
    ours = constraint_status(constraint, statuses, expected_pods=2)
    assert [e["id"] for e in ours["byPod"]] == ["pod-a", "pod-b"]
    assert ours["enforced"] is False
    statuses[1] = pod_entry("pod-b", "Agg", "c", "c-uid", 3)
    assert constraint_status(constraint, statuses, expected_pods=2)["enforced"] is True
    statuses[1] = pod_entry("pod-b", "Agg", "c", "c-uid", 3, enforced=False)  # loaded, but left out
    assert constraint_status(constraint, statuses, expected_pods=2)["enforced"] is False
    assert constraint_status(constraint, statuses, expected_pods=1)["enforced"] is True
    entry = constraint_status(constraint, statuses, expected_pods=1)["byPod"][0]
    assert entry == {
        "id": "pod-a",
        "observedGeneration": 3,
        "snapshotGeneration": 1,
        "operations": ["webhook"],
        "constraintUID": "c-uid",
        "enforced": True,
    }


def test_template_status_gathers_its_pods_and_the_crd() -> None:
    template = with_meta(required_labels_template("Agg"), "t-uid")
    statuses = [
        pod_status(Pod("pod-b", "ns"), Observation("ConstraintTemplate", "agg", "t-uid", 1, True), 4)[1],
        pod_status(Pod("pod-a", "ns"), Observation("ConstraintTemplate", "agg", "t-uid", 1, True), 3)[1],
        pod_status(Pod("pod-z", "ns"), Observation("ConstraintTemplate", "agg", "old", 1, True), 3)[1],
    ]
    ours = template_status(template, statuses, created=True)
    assert ours["created"] is True
    assert [(e["id"], e["snapshotGeneration"]) for e in ours["byPod"]] == [("pod-a", 3), ("pod-b", 4)]


def test_pods_configured_differently_aggregate_alike() -> None:
    """Each pod reports its --expected-pods; the largest reported decides, whoever aggregates."""
    constraint = with_meta(required_labels("Agg", "c", ["x"], []), "c-uid", generation=1)

    def entry(pod: str, expected: int) -> dict[str, Any]:
        observation = Observation("Agg", "c", "c-uid", 1, True)
        return pod_status(Pod(pod, "ns", expected_pods=expected), observation, 1)[1]

    statuses = [entry("pod-a", 2), entry("pod-b", 3)]  # a rollout raising the replicas from 2 to 3
    answers = {constraint_status(constraint, statuses, expected_pods=own)["enforced"] for own in (1, 2, 3)}
    assert answers == {False}  # 2 of the 3 that pod-b expects, whatever the aggregating pod's setting
    statuses.append(entry("pod-c", 3))
    answers = {constraint_status(constraint, statuses, expected_pods=own)["enforced"] for own in (1, 2, 5)}
    assert answers == {True}
    assert [e["expectedPods"] for e in constraint_status(constraint, statuses, 1)["byPod"]] == [2, 3, 3]
    # without reports (pods of an older celkeeper), the aggregating pod's own setting decides
    bare = [pod_entry("pod-a", "Agg", "c", "c-uid", 1), pod_entry("pod-b", "Agg", "c", "c-uid", 1)]
    assert constraint_status(constraint, bare, expected_pods=2)["enforced"] is True
    assert constraint_status(constraint, bare, expected_pods=3)["enforced"] is False
