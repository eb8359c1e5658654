"""AdmissionReview parsing: what a request says (and what Gatekeeper makes of it), and every way a
review can be malformed, each one line."""

from __future__ import annotations

from typing import Any

import pytest

from celkeeper.errors import ReviewError
from celkeeper.review import namespace_object, parse_admission_review, request_for_object
from tests.support.policydocs import admission_review, pod


def test_parse_admission_review() -> None:
    body = admission_review(pod(), operation="CREATE")
    request = parse_admission_review(body)
    assert (request.uid, request.group, request.version, request.kind, request.operation) == (
        body["request"]["uid"],
        "",
        "v1",
        "Pod",
        "CREATE",
    )
    assert (request.name, request.namespace) == ("web", "default")
    assert request.object == pod() and request.old_object is None and request.from_review
    assert request.cel_request == {
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "name": "web",
        "namespace": "default",
        "operation": "CREATE",
        "userInfo": {"username": "alice", "uid": "u-1", "groups": ["system:authenticated"]},
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    }


def test_delete_has_no_object() -> None:
    request = parse_admission_review(admission_review(None, operation="DELETE", old=pod()))
    assert request.object is None and request.old_object == pod()
    # Gatekeeper unsets object on DELETE even if the API server sent one
    request = parse_admission_review(admission_review(pod(), operation="DELETE", old=pod()))
    assert request.object is None


def _broken(change: Any) -> dict[str, Any]:
    body = admission_review(pod())
    change(body)
    return body


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "an AdmissionReview must be a JSON object"),
        (
            _broken(lambda b: b.update(apiVersion="admission.k8s.io/v1beta1")),
            "unsupported AdmissionReview apiVersion 'admission.k8s.io/v1beta1': celkeeper serves "
            "admission.k8s.io/v1",
        ),
        (
            _broken(lambda b: b.update(kind="AdmissionRequest")),
            "kind must be AdmissionReview, not 'AdmissionRequest'",
        ),
        (_broken(lambda b: b.pop("request")), "the AdmissionReview has no request"),
        (_broken(lambda b: b["request"].pop("uid")), "request.uid is missing"),
        (
            _broken(lambda b: b["request"].update(kind="Pod")),
            "request.kind must be an object with group, version and kind",
        ),
        (_broken(lambda b: b["request"]["kind"].update(kind="")), "request.kind.kind is missing"),
        (
            _broken(lambda b: b["request"].update(operation="PATCH")),
            "request.operation must be one of CREATE, UPDATE, DELETE, CONNECT, not 'PATCH'",
        ),
        (_broken(lambda b: b["request"].update(object="text")), "request.object must be an object"),
        (_broken(lambda b: b["request"].update(namespace=3)), "request.namespace must be a string"),
        (_broken(lambda b: b["request"].update(dryRun="yes")), "request.dryRun must be true or false"),
        (
            _broken(lambda b: b["request"]["userInfo"].update(groups="admins")),
            "request.userInfo.groups must be a list of strings",
        ),
        (
            _broken(lambda b: b["request"].update(resource=[])),
            "request.resource must be an object with group, version and resource",
        ),
    ],
)
def test_bad_admission_reviews(body: Any, message: str) -> None:
    with pytest.raises(ReviewError) as caught:
        parse_admission_review(body)
    assert str(caught.value) == message


def test_request_for_a_plain_object_as_gator_builds_it() -> None:
    request = request_for_object(pod())
    assert (request.kind, request.operation, request.name, request.namespace) == ("Pod", "", "web", "default")
    assert not request.from_review
    assert request.cel_request["kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert request.cel_request["resource"] == {"group": "", "version": "", "resource": ""}
    assert request.cel_request["operation"] == ""
    deleted = request_for_object(pod(), operation="DELETE")
    assert deleted.object is None and deleted.old_object == pod()
    with pytest.raises(ReviewError, match="has no kind"):
        request_for_object({"apiVersion": "v1"})


def test_namespace_object_is_kubernetes_subset() -> None:
    stored = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "default", "labels": {"team": "a"}, "managedFields": [{"x": 1}]},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }
    assert namespace_object(stored) == {
        "metadata": {"name": "default", "labels": {"team": "a"}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }
    assert namespace_object(None) is None
