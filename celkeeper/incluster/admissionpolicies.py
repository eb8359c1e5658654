"""Kubernetes' admission policies as the webhook pods' informer keeps them when the webhook enforces them
(`serve --enforce-admission-policies --source kubernetes`): ValidatingAdmissionPolicies,
MutatingAdmissionPolicies and their bindings (admissionregistration.k8s.io/v1), and the objects of every
kind a policy takes as parameters (its spec.paramKind), each kind's resource found by discovery.

    watch = AdmissionPolicyWatch(client, manager, on_change=wake)
    watch.register()                  # before or after manager.start()
    watch.reconcile()                 # the controller loop: resolves parameter kinds, sets the watch intent
    objects, synced, problems = watch.view()

A policy that names a new paramKind starts the watch of that kind's resource, one that no policy names any
more stops it, without a restart. The policies and bindings celkeeper (or Gatekeeper) generates from
templates and constraints (their controller is one) are left out: the webhook enforces those constraints
itself. A version the API server does not serve (MutatingAdmissionPolicy v1
before Kubernetes 1.36) is an empty collection, and a kind it does not serve or lets this pod not list
is a problem reported with the snapshot, not something waited for.

celkeeper's (celkeeper.incluster): a registrar of the adapter's WatchManager and a reconciler of the
controller loop (discovery is I/O, which the watch handlers must not do).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from celkeeper.incluster.objects import policy_object
from celkeeper.kube.client import ApiError, Client
from celkeeper.kube.manager import Event, WatchManager
from celkeeper.kube.resources import MAP_BINDINGS, MAPS, VAP_BINDINGS, VAPS, Resource, meta

log = logging.getLogger("celkeeper.informer")

REGISTRAR = "admission-policies"
BASE = frozenset({VAPS, VAP_BINDINGS, MAPS, MAP_BINDINGS})
POLICIES = (VAPS, MAPS)
#: a parameter kind the API server did not serve is looked up again after this many seconds
RESOLVE_RETRY = 30.0
#: metadata that changes on every write and is not part of what a policy reads
_VOLATILE = frozenset({"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp"})
ITEM_PREFIX = "admissionpolicy/"
PARAM_PREFIX = "admissionparam/"
FORBIDDEN = 403
#: the groups of the owners of generated policies and bindings (templates and constraints)
_GENERATORS = frozenset(
    {
        "templates.gatekeeper.sh",
        "templates.celkeeper.io",
        "constraints.gatekeeper.sh",
        "constraints.celkeeper.io",
    }
)


@dataclass(frozen=True)
class _Resolved:
    resource: Resource | None
    error: str
    at: float


def param_kinds(policies: list[Mapping[str, Any]]) -> frozenset[tuple[str, str]]:
    """The (apiVersion, kind) the policies take their parameters of."""
    found: set[tuple[str, str]] = set()
    for policy in policies:
        spec = policy.get("spec")
        param = spec.get("paramKind") if isinstance(spec, Mapping) else None
        if isinstance(param, Mapping):
            api_version, kind = param.get("apiVersion"), param.get("kind")
            if isinstance(api_version, str) and isinstance(kind, str) and kind:
                found.add((api_version, kind))
    return frozenset(found)


class AdmissionPolicyWatch:
    def __init__(
        self,
        client: Client,
        manager: WatchManager,
        on_change: Callable[[], None] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.manager = manager
        self.on_change = on_change
        self.clock = clock
        self.dirty = True
        self._resolved: dict[tuple[str, str], _Resolved] = {}
        self._params: frozenset[Resource] = frozenset()
        self._problems: tuple[str, ...] = ()
        self._reconciled = False

    def register(self) -> None:
        self.manager.register(REGISTRAR, self._handle, set(BASE))

    def _handle(self, event: Event) -> None:
        if event.resource in POLICIES:
            self.dirty = True  # the parameter kinds may have changed: reconcile() looks
        if self.on_change is not None:
            self.on_change()

    # -- the controller loop ------------------------------------------------------------------------
    def reconcile(self) -> None:
        self.dirty = False
        if not all(self.manager.synced(r) or self._forbidden(r) for r in POLICIES):
            self.dirty = True  # the policies are not listed yet: again when they are
            return
        policies = [o for r in POLICIES for o in self.manager.objects(r)]
        problems: list[str] = []
        params: set[Resource] = set()
        for api_version, kind in sorted(param_kinds(policies)):
            found = self._resolve(api_version, kind)
            if found.resource is not None:
                params.add(found.resource)
            else:
                problems.append(f"parameters of kind {kind} ({api_version}): {found.error}")
                self.dirty = True  # looked up again after RESOLVE_RETRY
        with self.manager.lock:
            if params != self._params:
                self._params = frozenset(params)
                self.manager.set_intent(REGISTRAR, set(BASE) | params)
            self._problems = tuple(problems)
            self._reconciled = True
        if self.on_change is not None:
            self.on_change()

    def _forbidden(self, resource: Resource) -> bool:
        """The API server refuses this pod the list (RBAC): reported, not waited for."""
        reflector = self.manager.reflector(resource)
        return reflector is not None and reflector.last_status == FORBIDDEN

    def busy(self) -> bool:
        """A parameter kind waits to be looked up again (the loop comes back without a wake-up)."""
        return any(r.resource is None for r in self._resolved.values())

    def _resolve(self, api_version: str, kind: str) -> _Resolved:
        key = (api_version, kind)
        found = self._resolved.get(key)
        now = self.clock()
        if found is not None and (found.resource is not None or now - found.at < RESOLVE_RETRY):
            return found
        group, _, version = api_version.rpartition("/")
        path = f"/apis/{api_version}" if group else f"/api/{version}"
        try:
            doc = self.client.get_path(path)
        except ApiError as err:
            error = (
                f"the API server serves no {api_version}" if err.not_found else f"cannot look it up: {err}"
            )
            found = _Resolved(None, error, now)
        else:
            found = _Resolved(None, f"{api_version} has no kind {kind}", now)
            for entry in doc.get("resources") or ():
                name = entry.get("name") if isinstance(entry, Mapping) else None
                if entry.get("kind") == kind and isinstance(name, str) and "/" not in name:
                    found = _Resolved(Resource(group, version, name, kind), "", now)
                    break
        if found.error:
            log.warning("cannot watch the parameters of kind %s (%s): %s", kind, api_version, found.error)
        self._resolved[key] = found
        return found

    # -- what the informer publishes ------------------------------------------------------------------
    def view(self) -> tuple[list[tuple[str, dict[str, Any]]], bool, tuple[str, ...]]:
        """The policies, bindings and parameter objects as (snapshot item name, object); whether they are
        all listed (every parameter kind too, or given up on: not served, not permitted); the problems."""
        with self.manager.lock:
            problems = list(self._problems)
            settled = self._reconciled and not self.dirty
            items: list[tuple[str, dict[str, Any]]] = []
            for resource in sorted(BASE, key=str):
                reflector = self.manager.reflector(resource)
                if self._forbidden(resource) and reflector is not None:
                    problems.append(f"cannot list {resource}: {reflector.last_error}")
                    continue
                settled = settled and self.manager.synced(resource)
                for obj in self.manager.objects(resource):
                    name = str(meta(obj).get("name") or "")
                    if name and not _generated(obj):
                        items.append((f"{ITEM_PREFIX}{resource.kind.lower()}/{name}", policy_object(obj)))
            for resource in sorted(self._params, key=str):
                reflector = self.manager.reflector(resource)
                if self._forbidden(resource) and reflector is not None:
                    problems.append(f"cannot list the parameters {resource}: {reflector.last_error}")
                    continue
                settled = settled and self.manager.synced(resource)
                for obj in self.manager.objects(resource):
                    item = _param_item(obj)
                    if item is not None:
                        items.append(item)
        return items, settled, tuple(problems)


def _param_item(obj: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """A parameter object as its policies read it (without the metadata that changes on every write)."""
    metadata = meta(obj)
    name = str(metadata.get("name") or "")
    if not name:
        return None
    namespace = str(metadata.get("namespace") or "")
    kept = {k: v for k, v in metadata.items() if k not in _VOLATILE}
    out = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
    out["metadata"] = kept
    where = f"{namespace}/{name}" if namespace else name
    return f"{PARAM_PREFIX}{obj.get('apiVersion')}/{obj.get('kind')}/{where}", out


def _generated(obj: Mapping[str, Any]) -> bool:
    """A policy or binding generated from a template or constraint (its controller is one)."""
    for ref in meta(obj).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return str(ref.get("apiVersion", "")).rpartition("/")[0] in _GENERATORS
    return False
