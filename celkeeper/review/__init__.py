"""Pure decision: an admission request, a policy set and a namespace lookup in; a Decision out.

    request = parse_admission_review(body: Mapping) -> AdmissionRequest
        validates an AdmissionReview (admission.k8s.io/v1, kind AdmissionReview, request with uid);
        raises celkeeper.errors.ReviewError with a clear message otherwise.
    review = admission_review_for(obj, operation="CREATE", old_object=None, ...) -> dict
        the AdmissionReview the API server would send for writing obj (explain, test --cluster).
    request = request_for_object(obj, ...) -> AdmissionRequest
        a review of a plain object (audit, CLI), built as gator builds it: kind, name and namespace
        from the object, no operation unless given.
    decide(request, policies, namespaces, point, clock=None, *, deadline=3.0, data=None, expand=True,
           expansion_namespace=None, tracer=None) -> celkeeper.model.Decision
        request:    AdmissionRequest
        policies:   celkeeper.policy.PolicySet
        namespaces: Callable[[str], Mapping | None]  the Namespace object by name (None: unknown)
        point:      celkeeper.model.EnforcementPoint (scoped enforcement actions resolve with it)
        clock:      Callable[[], float] | None; when given, Decision.timings holds seconds per
                    constraint kind
        deadline:   seconds the engine may spend (constraints not reached in time fail under their
                    failurePolicy)
        data:       SyncedData | None: the store templates that read synced data read, and which
                    kinds are synced (a template whose data is not synced fails under its
                    failurePolicy without being evaluated)
        expand:     the objects ExpansionTemplates generate from the object are decided too
                    (results prefixed `[Implied by <template>]`)
        expansion_namespace: Callable[[Mapping], str | None] | None: the Namespace gator's expander
                    knows for an object (None: the webhook's and audit's: the object's own)
        tracer:     review.decide.Tracer | None, told everything decided (explanations)

    explanation = explain(request, policies, namespaces, point)   (celkeeper.review.explain)
        decide with a tracer: the same decision, and why, constraint by constraint.

Semantics: which constraints apply is Gatekeeper's target handler (matching, here in Python); what
each decides is Kubernetes' CEL validator as Gatekeeper's K8sNativeValidation driver runs it
(gatekeeper pkg/drivers/k8scel/driver.go, k8s.io/apiserver admission/plugin/policy/validating/
validator.go), in the engine: one engine call per request for every selected constraint. No I/O,
no clock (unless passed in), no globals.
"""

from celkeeper.cel.requestvars import namespace_object
from celkeeper.review.decide import (
    DEFAULT_DEADLINE,
    NamespaceLookup,
    SyncedData,
    decide,
    inventory_lookup,
    not_synced,
)
from celkeeper.review.request import (
    API_VERSION,
    AdmissionRequest,
    admission_review_for,
    parse_admission_review,
    request_for_object,
)

__all__ = [
    "API_VERSION",
    "DEFAULT_DEADLINE",
    "AdmissionRequest",
    "NamespaceLookup",
    "SyncedData",
    "admission_review_for",
    "decide",
    "inventory_lookup",
    "namespace_object",
    "not_synced",
    "parse_admission_review",
    "request_for_object",
]
