"""Pure decision: an admission request, a policy set and a namespace lookup in; a Decision out.

    request = parse_admission_review(body: Mapping) -> AdmissionRequest
        validates an AdmissionReview (admission.k8s.io/v1, kind AdmissionReview, request with uid);
        raises celkeeper.errors.ReviewError with a clear message otherwise.
    request = request_for_object(obj, ...) -> AdmissionRequest
        a review of a plain object (audit, CLI), built as gator builds it: kind, name and namespace
        from the object, no operation unless given.
    decide(request, policies, namespaces, point, clock=None) -> celkeeper.model.Decision
        request:    AdmissionRequest
        policies:   celkeeper.policy.PolicySet
        namespaces: Callable[[str], Mapping | None]  the Namespace object by name (None: unknown)
        point:      celkeeper.model.EnforcementPoint (scoped enforcement actions resolve with it)
        clock:      Callable[[], float] | None; when given, Decision.timings holds seconds per
                    constraint kind

Semantics are Gatekeeper's K8sNativeValidation driver on Kubernetes' CEL validator
(gatekeeper pkg/drivers/k8scel/driver.go, k8s.io/apiserver admission/plugin/policy/validating/
validator.go, webhook/matchconditions/matcher.go): see design.md §2. The request's data is converted
for CEL once and shared by every expression (one engine activation per request); variables are
evaluated lazily by the engine. No I/O, no clock (unless passed in), no globals.
"""

from celkeeper.review.decide import MAX_MESSAGE_BYTES, NamespaceLookup, decide
from celkeeper.review.request import (
    API_VERSION,
    AdmissionRequest,
    namespace_object,
    parse_admission_review,
    request_for_object,
)

__all__ = [
    "API_VERSION",
    "MAX_MESSAGE_BYTES",
    "AdmissionRequest",
    "NamespaceLookup",
    "decide",
    "namespace_object",
    "parse_admission_review",
    "request_for_object",
]
