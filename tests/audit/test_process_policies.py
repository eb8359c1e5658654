"""Each run's policy set comes from the watched templates and constraints; it is built again only when
one of them changed (its uid or generation), not when a status was written (every run writes one)."""

from __future__ import annotations

import copy
from typing import Any

from celkeeper.audit import AuditProcess, ProcessOptions
from celkeeper.incluster import PolicyView
from tests.audit.support import constraint, labels_template
from tests.kube.fakes import FakeClient


def view(*objects: dict[str, Any]) -> PolicyView:
    return PolicyView(
        objects=objects, namespaces={}, synced=True, namespaces_synced=True, templates_missing=False
    )


def stored(data: dict[str, Any], generation: int, version: str, uid: str) -> dict[str, Any]:
    out = copy.deepcopy(data)
    out["metadata"].update(generation=generation, resourceVersion=version, uid=uid)
    return out


def test_the_policy_set_is_rebuilt_only_when_a_spec_changes() -> None:
    process = AuditProcess(FakeClient(), ProcessOptions())
    template = stored(labels_template("K8sRun"), 1, "10", "t-1")
    owner = constraint("K8sRun", "owner", {}, {"key": "owner"})
    first = process._policy_set(view(template, stored(owner, 1, "11", "c-1")))
    assert [c.name for c in first.constraints] == ["owner"]
    # a status write: new resourceVersion, same generation
    assert process._policy_set(view(template, stored(owner, 1, "12", "c-1"))) is first
    changed = constraint("K8sRun", "owner", {}, {"key": "team"})
    second = process._policy_set(view(template, stored(changed, 2, "13", "c-1")))
    assert second is not first and second.constraints[0].parameters == {"key": "team"}
    # deleted and made again: another uid
    assert process._policy_set(view(template, stored(changed, 1, "14", "c-2"))) is not second
