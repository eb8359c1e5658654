"""Aggregated status (pure): templates' and constraints' status.byPod, and when a constraint is enforced."""

from __future__ import annotations

from typing import Any

from celkeeper.incluster import (
    Observation,
    Pod,
    constraint_status,
    pod_status,
    template_status,
)
from tests.incluster.support import required_labels, required_labels_template, with_meta


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


def test_a_mutators_by_pod_is_gatekeepers_mutator_pod_status_of_its_current_uid() -> None:
    from celkeeper.incluster.aggregate import mutator_status

    mutator = {"kind": "Assign", "metadata": {"name": "pull", "uid": "u2"}}

    def pod_status(pod: str, uid: str, **status: Any) -> dict[str, Any]:
        labels = {
            "internal.celkeeper.io/mutator-kind": "Assign",
            "internal.celkeeper.io/mutator-name": "pull",
            "internal.celkeeper.io/pod": pod,
        }
        common = {"id": pod, "mutatorUID": uid, "operations": ["mutation-webhook"], "observedGeneration": 1}
        return {"metadata": {"labels": labels}, "status": {**common, "snapshotGeneration": 7, **status}}

    found = mutator_status(
        mutator,
        [
            pod_status("b", "u2", enforced=False, errors=[{"type": "ErrConflictingSchema", "message": "x"}]),
            pod_status("a", "u2", enforced=True, expectedPods=2),
            pod_status("c", "u1", enforced=True),  # the mutator before it was recreated
        ],
    )
    common = {"mutatorUID": "u2", "operations": ["mutation-webhook"], "observedGeneration": 1}
    assert found == {
        "byPod": [
            {"id": "a", **common, "enforced": True},
            {"id": "b", **common, "errors": [{"type": "ErrConflictingSchema", "message": "x"}]},
        ]
    }
