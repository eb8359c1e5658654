"""AdmissionReview objects given to the offline tools, checked as gator checks them.

gator accepts an AdmissionReview (admission.k8s.io, v1 or v1beta1) in place of an object: it
converts it strictly (unknown fields are errors), requires a request with an object or an
oldObject, and requires oldObject on DELETE. The request it reviews needs no uid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from celkeeper.documents import Document
from celkeeper.errors import ReviewError
from celkeeper.model import JsonObject, JsonValue, unreviewable

if TYPE_CHECKING:
    from celkeeper.review import AdmissionRequest

GROUP = "admission.k8s.io"
KIND = "AdmissionReview"

_REVIEW_FIELDS = frozenset({"apiVersion", "kind", "request", "response"})
_REQUEST_FIELDS = frozenset(
    {
        "uid",
        "kind",
        "resource",
        "subResource",
        "requestKind",
        "requestResource",
        "requestSubResource",
        "name",
        "namespace",
        "operation",
        "userInfo",
        "object",
        "oldObject",
        "dryRun",
        "options",
    }
)
_OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"


def is_admission_review(document: Document) -> bool:
    return document.group == GROUP and document.kind == KIND


def checked_request(document: Document) -> JsonObject:
    """The request of an AdmissionReview document, validated as gator does; raises ReviewError."""
    data = document.data
    unknown = sorted(set(data) - _REVIEW_FIELDS)
    if unknown:
        raise document.error(
            ReviewError,
            f"not a valid AdmissionReview object: unknown field {unknown[0]!r}",
            unknown[0],
            key=True,
        )
    request = data.get("request")
    if request is None:
        raise document.error(ReviewError, "missing an AdmissionRequest object: no request", "")
    if not isinstance(request, Mapping):
        raise document.error(
            ReviewError, "not a valid AdmissionReview object: request must be a map", "request"
        )
    unknown = sorted(set(request) - _REQUEST_FIELDS)
    if unknown:
        raise document.error(
            ReviewError,
            f"not a valid AdmissionReview object: unknown field {unknown[0]!r}",
            f"request.{unknown[0]}",
            key=True,
        )
    for key in ("object", "oldObject"):
        if request.get(key) is not None and not isinstance(request[key], Mapping):
            raise document.error(ReviewError, f"{key} must be a map (a Kubernetes object)", f"request.{key}")
    operation = request.get("operation")
    if operation is not None and operation not in _OPERATIONS and operation != "":
        raise document.error(
            ReviewError,
            f"operation must be one of CREATE, UPDATE, DELETE, CONNECT, not {operation!r}",
            "request.operation",
        )
    if request.get("object") is None and request.get("oldObject") is None:
        raise document.error(
            ReviewError,
            "no object or oldObject found to review: AdmissionRequest does not "
            'contain an "object" or "oldObject"',
            "request",
        )
    if operation == "DELETE" and request.get("oldObject") is None:
        raise document.error(
            ReviewError, "oldObject is nil: a DELETE request must carry oldObject", "request"
        )
    return dict(request)


def as_v1_review(request: Mapping[str, JsonValue]) -> JsonObject:
    """A v1 AdmissionReview around `request`, completed where gator needs nothing: a placeholder uid,
    and request.kind taken from the object (gator matches on the object's own apiVersion/kind)."""
    body = dict(request)
    if not body.get("uid"):
        body["uid"] = PLACEHOLDER_UID
    if not body.get("kind"):
        obj = body.get("object") or body.get("oldObject") or {}
        api_version = str(obj.get("apiVersion") or "")
        group, _, version = api_version.rpartition("/")
        body["kind"] = {"group": group, "version": version, "kind": str(obj.get("kind") or "")}
    return {"apiVersion": f"{GROUP}/v1", "kind": KIND, "request": body}


def review_request(document: Document) -> AdmissionRequest:
    """The request of an AdmissionReview document, as gator reviews it: as given, with or without an
    operation. Raises ReviewError."""
    from celkeeper.review import parse_admission_review  # the review layer: only for an AdmissionReview

    return parse_admission_review(as_v1_review(checked_request(document)), operation_required=False)


def check_reviewable(document: Document) -> None:
    """Raise the ReviewError (located in its file) a review of the document raises when gator cannot
    review it (gator.backend's PolicyBackend.request), without making a plain object's request."""
    try:
        if is_admission_review(document):
            review_request(document)
        elif (problem := unreviewable(document.data)) is not None:
            raise ReviewError(problem)
    except ReviewError as err:
        raise err.at(file=document.file, document=document.index) from err.__cause__
