"""What can be watched and written: API resources as plain values, and the ones celkeeper uses.

A `Resource` names a collection of the API (group, version, plural), optionally in one namespace and
narrowed by a label selector. It is hashable: the watch manager keys its watches and stores by it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from celkeeper.crds import names, template_kind
from celkeeper.errors import TemplateError

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


# --- the resources celkeeper watches and writes -------------------------------------------------

TEMPLATES = Resource(
    names.TEMPLATES_GROUP, names.TEMPLATES_VERSION, "constrainttemplates", names.TEMPLATE_KIND
)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace")
# Gatekeeper's ExpansionTemplates (its CRD: deploy/expansiontemplate-crd.yaml; plural `expansiontemplate`)
EXPANSION_TEMPLATES = Resource("expansion.gatekeeper.sh", "v1beta1", "expansiontemplate", "ExpansionTemplate")
PODS_KIND = "Pod"
# the constraint CRDs celkeeper made (each carries celkeeper.io/constraint=yes)
CONSTRAINT_CRDS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    label_selector=f"{names.CONSTRAINT_CRD_LABEL}=yes",
)
ALL_CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition")
# the ValidatingAdmissionPolicies and bindings generated from templates and constraints (celkeeper.vap)
VAPS = Resource(
    "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy"
)
VAP_BINDINGS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding",
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


def pods(namespace: str) -> Resource:
    return Resource("", "v1", "pods", PODS_KIND, namespace=namespace)


def template_pod_statuses(namespace: str) -> Resource:
    return Resource(
        names.STATUS_GROUP,
        names.STATUS_VERSION,
        "constrainttemplatepodstatuses",
        names.TEMPLATE_POD_STATUS_KIND,
        namespace=namespace,
    )


def constraint_pod_statuses(namespace: str) -> Resource:
    return Resource(
        names.STATUS_GROUP,
        names.STATUS_VERSION,
        "constraintpodstatuses",
        names.CONSTRAINT_POD_STATUS_KIND,
        namespace=namespace,
    )


def constraints(kind: str) -> Resource:
    """The constraints of one kind (the collection served by `<lowerkind>.constraints.celkeeper.io`)."""
    return Resource(names.CONSTRAINTS_GROUP, names.CONSTRAINTS_STORAGE_VERSION, kind.lower(), kind)


def is_constraint_resource(resource: Resource) -> bool:
    return resource.group == names.CONSTRAINTS_GROUP


def template_constraint_kind(template: Object) -> str | None:
    """The constraint kind a template defines, when it can define one: a valid kind, and the template's
    name is that kind in lower case (Gatekeeper's rule; two templates can then never claim one kind)."""
    try:
        kind = template_kind(dict(template))
    except TemplateError:
        return None
    return kind if name_of(template) == kind.lower() else None


def constraint_kinds(templates: Iterable[Object]) -> dict[str, str]:
    """Template name -> the constraint kind it defines, for the templates that define one."""
    found: dict[str, str] = {}
    for template in templates:
        kind = template_constraint_kind(template)
        if kind is not None:
            found[name_of(template)] = kind
    return found


class ConstraintKinds:
    """Template name -> the constraint kind it defines, kept up to date one template event at a time
    (a relist of many templates costs linear time, not quadratic)."""

    def __init__(self) -> None:
        self.by_template: dict[str, str] = {}

    def update(self, event_type: str, template: Object, everything: Callable[[], Iterable[Object]]) -> bool:
        """Apply one event of the templates' watch (SYNCED: recount from `everything()`); True when the
        set of kinds changed."""
        before = set(self.by_template.values())
        if event_type == "SYNCED":
            self.by_template = constraint_kinds(everything())
        elif event_type == "DELETED":
            self.by_template.pop(name_of(template), None)
        else:
            kind = template_constraint_kind(template)
            if kind is None:
                self.by_template.pop(name_of(template), None)
            else:
                self.by_template[name_of(template)] = kind
        return set(self.by_template.values()) != before

    def resources(self) -> set[Resource]:
        return {constraints(kind) for kind in self.by_template.values()}
