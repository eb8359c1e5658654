"""What can be watched and written: API resources as plain values, and Kubernetes' built-in ones.

A `Resource` names a collection of the API (group, version, plural), optionally in one namespace and
narrowed by a label selector. It is hashable: the watch manager keys its watches and stores by it.

Adapter: nothing here knows celkeeper's own resources (templates, constraints, per-pod status): those
are celkeeper.incluster.resources.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

Object = Mapping[str, Any]


@dataclass(frozen=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespace: str | None = None  # a namespaced collection in one namespace; None: cluster-wide
    label_selector: str = ""
    field_selector: str = ""  # e.g. metadata.name=X: one object (RBAC resourceNames then apply to list/watch)
    # lists return only each object's metadata (PartialObjectMetadata: apiVersion meta.k8s.io/v1)
    metadata_only: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def collection_path(self) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespace is not None:
            base += f"/namespaces/{quote(self.namespace, safe='')}"
        return f"{base}/{self.plural}"

    def object_path(self, name: str, subresource: str = "") -> str:
        path = f"{self.collection_path()}/{quote(name, safe='')}"
        return f"{path}/{subresource}" if subresource else path

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace is not None else ""
        selector = ", ".join(s for s in (self.label_selector, self.field_selector) if s)
        selector = f" ({selector})" if selector else ""
        group = f".{self.group}" if self.group else ""
        return f"{self.plural}{group}{where}{selector}"


def object_key(obj: Object) -> str:
    """`namespace/name` (or `name` for a cluster-scoped object): unique within one Resource."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = str(meta.get("name", ""))
    return f"{namespace}/{name}" if namespace else name


def meta(obj: Object) -> Mapping[str, Any]:
    found = obj.get("metadata")
    return found if isinstance(found, Mapping) else {}


def name_of(obj: Object) -> str:
    return str(meta(obj).get("name") or "")


def uid_of(obj: Object) -> str:
    return str(meta(obj).get("uid") or "")


def generation_of(obj: Object) -> int:
    value = meta(obj).get("generation")
    return value if isinstance(value, int) else 0


def labels_of(obj: Object) -> Mapping[str, str]:
    found = meta(obj).get("labels")
    return found if isinstance(found, Mapping) else {}


# --- Kubernetes' own resources -------------------------------------------------------------------

NAMESPACES = Resource("", "v1", "namespaces", "Namespace")
PODS_KIND = "Pod"
ALL_CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition")
VAPS = Resource(
    "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy"
)
VAP_BINDINGS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding",
)
MAPS = Resource("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies", "MutatingAdmissionPolicy")
MAP_BINDINGS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingadmissionpolicybindings",
    "MutatingAdmissionPolicyBinding",
)


def secret(namespace: str, name: str) -> Resource:
    """One Secret, watched by name."""
    return Resource(
        "", "v1", "secrets", "Secret", namespace=namespace, field_selector=f"metadata.name={name}"
    )


def validating_webhook_configuration(name: str) -> Resource:
    """One ValidatingWebhookConfiguration, watched by name."""
    return Resource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        field_selector=f"metadata.name={name}",
    )


def mutating_webhook_configuration(name: str) -> Resource:
    """One MutatingWebhookConfiguration, watched by name."""
    return Resource(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        field_selector=f"metadata.name={name}",
    )


def pods(namespace: str) -> Resource:
    return Resource("", "v1", "pods", PODS_KIND, namespace=namespace)
