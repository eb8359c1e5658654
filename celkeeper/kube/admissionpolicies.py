"""Kubernetes' admission policies as a cluster holds them, read once with get/list.

    found = read_admission_policies(client, served)
    found.policies   ValidatingAdmissionPolicies, MutatingAdmissionPolicies and their bindings
                     (admissionregistration.k8s.io/v1), as stored
    found.params     the objects of the kinds the policies take as parameters (spec.paramKind), listed in
                     the version the policy names: cluster-wide for a cluster-scoped kind, in the
                     namespaces the bindings' paramRefs name, or in every namespace when a paramRef
                     names none (the API server then looks in the request's namespace)
    found.notes      what could not be read, one line each (a version the server does not serve, e.g.
                     MutatingAdmissionPolicy v1 before Kubernetes 1.36; a 403): the rest is still read

    crds, notes = read_crds(client, served, [(group, kind), ...])   the CRDs defining these kinds

`served(group, kind)` is discovery's answer (the resource serving a kind, or None). Only a 403 (not
allowed) or a 404 (not served) is a note; any other failure raises ApiError.

Adapter (celkeeper.kube): Kubernetes' own resources, read as the API server stores them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from celkeeper.kube.client import ApiError, Client
from celkeeper.kube.discovery import ApiResource
from celkeeper.kube.resources import ALL_CRDS, MAP_BINDINGS, MAPS, VAP_BINDINGS, VAPS, Resource, meta

#: (group, kind) -> the resource serving that kind, None when the cluster serves none (discovery)
Served = Callable[[str, str], ApiResource | None]

POLICY_RESOURCES = (VAPS, VAP_BINDINGS, MAPS, MAP_BINDINGS)
#: when Kubernetes serves a policy resource in v1 (before, only behind a feature gate in v1beta1/v1alpha1)
_SERVED_FROM = {
    VAPS.kind: "ValidatingAdmissionPolicy v1 is served from Kubernetes 1.30",
    VAP_BINDINGS.kind: "ValidatingAdmissionPolicyBinding v1 is served from Kubernetes 1.30",
    MAPS.kind: "MutatingAdmissionPolicy v1 is served from Kubernetes 1.36",
    MAP_BINDINGS.kind: "MutatingAdmissionPolicyBinding v1 is served from Kubernetes 1.36",
}
#: each binding kind and the policy kind it binds
_BOUND = {VAP_BINDINGS.kind: VAPS.kind, MAP_BINDINGS.kind: MAPS.kind}


@dataclass(frozen=True)
class AdmissionPolicyObjects:
    policies: tuple[dict[str, Any], ...]
    params: tuple[dict[str, Any], ...]
    notes: tuple[str, ...]


def read_admission_policies(client: Client, served: Served) -> AdmissionPolicyObjects:
    """The cluster's admission policies, bindings and parameter objects (see the module docstring)."""
    policies: list[dict[str, Any]] = []
    notes: list[str] = []
    for resource in POLICY_RESOURCES:
        policies += _list(client, resource, notes, _SERVED_FROM.get(resource.kind, "")) or ()
    params: list[dict[str, Any]] = []
    for (api_version, kind), namespaces in sorted(_param_places(policies).items()):
        group, _, version = api_version.rpartition("/")
        serving = served(group, kind)
        if serving is None:
            notes.append(
                f"{api_version}/{kind}, a paramKind of the cluster's admission policies, is not served by "
                "the cluster: no parameter object of it is read"
            )
            continue
        if serving.namespaced and namespaces is not None:
            places = [Resource(group, version, serving.plural, kind, namespace=n) for n in sorted(namespaces)]
        else:
            places = [Resource(group, version, serving.plural, kind)]
        for place in places:
            missing = "the admission policies taking them as parameters find none there"
            params += _list(client, place, notes, unreadable=missing) or ()
    return AdmissionPolicyObjects(tuple(policies), tuple(params), tuple(notes))


def read_crds(
    client: Client, served: Served, kinds: Iterable[tuple[str, str]]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The CRDs defining these (group, kind)s, as stored, and notes for those that cannot be read. A kind
    the cluster does not serve, or serves without a CRD (a built-in kind), has none."""
    crds: list[dict[str, Any]] = []
    notes: list[str] = []
    names: set[str] = set()
    for group, kind in sorted(set(kinds)):
        resource = served(group, kind)
        if resource is None or "." not in group:  # a CRD's group has a dot: "" and apps are built in
            continue
        names.add(f"{resource.plural}.{group}")
    for name in sorted(names):
        try:
            crds.append(client.get(ALL_CRDS, name))
        except ApiError as err:
            if err.not_found:
                continue  # served by the API server itself or an aggregated API
            if err.status != 403:
                raise
            notes.append(f"cannot get the CRD {name} ({err}): its kind's resource and scope are guessed")
    return crds, notes


def _list(
    client: Client, resource: Resource, notes: list[str], served_from: str = "", unreadable: str = "skipped"
) -> list[dict[str, Any]] | None:
    """The objects, or None with a note when the resource is not served (404) or not allowed (403)."""
    try:
        return list(client.list(resource).items)
    except ApiError as err:
        if err.not_found:
            since = f" ({served_from})" if served_from else ""
            notes.append(f"{resource}/{resource.version} is not served by the cluster{since}: skipped")
        elif err.status == 403:
            notes.append(f"cannot list {resource}/{resource.version} ({err}): {unreadable}")
        else:
            raise
        return None


def _param_places(policies: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], set[str] | None]:
    """(apiVersion, kind) of each paramKind some binding gives parameters of -> the namespaces its
    paramRefs name, None when one names none (every namespace is then looked in)."""
    kinds: dict[tuple[str, str], tuple[str, str]] = {}  # (policy kind, name) -> its paramKind
    for policy in policies:
        spec = policy.get("spec")
        param = spec.get("paramKind") if isinstance(spec, Mapping) else None
        if policy.get("kind") in _BOUND.values() and isinstance(param, Mapping):
            api_version, kind = param.get("apiVersion"), param.get("kind")
            if isinstance(api_version, str) and isinstance(kind, str) and api_version and kind:
                kinds[(str(policy["kind"]), str(meta(policy).get("name") or ""))] = (api_version, kind)
    places: dict[tuple[str, str], set[str] | None] = {}
    for binding in policies:
        spec = binding.get("spec")
        if binding.get("kind") not in _BOUND or not isinstance(spec, Mapping):
            continue
        param = kinds.get((_BOUND[str(binding["kind"])], str(spec.get("policyName") or "")))
        ref = spec.get("paramRef")
        if param is None or not isinstance(ref, Mapping):
            continue
        namespace = ref.get("namespace")
        known = places.setdefault(param, set())
        if known is not None and isinstance(namespace, str) and namespace:
            known.add(namespace)
        else:
            places[param] = None
    return places
