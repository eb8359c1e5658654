"""Pure decision: an admission request, a policy set and a namespace lookup in; a Decision out.

CONTRACT (implemented by the policy-model work; the webhook and CLI code against it):

    request = parse_admission_review(body: Mapping) -> AdmissionRequest
        validates an AdmissionReview (admission.k8s.io/v1, kind AdmissionReview, request with uid);
        raises celkeeper.errors.ReviewError with a clear message otherwise.
    decide(request, policies, namespaces, point) -> celkeeper.model.Decision
        request:    AdmissionRequest (or a request built from a plain object for audit/CLI)
        policies:   celkeeper.policy.PolicySet
        namespaces: Callable[[str], Mapping | None]  the Namespace object by name (None: unknown)
        point:      celkeeper.model.EnforcementPoint (scoped enforcement actions resolve with it)

No I/O, no clock, no globals: timings in the Decision are measured with a clock passed in, if any.
"""
