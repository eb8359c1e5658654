"""celkeeper's own resources: the constraint kinds templates define, followed one template event at a
time."""

from __future__ import annotations

from celkeeper.kube import SYNCED


def test_constraint_kinds_follow_template_events() -> None:
    from celkeeper.incluster import constraints
    from celkeeper.incluster.resources import ConstraintKinds
    from tests.incluster.support import required_labels_template

    kinds = ConstraintKinds()
    a, b = required_labels_template("KindA"), required_labels_template("KindB")
    assert kinds.update(SYNCED, {}, lambda: [a])
    assert kinds.resources() == {constraints("KindA")}
    assert kinds.update("ADDED", b, list)
    assert not kinds.update("MODIFIED", b, list)  # same kind: nothing to start or stop
    misnamed = required_labels_template("KindB")
    misnamed["metadata"]["name"] = "not-kindb"
    assert not kinds.update("ADDED", misnamed, list)  # defines no kind
    assert kinds.update("DELETED", a, list)
    assert kinds.resources() == {constraints("KindB")}
