"""celkeeper's own resources: templates, their constraint CRDs and constraints, per-pod status, and
Gatekeeper's ExpansionTemplates, as `celkeeper.kube.Resource` values (Kubernetes' built-in resources
are the adapter's: celkeeper.kube.resources)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from celkeeper.crds import names, template_kind
from celkeeper.errors import TemplateError
from celkeeper.kube.resources import Object, Resource, name_of

TEMPLATES = Resource(
    names.TEMPLATES_GROUP, names.TEMPLATES_VERSION, "constrainttemplates", names.TEMPLATE_KIND
)
# Gatekeeper's ExpansionTemplates (its CRD: deploy/expansiontemplate-crd.yaml; plural `expansiontemplate`)
EXPANSION_TEMPLATES = Resource("expansion.gatekeeper.sh", "v1beta1", "expansiontemplate", "ExpansionTemplate")
#: Gatekeeper's mutators, at the version each CRD stores (Gatekeeper v3.23.1's CRDs; their plurals are
#: their kinds in lower case)
MUTATORS = (
    Resource("mutations.gatekeeper.sh", "v1", "assign", "Assign"),
    Resource("mutations.gatekeeper.sh", "v1", "assignmetadata", "AssignMetadata"),
    Resource("mutations.gatekeeper.sh", "v1", "modifyset", "ModifySet"),
    Resource("mutations.gatekeeper.sh", "v1alpha1", "assignimage", "AssignImage"),
)
# the constraint CRDs celkeeper made (each carries celkeeper.io/constraint=yes)
CONSTRAINT_CRDS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    label_selector=f"{names.CONSTRAINT_CRD_LABEL}=yes",
)


def _pod_statuses(plural: str, kind: str, namespace: str) -> Resource:
    """One kind of celkeeper's per-pod status objects (status.celkeeper.io), in the pods' namespace."""
    return Resource(names.STATUS_GROUP, names.STATUS_VERSION, plural, kind, namespace=namespace)


def template_pod_statuses(namespace: str) -> Resource:
    return _pod_statuses("constrainttemplatepodstatuses", names.TEMPLATE_POD_STATUS_KIND, namespace)


def constraint_pod_statuses(namespace: str) -> Resource:
    return _pod_statuses("constraintpodstatuses", names.CONSTRAINT_POD_STATUS_KIND, namespace)


def mutator_pod_statuses(namespace: str) -> Resource:
    return _pod_statuses("mutatorpodstatuses", names.MUTATOR_POD_STATUS_KIND, namespace)


def admission_policy_pod_statuses(namespace: str) -> Resource:
    return _pod_statuses("admissionpolicypodstatuses", names.ADMISSION_POLICY_POD_STATUS_KIND, namespace)


def sync_pod_statuses(namespace: str) -> Resource:
    return _pod_statuses("syncpodstatuses", names.SYNC_POD_STATUS_KIND, namespace)


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
