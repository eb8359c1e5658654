"""Kubernetes' admission policies enforced by the webhook (`serve --enforce-admission-policies`), for API
servers that do not enforce them themselves.

The policies, bindings and parameter objects come with the other policies (the snapshot's documents) and
are evaluated by Kubernetes' own admission-policy code (celkeeper.admissionpolicy), as the API server
would evaluate the request the webhook is sent:
- POST /v1/admit: a request the ValidatingAdmissionPolicies refuse is refused with the API server's own
  status (code, reason and message: `ValidatingAdmissionPolicy 'p' with binding 'b' denied request: ...`)
  before any constraint is evaluated, as the API server calls its policies before its webhooks; otherwise
  their warnings and audit annotations join the constraints' answer;
- POST /v1/mutate: what the MutatingAdmissionPolicies change is the first part of the JSONPatch, and
  Gatekeeper's mutators then mutate the object as those policies left it (the API server also runs its
  policies before the mutating webhooks).
A request the policies cannot evaluate (an object Kubernetes would not decode) is an error answered by the
webhook's failure mode, as any other internal error.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import jsonpatch
import orjson

from celkeeper.admissionpolicy import AdmissionPolicies, Answer
from celkeeper.model import JsonObject, JsonValue


def review(policies: AdmissionPolicies, raw: Mapping[str, JsonValue], deadline: float) -> Answer:
    """The API server's answer to the AdmissionReview's request `raw`, within `deadline` seconds (0:
    none). Raises AdmissionPolicyError for a request Kubernetes would not decode."""
    return policies.review(raw, int(deadline * 1e9) if deadline > 0 else 0)


def refusal(uid: str, answer: Answer) -> JsonObject:
    """The AdmissionReview answer of a request the policies refuse: their status as the API server
    returns it, with their warnings and audit annotations."""
    response: JsonObject = {"uid": uid, "allowed": False}
    if answer.status is not None:
        response["status"] = {k: v for k, v in answer.status.items() if k in ("code", "reason", "message")}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": _extras(response, answer),
    }


def with_answer(body: JsonObject, answer: Answer) -> JsonObject:
    """`body` (an AdmissionReview answer the constraints gave) with the policies' warnings and audit
    annotations added."""
    response = body.get("response")
    if isinstance(response, dict):
        _extras(response, answer)
    return body


def _extras(response: JsonObject, answer: Answer) -> JsonObject:
    if answer.warnings:
        previous = response.get("warnings")
        response["warnings"] = [*answer.warnings, *(previous if isinstance(previous, list) else [])]
    if answer.audit_annotations:
        response["auditAnnotations"] = dict(answer.audit_annotations)
    return response


def patched_review(doc: Any, answer: Answer) -> tuple[Any, list[JsonObject]]:
    """When the policies changed the request's object: the AdmissionReview with the object they left
    (what Gatekeeper's mutators then mutate) and the JSONPatch operations from the object sent to it;
    else `doc` and no operations."""
    request = doc.get("request") if isinstance(doc, dict) else None
    if answer.patched is None or not isinstance(request, dict):
        return doc, []
    before = request.get("object")
    operations = jsonpatch.make_patch(before, answer.patched).patch
    if not operations:
        return doc, []
    return {**doc, "request": {**request, "object": answer.patched}}, operations


def prepend_patch(body: JsonObject, operations: list[JsonObject]) -> JsonObject:
    """The mutation webhook's answer `body` with `operations` applied before its own JSONPatch."""
    response = body.get("response")
    if not operations or not isinstance(response, dict):
        return body
    patch = response.get("patch")
    own = orjson.loads(base64.b64decode(patch)) if isinstance(patch, str) and patch else []
    response["patch"] = base64.b64encode(orjson.dumps([*operations, *own])).decode()
    response["patchType"] = "JSONPatch"
    return body
