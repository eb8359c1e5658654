"""Kubernetes' admission policies enforced by the webhook (`serve --enforce-admission-policies`), for API
servers that do not enforce them themselves.

The policies, bindings and parameter objects come with the other policies (the snapshot's documents) and
are evaluated by Kubernetes' own admission-policy code (celkeeper.admissionpolicy), as the API server
would evaluate the request the webhook is sent:
- POST /v1/admit: a request the ValidatingAdmissionPolicies refuse is refused with the API server's own
  status (code, reason and message: `ValidatingAdmissionPolicy 'p' with binding 'b' denied request: ...`)
  before any constraint is evaluated, as the API server calls its policies before its webhooks; otherwise
  their warnings and audit annotations join the constraints' answer;
- POST /v1/mutate: the request goes through the API server's mutating chain as if celkeeper's mutation
  webhook ran in it: the MutatingAdmissionPolicies first, Gatekeeper's mutators on the object as they
  left it (the API server runs its policies before its mutating webhooks), then, when the mutators
  changed the object, the policies with reinvocationPolicy IfNeeded once more (Kubernetes' reinvoker);
  the JSONPatch turns the object sent into the object the chain left. A request a policy refuses is
  refused with the API server's status.
A request the policies cannot evaluate (an object Kubernetes would not decode) is an error answered by the
webhook's failure mode, as any other internal error.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping

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


def mutate(
    policies: AdmissionPolicies,
    raw: Mapping[str, JsonValue],
    webhook: Callable[[JsonObject], bytes],
    deadline: float,
) -> Answer:
    """The API server's answer to the AdmissionReview's request `raw` through its mutating chain, with
    `webhook` (Gatekeeper's mutation: the object in, its JSONPatch out) as the mutating webhook after the
    policies, registered with reinvocationPolicy Never as celkeeper's is; the policies with
    reinvocationPolicy IfNeeded run again when it changed the object (AdmissionPolicies.mutate, Kubernetes'
    own reinvocation). Within `deadline` seconds (0: none). Raises AdmissionPolicyError for a request
    Kubernetes would not decode."""
    return policies.mutate(raw, webhook, int(deadline * 1e9) if deadline > 0 else 0)


def with_patch(body: JsonObject, before: JsonValue, after: JsonValue | None) -> JsonObject:
    """The mutation webhook's answer `body` with, as its JSONPatch, what turns the object sent (`before`)
    into the object the chain left (`after`; None: unchanged): the policies' changes, the mutators' and
    the policies' again, in one patch."""
    response = body.get("response")
    if not isinstance(response, dict):
        return body
    response.pop("patch", None)
    response.pop("patchType", None)
    operations = jsonpatch.make_patch(before, after).patch if after is not None else []
    if operations:
        response["patch"] = base64.b64encode(orjson.dumps(operations)).decode()
        response["patchType"] = "JSONPatch"
    return body
