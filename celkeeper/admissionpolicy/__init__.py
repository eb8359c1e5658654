"""Kubernetes' own admission policies (ValidatingAdmissionPolicy, MutatingAdmissionPolicy, their bindings
and parameters), evaluated offline by Kubernetes' code in celkeeper's native library: see policies.py.

Which documents are these (documents.py) is imported with the package; the policies' evaluation
(policies.py, explain.py) when one of its names is first used: a run of the offline tools whose inputs
hold no admission policy (`test -f`, `audit`, `explain`) does not import it."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from celkeeper.admissionpolicy.documents import (
    Selected,
    is_admission_input,
    is_admission_policy_document,
    is_admission_policy_object,
    is_crd_document,
    is_param,
    param_kinds,
    select,
)

if TYPE_CHECKING:
    from celkeeper.admissionpolicy.explain import trace_lines
    from celkeeper.admissionpolicy.policies import AdmissionPolicies, Answer, Explained, merge_patch

#: the names imported when first used, by the module of the package that defines them
_LAZY = {
    "AdmissionPolicies": "policies",
    "Answer": "policies",
    "Explained": "policies",
    "merge_patch": "policies",
    "trace_lines": "explain",
}

__all__ = [
    "AdmissionPolicies",
    "Answer",
    "Explained",
    "Selected",
    "is_admission_input",
    "is_admission_policy_document",
    "is_admission_policy_object",
    "is_crd_document",
    "is_param",
    "merge_patch",
    "param_kinds",
    "select",
    "trace_lines",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
