"""What a cluster enforces, read once and read-only (`celkeeper test --cluster`, `explain --cluster`).

    reader = ClusterReader.connect(kubeconfig, context)
    found = reader.policies()          # templates and constraints of both API groups, ExpansionTemplates,
                                       # Namespaces; what is not installed is noted, not an error
    admission = reader.admission_policies(kinds)   # Kubernetes' admission policies, bindings, their
                                       # parameter objects, and the CRDs of those and of `kinds`
    reader.resource_for(group, kind)   # discovery: the resource serving a kind (plural, namespaced)
    reader.live(group, version, kind, namespace, name)   # the object as stored, or None
    reader.default_namespace           # the kubeconfig context's namespace (kubectl's default)

Every call is a get or a list: the ClusterRole in deploy/ci-rbac.yaml (get/list on the policies and
Namespaces; get/list on the admission policies and bindings, get on CRDs; get on the kinds the manifests
hold, for --against-live) is all it needs; listing the admission policies' parameter objects needs list on
their kinds. A 403 on an admission policy resource, its parameters or a CRD is a note, not an error.

celkeeper's (celkeeper.incluster): what of a cluster celkeeper's offline tools read, through the adapter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from celkeeper.crds import names
from celkeeper.incluster.objects import namespace_object, policy_object
from celkeeper.incluster.resources import EXPANSION_TEMPLATES, TEMPLATES, constraint_kinds
from celkeeper.kube.admissionpolicies import POLICY_RESOURCES, read_admission_policies, read_crds
from celkeeper.kube.client import ApiError, Client, KubeClient
from celkeeper.kube.discovery import ApiResource, discover
from celkeeper.kube.kubeconfig import context_namespace, default_kubeconfig
from celkeeper.kube.resources import NAMESPACES, Resource, name_of

GATEKEEPER_TEMPLATES = Resource(
    names.GATEKEEPER_TEMPLATES_GROUP, "v1", "constrainttemplates", names.TEMPLATE_KIND
)


def constraint_resources(kind: str) -> tuple[Resource, Resource]:
    """The constraints of one kind in celkeeper's and in Gatekeeper's API group."""
    return (
        Resource(names.CONSTRAINTS_GROUP, names.CONSTRAINTS_STORAGE_VERSION, kind.lower(), kind),
        Resource(names.GATEKEEPER_CONSTRAINTS_GROUP, "v1beta1", kind.lower(), kind),
    )


@dataclass(frozen=True)
class ClusterPolicies:
    objects: tuple[tuple[str, dict[str, Any]], ...]  # (where it came from, object): templates, constraints,
    # ExpansionTemplates, reduced to what defines the policy
    namespaces: Mapping[str, dict[str, Any]]  # name -> Namespace as namespaceObject sees it
    notes: tuple[str, ...]  # what is not installed (a CRD missing), one line each


@dataclass(frozen=True)
class ClusterAdmissionPolicies:
    policies: tuple[tuple[str, dict[str, Any]], ...]  # (where, object): the policies and bindings, reduced
    # to what defines them, and the CRDs
    params: tuple[dict[str, Any], ...]  # the parameter objects, as stored
    notes: tuple[str, ...]  # what could not be read (not served, not allowed), one line each


class ClusterReader:
    def __init__(self, client: Client, default_namespace: str = "default") -> None:
        self.client = client
        self.default_namespace = default_namespace
        self._resources: dict[tuple[str, str], ApiResource] | None = None

    @classmethod
    def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> ClusterReader:
        """From a kubeconfig (default: kubectl's, $KUBECONFIG or ~/.kube/config) and context."""
        client = KubeClient.connect(kubeconfig or default_kubeconfig(), context)
        return cls(client, context_namespace(kubeconfig or default_kubeconfig(), context))

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if close is not None:
            close()

    def policies(self) -> ClusterPolicies:
        objects: list[tuple[str, dict[str, Any]]] = []
        notes: list[str] = []
        templates: list[dict[str, Any]] = []
        for resource, what in ((TEMPLATES, "celkeeper's"), (GATEKEEPER_TEMPLATES, "Gatekeeper's")):
            found = self._list(resource)
            if found is None:
                notes.append(
                    f"{what} ConstraintTemplate CRD ({resource.plural}.{resource.group}) is not installed"
                )
                continue
            templates += found
            objects += [(f"cluster:{resource}/{name_of(t)}", policy_object(t)) for t in found]
        for kind in sorted(set(constraint_kinds(templates).values())):
            for resource in constraint_resources(kind):
                for constraint in self._list(resource) or ():  # a kind may be served by one group only
                    objects.append((f"cluster:{resource}/{name_of(constraint)}", policy_object(constraint)))
        expansions = self._list(EXPANSION_TEMPLATES)
        if expansions is None:
            notes.append(
                "the ExpansionTemplate CRD (expansiontemplate.expansion.gatekeeper.sh) is not installed"
            )
        for template in expansions or ():
            objects.append((f"cluster:{EXPANSION_TEMPLATES}/{name_of(template)}", policy_object(template)))
        namespaces = {name_of(ns): namespace_object(ns) for ns in self.client.list(NAMESPACES).items}
        return ClusterPolicies(tuple(objects), namespaces, tuple(notes))

    def admission_policies(self, kinds: Iterable[tuple[str, str]] = ()) -> ClusterAdmissionPolicies:
        """Kubernetes' admission policies and bindings (admissionregistration.k8s.io/v1), their parameter
        objects, and the CRDs of the parameter kinds and of `kinds` ((group, kind)s: those of the objects
        to be reviewed); none of them when the cluster holds no admission policy or binding."""
        found = read_admission_policies(self.client, self.resource_for)
        objects = [(f"cluster:{_where(p)}/{name_of(p)}", policy_object(p)) for p in found.policies]
        notes = list(found.notes)
        if found.policies:
            param_kinds = [k for k in map(_group_kind, found.policies) if k is not None]
            crds, unread = read_crds(self.client, self.resource_for, [*kinds, *param_kinds])
            objects += [(f"cluster:customresourcedefinitions/{name_of(c)}", c) for c in crds]
            notes += unread
        return ClusterAdmissionPolicies(tuple(objects), found.params, tuple(notes))

    def resource_for(self, group: str, kind: str) -> ApiResource | None:
        """The resource serving objects of this group and kind (discovery, read once)."""
        if self._resources is None:
            self._resources = {(r.group, r.kind): r for r in discover(self.client).resources}
        return self._resources.get((group, kind))

    def live(self, group: str, version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The object as the cluster stores it, or None when there is none (or its kind is not served)."""
        served = self.resource_for(group, kind)
        if served is None or not name:
            return None
        resource = Resource(
            group, version, served.plural, kind, namespace=namespace if served.namespaced else None
        )
        try:
            return self.client.get(resource, name)
        except ApiError as err:
            if err.not_found:
                return None
            raise

    def _list(self, resource: Resource) -> list[dict[str, Any]] | None:
        """The objects, or None when the resource is not served (its CRD is not installed)."""
        try:
            return list(self.client.list(resource).items)
        except ApiError as err:
            if err.not_found:
                return None
            raise


_POLICY_RESOURCES = {r.kind: r for r in POLICY_RESOURCES}


def _where(obj: Mapping[str, Any]) -> str:
    """`<plural>.<group>` of an admission policy or binding."""
    return str(_POLICY_RESOURCES[str(obj.get("kind"))])


def _group_kind(policy: Mapping[str, Any]) -> tuple[str, str] | None:
    """(group, kind) of a policy's paramKind, None when it takes no parameters."""
    spec = policy.get("spec")
    param = spec.get("paramKind") if isinstance(spec, Mapping) else None
    if not isinstance(param, Mapping):
        return None
    return str(param.get("apiVersion") or "").rpartition("/")[0], str(param.get("kind") or "")
