"""Kubernetes' own admission policies (ValidatingAdmissionPolicy, MutatingAdmissionPolicy, their bindings
and parameters), evaluated offline by Kubernetes' code in celkeeper's native library: see policies.py."""

from celkeeper.admissionpolicy.documents import (
    Selected,
    is_admission_policy_document,
    is_admission_policy_object,
    is_crd_document,
    is_param,
    param_kinds,
    select,
)
from celkeeper.admissionpolicy.explain import trace_lines
from celkeeper.admissionpolicy.policies import AdmissionPolicies, Answer, Explained, merge_patch

__all__ = [
    "AdmissionPolicies",
    "Answer",
    "Explained",
    "Selected",
    "is_admission_policy_document",
    "is_admission_policy_object",
    "is_crd_document",
    "is_param",
    "merge_patch",
    "param_kinds",
    "select",
    "trace_lines",
]
