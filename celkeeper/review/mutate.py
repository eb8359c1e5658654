"""Pure mutation: an AdmissionReview, a policy set's mutators and a namespace lookup in; Gatekeeper's
mutation webhook's answer out.

    mutation = mutate(review, policies, namespaces, mutation_id="", explain=False) -> Mutation
        review:     an admission.k8s.io/v1 AdmissionReview (decoded JSON); ReviewError when it is not one
        policies:   PolicySet (its `mutators`) or a MutatorSet
        namespaces: NamespaceLookup: the request's Namespace object by name; None: it does not exist, and
                    Gatekeeper's webhook answers the API server's not-found error (code 500)
    mutation.patch, mutation.object, mutation.applied, mutation.error
    answer = admission_review_response(mutation) -> the AdmissionReview to send back

What happens is Gatekeeper's pkg/webhook/mutation.go (Handle, mutateRequest) around its mutation System,
in celkeeper's native library (celkeeper.mutation): its own service account's requests, operations other
than CREATE and UPDATE, Gatekeeper's resources and the Config's excluded namespaces are not mutated; a
Namespace object is its own namespace; the object's namespace is set to the request's while mutating and
restored; the JSONPatch is controller-runtime's (gomodules.xyz/jsonpatch/v2). No I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from celkeeper.model import JsonObject, JsonValue
from celkeeper.mutation import MutationRequest, MutatorSet
from celkeeper.policy import PolicySet
from celkeeper.review.decide import NamespaceLookup
from celkeeper.review.request import API_VERSION, AdmissionRequest, parse_admission_review


@dataclass(frozen=True)
class Mutation:
    """Gatekeeper's answer to one request.

    `response` is the AdmissionResponse its webhook sends (uid, allowed, status, patch and patchType when
    mutated); `patch` the JSONPatch as operations; `object` the object as the API server stores it after
    applying the patch (the request's object when nothing changed, None without one); `error` Gatekeeper's
    error (its webhook then answers not allowed, code 500); `applied` the mutators that changed the object
    in each iteration and `trace` what each mutator did (explained requests only: the native library's
    mutation trace, rendered by review.explain_text.render_mutation)."""

    uid: str
    response: JsonObject
    mutated: bool
    patch: tuple[JsonObject, ...]
    object: JsonObject | None
    error: str
    applied: tuple[tuple[str, tuple[str, ...]], ...] = ()
    trace: JsonObject | None = None

    @property
    def allowed(self) -> bool:
        return bool(self.response.get("allowed"))


def mutate(
    review: JsonValue,
    policies: PolicySet | MutatorSet,
    namespaces: NamespaceLookup,
    *,
    mutation_id: str = "",
    explain: bool = False,
    parsed: AdmissionRequest | None = None,
    response_only: bool = False,
) -> Mutation:
    """Answer `review` as Gatekeeper's mutation webhook does with the policy set's mutators. `parsed`: the
    review's request as parse_admission_review gave it, when the caller has it already; `response_only`:
    only `response` (and `mutated`, `error`) are wanted, as by the webhook: no patch list, no object."""
    if parsed is None:
        parsed = parse_admission_review(review)
    assert isinstance(review, Mapping)
    request: Mapping[str, Any] = review["request"]
    mutators = policies.mutators if isinstance(policies, PolicySet) else policies
    namespace = None
    kind = request.get("kind") or {}
    if parsed.namespace and not (kind.get("group", "") == "" and kind.get("kind") == "Namespace"):
        found = namespaces(parsed.namespace)
        namespace = dict(found) if found is not None else None
    result = mutators.mutate(
        MutationRequest(
            request=request,
            namespace=namespace,
            mutation_id=mutation_id,
            explain=explain,
            response_only=response_only,
        )
    )
    if response_only:
        return Mutation(parsed.uid, result.response, result.mutated, (), None, result.error)
    original = request.get("object")
    obj = result.object if result.object is not None else original
    return Mutation(
        uid=parsed.uid,
        response=result.response,
        mutated=result.mutated,
        patch=result.patch,
        object=obj if isinstance(obj, dict) else None,
        error=result.error,
        applied=result.iterations,
        trace=result.trace,
    )


def admission_review_response(mutation: Mutation) -> JsonObject:
    """The AdmissionReview Gatekeeper's webhook answers with (admission.k8s.io/v1)."""
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": mutation.response}
