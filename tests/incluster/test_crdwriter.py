"""The CRD writer's plan (pure): what it writes for the templates and stored CRDs it sees, and what it
leaves alone."""

from __future__ import annotations

import copy
from typing import Any

from celkeeper.incluster import desired_crd, plan
from celkeeper.kube import covers, for_update, up_to_date
from celkeeper.kube.compare import DIGEST_ANNOTATION
from tests.incluster.support import required_labels_template


def as_stored(desired: dict[str, Any], version: str = "7") -> dict[str, Any]:
    """What the API server stores for `desired`: defaults and server metadata added."""
    stored = copy.deepcopy(desired)
    stored["metadata"].update(
        uid="u-1",
        resourceVersion=version,
        generation=1,
        creationTimestamp="2026-01-01T00:00:00Z",
        managedFields=[{"manager": "celkeeper"}],
    )
    stored["spec"]["conversion"] = {"strategy": "None"}
    stored["status"] = {
        "conditions": [{"type": "Established", "status": "True"}],
        "acceptedNames": stored["spec"]["names"],
        "storedVersions": ["v1beta1"],
    }
    return stored


def template(kind: str = "NeedLabels", uid: str = "t-uid") -> dict[str, Any]:
    found = required_labels_template(kind)
    found["metadata"]["uid"] = uid
    return found


def test_a_stored_crd_with_server_defaults_is_up_to_date() -> None:
    desired = desired_crd(template())
    assert desired is not None
    assert up_to_date(as_stored(desired), desired)
    assert plan([template()], [as_stored(desired)]).writes == []


def test_a_field_removed_from_the_template_is_noticed_through_the_digest() -> None:
    before = template()
    schema = before["spec"]["crd"]["spec"]["validation"]["openAPIV3Schema"]
    schema["properties"]["extra"] = {"type": "string"}
    stored = as_stored(desired_crd(before) or {})
    after = template()  # `extra` is gone: the stored CRD still covers what is desired, but not its digest
    desired = desired_crd(after)
    assert desired is not None
    without_digest = copy.deepcopy(desired)
    del without_digest["metadata"]["annotations"][DIGEST_ANNOTATION]
    assert covers(stored, without_digest)
    assert not up_to_date(stored, desired)
    assert [d["metadata"]["name"] for d, _ in plan([after], [stored]).writes] == [
        "needlabels.constraints.celkeeper.io"
    ]


def test_a_hand_edit_of_our_fields_is_put_right() -> None:
    desired = desired_crd(template())
    assert desired is not None
    stored = as_stored(desired)
    stored["spec"]["names"]["categories"] = ["other"]
    todo = plan([template()], [stored])
    assert [(d["metadata"]["name"], s is stored) for d, s in todo.writes] == [
        ("needlabels.constraints.celkeeper.io", True)
    ]
    body = for_update(stored, todo.writes[0][0])
    assert body["metadata"]["resourceVersion"] == "7"  # a concurrent change becomes a conflict
    assert body["spec"]["names"]["categories"] == ["constraint", "constraints"]


def test_a_new_template_is_created_and_an_orphan_crd_deleted() -> None:
    orphan = as_stored(desired_crd(template("OldKind")) or {})
    todo = plan([template()], [orphan])
    assert [(d["metadata"]["name"], s) for d, s in todo.writes] == [
        ("needlabels.constraints.celkeeper.io", None)
    ]
    assert [d["metadata"]["name"] for d in todo.deletes] == ["oldkind.constraints.celkeeper.io"]


def test_a_template_recreated_with_a_new_uid_moves_the_owner_reference() -> None:
    stored = as_stored(desired_crd(template(uid="first")) or {})
    todo = plan([template(uid="second")], [stored])
    assert len(todo.writes) == 1
    assert todo.writes[0][0]["metadata"]["ownerReferences"][0]["uid"] == "second"


def test_a_template_that_cannot_define_a_crd_keeps_the_one_it_has() -> None:
    good = template()
    stored = as_stored(desired_crd(good) or {})
    broken = copy.deepcopy(good)
    broken["spec"]["crd"]["spec"]["validation"]["openAPIV3Schema"] = "not a schema"
    todo = plan([broken], [stored])
    assert todo.writes == [] and todo.deletes == []
    misnamed = copy.deepcopy(good)
    misnamed["metadata"]["name"] = "another-name"  # not the kind in lower case: defines nothing
    assert desired_crd(misnamed) is None
