"""ValidatingAdmissionPolicies from templates and constraints, as Gatekeeper generates them (pure).

    policy = validating_admission_policy(spec, scope)   # transform: the VAP of a parsed template
    binding(constraint, binding_actions(constraint))    # transform: a constraint's binding
    plan = plan_vap(compiled templates, constraints, options)   # what to generate, and why not

The transform (celkeeper.vap.transform) makes the same objects as Gatekeeper v3.23.1; celkeeper.vap.check
says, before anything is sent to an API server, whether the API server will accept the policy and where
its verdicts will differ from celkeeper's webhook.
"""

from celkeeper.vap.transform import (
    Policy,
    Scope,
    TransformError,
    WebhookScope,
    binding,
    binding_actions,
    binding_name,
    policy_name,
    should_generate_vap,
    validating_admission_policy,
)

__all__ = [
    "Policy",
    "Scope",
    "TransformError",
    "WebhookScope",
    "binding",
    "binding_actions",
    "binding_name",
    "policy_name",
    "should_generate_vap",
    "validating_admission_policy",
]
