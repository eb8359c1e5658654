"""Which documents are Kubernetes' admission policies, their bindings, CRDs, and which kinds the policies
take as parameters."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from celkeeper.documents import Document
from celkeeper.model import JsonObject

GROUP = "admissionregistration.k8s.io"
#: the versions of the group the API server serves policies in (v1; v1beta1 and v1alpha1 where served)
VERSIONS = ("v1", "v1beta1", "v1alpha1")
VALIDATING_POLICY = "ValidatingAdmissionPolicy"
VALIDATING_BINDING = "ValidatingAdmissionPolicyBinding"
MUTATING_POLICY = "MutatingAdmissionPolicy"
MUTATING_BINDING = "MutatingAdmissionPolicyBinding"
KINDS = frozenset({VALIDATING_POLICY, VALIDATING_BINDING, MUTATING_POLICY, MUTATING_BINDING})
#: the names one of these documents has in its text (its kind), for the offline tools' first pass
TEXT_NAMES = (b"AdmissionPolicy",)

CRD_GROUP = "apiextensions.k8s.io"
CRD_KIND = "CustomResourceDefinition"


def is_admission_policy_document(document: Document) -> bool:
    """A ValidatingAdmissionPolicy, MutatingAdmissionPolicy or one of their bindings."""
    return document.group == GROUP and document.kind in KINDS


def is_admission_policy_object(obj: JsonObject) -> bool:
    api_version = obj.get("apiVersion")
    return (
        isinstance(api_version, str) and api_version.rpartition("/")[0] == GROUP and obj.get("kind") in KINDS
    )


def is_crd_document(document: Document) -> bool:
    return document.group == CRD_GROUP and document.kind == CRD_KIND


def is_admission_input(document: Document) -> bool:
    """A document the admission policies are built from (a policy, a binding, a CRD), as the offline
    tools pick them among their inputs (their parameter objects and Namespaces: `select`)."""
    return is_admission_policy_document(document) or is_crd_document(document)


def param_kinds(policies: Iterable[Document]) -> frozenset[tuple[str, str]]:
    """The (apiVersion, kind) the policies take their parameters of (spec.paramKind)."""
    found: set[tuple[str, str]] = set()
    for document in policies:
        if document.kind not in (VALIDATING_POLICY, MUTATING_POLICY) or not isinstance(document.data, dict):
            continue
        spec = document.data.get("spec")
        param = spec.get("paramKind") if isinstance(spec, dict) else None
        if isinstance(param, dict):
            api_version, kind = param.get("apiVersion"), param.get("kind")
            if isinstance(api_version, str) and isinstance(kind, str):
                found.add((api_version, kind))
    return frozenset(found)


def is_param(obj: JsonObject, kinds: frozenset[tuple[str, str]]) -> bool:
    """Whether an object is of a kind some policy takes as parameters (in any of its versions: the API
    server serves a parameter in the version the policy names)."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return False
    group = api_version.rpartition("/")[0]
    return any(k == kind and v.rpartition("/")[0] == group for v, k in kinds)


@dataclass(frozen=True)
class Selected:
    """The documents an admission policy set is built from, picked out of others."""

    policies: tuple[Document, ...]  # policies and bindings
    params: tuple[Document, ...]  # objects of a kind some policy takes as parameters
    crds: tuple[Document, ...]


def select(documents: Iterable[Document]) -> Selected:
    """The policies, bindings, parameter objects and CRDs among `documents` (in their order)."""
    documents = tuple(documents)
    policies = tuple(d for d in documents if is_admission_policy_document(d))
    kinds = param_kinds(policies)
    params = tuple(
        d
        for d in documents
        if kinds
        and isinstance(d.data, dict)
        and not is_admission_policy_document(d)
        and is_param(d.data, kinds)
    )
    crds = tuple(d for d in documents if is_crd_document(d))
    return Selected(policies, params, crds)
