"""A run's results as Gatekeeper's audit gathers them: totals, per-action totals, the capped and ordered
violation list of each constraint, message truncation (gatekeeper pkg/audit/manager.go)."""

from __future__ import annotations

import random

from celkeeper.audit.results import ObjectRef, RunResults, Violation, status_violation, truncate


def violation(
    name: str,
    *,
    namespace: str = "ns",
    kind: str = "Pod",
    message: str = "m",
    action: str = "deny",
    actions: tuple[str, ...] = (),
    constraint: tuple[str, str] = ("K8sX", "c"),
) -> Violation:
    group, version = ("apps", "v1") if kind == "Deployment" else ("", "v1")
    return Violation(constraint, action, actions, message, ObjectRef(group, version, kind, namespace, name))


def test_messages_are_cut_to_256_bytes_the_last_three_being_dots() -> None:
    assert truncate("x" * 256) == "x" * 256
    assert truncate("x" * 257) == "x" * 253 + "..."
    assert len(truncate("y" * 10_000).encode()) == 256


def test_a_character_cut_in_two_becomes_one_replacement_character_per_byte_left() -> None:
    # "é" is 2 bytes, "€" is 3: 252 ASCII bytes then "€" puts 1 of its 3 bytes at byte 253
    assert truncate("a" * 252 + "€" * 5) == "a" * 252 + "\ufffd" + "..."
    assert truncate("a" * 251 + "€" * 5) == "a" * 251 + "\ufffd\ufffd" + "..."
    assert truncate("a" * 250 + "€" * 5) == "a" * 250 + "€" + "..."
    assert truncate("é" * 200) == "é" * 126 + "\ufffd" + "..."


def test_every_violation_counts_and_by_action_but_the_list_keeps_the_smallest_largest_first() -> None:
    results = RunResults(limit=3)
    names = [f"pod-{c}" for c in "qwertyuiopasdfghjklz"]
    random.Random(7).shuffle(names)
    for name in names:
        results.add(violation(name))
    fields = results.status_fields(("K8sX", "c"))
    assert fields["totalViolations"] == 20
    # LimitQueue drops its largest past the limit; updateConstraintStatus pops largest first
    assert [v["name"] for v in fields["violations"]] == ["pod-e", "pod-d", "pod-a"]
    assert results.by_action == {"deny": 20, "dryrun": 0, "warn": 0, "scoped": 0, "unrecognized": 0}


def test_the_order_is_group_version_kind_namespace_name_message_action() -> None:
    results = RunResults(limit=10)
    entries = [
        violation("b", namespace="a"),
        violation("a", namespace="b"),
        violation("a", namespace="a", message="z"),
        violation("a", namespace="a", message="y"),
        violation("z", kind="Deployment"),  # group apps sorts after the core group ""
        violation("a", namespace="a", message="y", action="warn"),
    ]
    for entry in entries:
        results.add(entry)
    listed = [
        (v["group"], v["namespace"], v["name"], v["message"], v["enforcementAction"])
        for v in results.status_fields(("K8sX", "c"))["violations"]
    ]
    assert listed == [
        ("apps", "ns", "z", "m", "deny"),
        ("", "b", "a", "m", "deny"),
        ("", "a", "b", "m", "deny"),
        ("", "a", "a", "z", "deny"),
        ("", "a", "a", "y", "warn"),
        ("", "a", "a", "y", "deny"),
    ]


def test_a_status_violation_has_gatekeepers_fields_and_omits_empty_ones() -> None:
    namespaced = status_violation(violation("web", message="x" * 300))
    assert namespaced == {
        "group": "",
        "version": "v1",
        "kind": "Pod",
        "namespace": "ns",
        "name": "web",
        "message": "x" * 253 + "...",
        "enforcementAction": "deny",
    }
    cluster = status_violation(
        violation("prod", namespace="", kind="Namespace", action="scoped", actions=("deny", "warn"))
    )
    assert cluster == {
        "group": "",
        "version": "v1",
        "kind": "Namespace",
        "name": "prod",
        "message": "m",
        "enforcementAction": "scoped",
        "enforcementActions": ["deny", "warn"],
    }


def test_scoped_violations_count_under_scoped_and_unknown_actions_as_unrecognized() -> None:
    results = RunResults()
    results.add(violation("a", action="scoped", actions=("warn",)))
    results.add(violation("b", action="dryrun", constraint=("K8sY", "d")))
    results.add(violation("c", action="bogus", constraint=("K8sY", "d")))
    assert results.by_action == {"deny": 0, "dryrun": 1, "warn": 0, "scoped": 1, "unrecognized": 1}
    assert results.total == 3


def test_a_constraint_without_violations_gets_zero_and_no_list() -> None:
    results = RunResults()
    assert results.status_fields(("K8sX", "none")) == {"totalViolations": 0}


def test_limit_zero_counts_but_lists_nothing() -> None:
    results = RunResults(limit=0)
    for name in "abc":
        results.add(violation(name))
    assert results.status_fields(("K8sX", "c")) == {"totalViolations": 3}


def test_errors_are_counted_and_listed_apart_from_violations() -> None:
    results = RunResults(limit=2)
    for name in "cba":
        results.add_error(("K8sX", "c"), ObjectRef("", "v1", "Pod", "ns", name), "cannot be evaluated: x")
    fields = results.status_fields(("K8sX", "c"))
    assert fields["totalViolations"] == 0
    assert fields["totalAuditErrors"] == 3
    assert [e["name"] for e in fields["auditErrors"]] == ["b", "a"]
    assert results.errors == 3


def test_memory_is_bounded_by_the_limit_not_by_the_number_of_violations() -> None:
    results = RunResults(limit=20)
    for i in range(100_000):
        results.add(violation(f"pod-{i:06d}"))
    held = results.constraints[("K8sX", "c")].violations
    assert len(held._entries) < 2 * 20 + 16
    assert [v["name"] for v in results.status_fields(("K8sX", "c"))["violations"]][-1] == "pod-000000"
