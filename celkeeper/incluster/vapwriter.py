"""Generated ValidatingAdmissionPolicies and bindings kept in line with the templates and constraints.

    writer = VapWriter(client, manager, VapSyncOptions(wait_for_binding=30.0), on_status=...)
    writer.published(plan)             # the informer built a policy set: celkeeper.vap.plan_vap of it
    writer.reconcile()                 # the controller loop
    writer.template_status(name), writer.constraint_status(kind, name)   # this pod's outcome, for its status

What Gatekeeper's constraint template and constraint controllers do (pkg/controller/constrainttemplate
manageVAP, pkg/controller/constraint manageVAPB, v3.23.1), leaderless like the CRD writer: every pod computes
the same objects from the same templates and constraints, writes only what differs from the stored
object (a digest annotation notices removed fields) and settles races through the API.

- A template that generates one (generateVAP, else --default-create-vap-for-templates) gets its policy
  `gatekeeper-<template>`, controlled by the template (ownerReference); a template that no longer generates
  one loses it. A template that cannot be a policy keeps the one it has, and says why in its status.
- A constraint with validation actions at vap.k8s.io gets its binding, controlled by the constraint, once its
  constraint CRD has been established for --default-wait-for-vapb-generation seconds in this pod's sight
  (the API server's admission plugin finds a new kind through a discovery cache reset every 30 s; a binding
  it cannot resolve fails every request the policy matches). A constraint that no longer wants one, or
  whose template no longer generates a policy, loses it.
- An object of the same name controlled by something else (Gatekeeper's own template, say) is left alone and
  reported; one without a controller is taken over, as controllerutil.SetControllerReference does.
- Nothing is deleted for a template or constraint this pod's watch misses before the API confirms it is
  gone (a pod whose watch lags must not delete what another pod just made).
- Policies and bindings are watched (and need RBAC: the ClusterRole celkeeper-vap of deploy/celkeeper.yaml)
  only once some template wants a policy; a pod whose templates never did neither reads nor writes them.

Status, per pod, in Gatekeeper's fields: the template's `vapGenerationStatus` {state generated | error,
observedGeneration, warning}; the constraint's `enforcementPointsStatus` entry for vap.k8s.io {state
generated | waiting | error, message, observedGeneration}.

celkeeper's controller (celkeeper.incluster): Gatekeeper's VAP generation, written through the adapter.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from celkeeper.crds import names
from celkeeper.incluster.crdwriter import established
from celkeeper.incluster.resources import CONSTRAINT_CRDS, TEMPLATES, constraints
from celkeeper.kube.client import ApiError, Client
from celkeeper.kube.compare import for_update, up_to_date, with_digest
from celkeeper.kube.manager import Event, WatchManager
from celkeeper.kube.resources import VAP_BINDINGS, VAPS, Resource, name_of, uid_of
from celkeeper.kube.writes import delete_if_present, write_desired
from celkeeper.model import EnforcementPoint
from celkeeper.vap.plan import ConstraintVap, TemplateVap, VapPlan, with_owner

log = logging.getLogger("celkeeper.incluster")

REGISTRAR = "validating-admission-policies"
GENERATED = "generated"
ERROR = "error"
WAITING = "waiting"
API_DISABLED = "validatingAdmissionPolicy API is not enabled"


@dataclass(frozen=True)
class VapSyncOptions:
    wait_for_binding: float = 30.0  # --default-wait-for-vapb-generation (Gatekeeper's default, seconds)


@dataclass(frozen=True)
class Outcome:
    state: str  # generated, waiting, error
    message: str
    generation: int


def _controller(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def _same_owner(ref: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    """controllerutil's referSameObject: the same group, kind and name (the uid may be an old one's)."""
    group = str(ref.get("apiVersion", "")).rpartition("/")[0]
    return (
        group == str(owner.get("apiVersion", "")).rpartition("/")[0]
        and ref.get("kind") == owner.get("kind")
        and ref.get("name") == name_of(owner)
    )


def _owned_by(obj: Mapping[str, Any], group: str) -> Mapping[str, Any] | None:
    """The controller ownerReference of `obj` when it is an object of `group` (celkeeper's templates or
    constraints), else None."""
    ref = _controller(obj)
    if ref is not None and str(ref.get("apiVersion", "")).rpartition("/")[0] == group:
        return ref
    return None


def _generation(data: Mapping[str, Any]) -> int:
    value = (data.get("metadata") or {}).get("generation")
    return value if isinstance(value, int) else 0


def _messages(errors: tuple[Any, ...]) -> str:
    return "; ".join(str(getattr(e, "message", e)) for e in errors)


class VapWriter:
    """Keeps generated policies and bindings in line with the published plan (`reconcile()` by the loop)."""

    def __init__(
        self,
        client: Client,
        manager: WatchManager,
        options: VapSyncOptions | None = None,
        *,
        on_change: Callable[[], None] | None = None,
        on_status: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.manager = manager
        self.options = options or VapSyncOptions()
        self.on_change = on_change
        self.on_status = on_status
        self.clock = clock
        self.dirty = True
        self.writes = 0
        self._lock = threading.Lock()
        self._plan: VapPlan | None = None
        self._established: dict[str, float] = {}  # constraint CRD name -> when this pod first saw it so
        self._waiting = False
        self._templates: dict[str, Outcome] = {}
        self._constraints: dict[tuple[str, str], Outcome] = {}

    # -- watching ---------------------------------------------------------------------------------------
    _BASE = frozenset({CONSTRAINT_CRDS, TEMPLATES})
    _GENERATED = frozenset({VAPS, VAP_BINDINGS})

    def register(self) -> None:
        self.manager.register(REGISTRAR, self.handle, self._BASE)

    @property
    def active(self) -> bool:
        """Some template has wanted a policy since this pod started (then policies are watched for good)."""
        return VAPS in self.manager.intent(REGISTRAR)

    def handle(self, event: Event) -> None:
        if event.resource == CONSTRAINT_CRDS:
            name = name_of(event.object)
            if event.type == "DELETED":
                self._established.pop(name, None)
            elif established(event.object):
                self._established.setdefault(name, self.clock())
        self.dirty = True
        if self.on_change is not None:
            self.on_change()

    def published(self, plan: VapPlan) -> None:
        with self._lock:
            self._plan = plan
        if not self.active and any(t.generate for t in plan.templates):
            self.manager.set_intent(REGISTRAR, self._BASE | self._GENERATED)
        self.dirty = True

    def busy(self) -> bool:
        """Bindings wait for their constraint CRD to age (the loop then looks again soon)."""
        return self._waiting

    # -- this pod's outcomes, for its status --------------------------------------------------------------
    def template_status(self, name: str) -> dict[str, Any] | None:
        found = self._templates.get(name)
        if found is None:
            return None
        status: dict[str, Any] = {"state": found.state, "observedGeneration": found.generation}
        if found.message:
            status["warning"] = found.message
        return status

    def constraint_status(self, kind: str, name: str) -> dict[str, Any] | None:
        found = self._constraints.get((kind, name))
        if found is None:
            return None
        status: dict[str, Any] = {
            "enforcementPoint": EnforcementPoint.VAP.value,
            "state": found.state,
            "observedGeneration": found.generation,
        }
        if found.message:
            status["message"] = found.message
        return status

    def _report(self, templates: dict[str, Outcome], constraints_: dict[tuple[str, str], Outcome]) -> None:
        if templates != self._templates or constraints_ != self._constraints:
            self._templates, self._constraints = templates, constraints_
            if self.on_status is not None:
                self.on_status()

    # -- reconciling ------------------------------------------------------------------------------------
    def ready(self) -> bool:
        return self.active and all(self.manager.synced(r) for r in self._BASE | self._GENERATED)

    def reconcile(self) -> None:
        with self._lock:
            plan = self._plan
        if plan is None or not self.ready():
            return
        templates: dict[str, Outcome] = {}
        constraints_: dict[tuple[str, str], Outcome] = {}
        failed: list[str] = []
        if self.manager.missing(VAPS) or self.manager.missing(VAP_BINDINGS):
            for t in plan.templates:
                if t.generate:
                    templates[t.name] = Outcome(ERROR, API_DISABLED, _generation(t.document.data))
            self._waiting = False
            self._report(templates, constraints_)
            return
        stored_policies = {name_of(o): o for o in self.manager.objects(VAPS)}
        stored_bindings = {name_of(o): o for o in self.manager.objects(VAP_BINDINGS)}
        made: set[str] = set()  # templates whose policy exists as wanted
        for t in plan.templates:
            outcome = self._policy(t, stored_policies, failed)
            if outcome is not None:
                templates[t.name] = outcome
                if outcome.state == GENERATED:
                    made.add(t.name)
        waiting = False
        by_kind = {t.kind: t for t in plan.templates}
        for c in plan.constraints:
            template = by_kind.get(c.kind)
            outcome = self._binding(
                c, template is not None and template.name in made, stored_bindings, failed
            )
            if outcome is not None:
                constraints_[(c.kind, c.name)] = outcome
                waiting = waiting or outcome.state == WAITING
        self._delete_policies(plan, stored_policies, failed)
        self._delete_bindings(plan, stored_bindings, failed)
        self._waiting = waiting
        self._report(templates, constraints_)
        if failed:
            raise ApiError(0, "Partial", "; ".join(failed[:5]))

    def _policy(
        self, t: TemplateVap, stored: Mapping[str, Mapping[str, Any]], failed: list[str]
    ) -> Outcome | None:
        generation = _generation(t.document.data)
        if not t.generate:
            return None
        if t.policy is None:
            return Outcome(
                ERROR, f"ValidatingAdmissionPolicy is not generated: {_messages(t.errors)}", generation
            )
        desired, current, refusal = self._desired(t.policy, t.document.data, stored)
        if refusal:
            return Outcome(ERROR, refusal, generation)
        failure = self._put(VAPS, desired, current, failed)
        if failure:
            return Outcome(ERROR, f"Could not {failure}", generation)
        return Outcome(GENERATED, _messages(t.warnings), generation)

    def _binding(
        self, c: ConstraintVap, policy_made: bool, stored: Mapping[str, Mapping[str, Any]], failed: list[str]
    ) -> Outcome | None:
        generation = _generation(c.document.data)
        if c.errors:
            return Outcome(ERROR, _messages(c.errors), generation)
        if c.binding is None or not policy_made:
            return None
        desired, current, refusal = self._desired(c.binding, c.document.data, stored)
        if refusal:
            return Outcome(ERROR, refusal, generation)
        if current is None:
            seen = self._established.get(names.constraint_crd_name(c.kind))
            if seen is None or self.clock() - seen < self.options.wait_for_binding:
                return Outcome(
                    WAITING,
                    f"waiting {self.options.wait_for_binding:g}s after its constraint CRD is established "
                    "before generating ValidatingAdmissionPolicyBinding, to make sure the API server has "
                    "cached it",
                    generation,
                )
        failure = self._put(VAP_BINDINGS, desired, current, failed)
        if failure:
            return Outcome(ERROR, f"could not {failure}", generation)
        return Outcome(GENERATED, _messages(c.warnings), generation)

    def _desired(
        self, generated: Mapping[str, Any], owner: Mapping[str, Any], stored: Mapping[str, Mapping[str, Any]]
    ) -> tuple[dict[str, Any], Mapping[str, Any] | None, str]:
        """The object to store (owned, digest annotated), the stored one, and why it is not ours to write."""
        desired = with_digest(with_owner(generated, owner))
        current = stored.get(desired["metadata"]["name"])
        return desired, current, self._foreign(current, owner)

    def _put(
        self,
        resource: Resource,
        desired: dict[str, Any],
        current: Mapping[str, Any] | None,
        failed: list[str],
    ) -> str:
        """Write it when it differs; what failed ("create X: reason"), "" when nothing did."""
        name = desired["metadata"]["name"]
        try:
            self._write(resource, desired, current)
        except ApiError as err:
            failed.append(f"{resource.kind} {name}: {err}")
            verb = "create" if current is None else "update"
            return f"{verb} {resource.kind} {name}: {err.message}"
        return ""

    @staticmethod
    def _foreign(current: Mapping[str, Any] | None, owner: Mapping[str, Any]) -> str:
        """Why `current` is not ours to write ("" when it is, or does not exist)."""
        if current is None:
            return ""
        ref = _controller(current)
        if ref is None or _same_owner(ref, owner):
            return ""
        return (
            f"{current.get('kind')} {name_of(current)} exists and is controlled by {ref.get('kind')} "
            f"{ref.get('name')} ({ref.get('apiVersion')}): left alone"
        )

    def _write(self, resource: Resource, desired: dict[str, Any], current: Mapping[str, Any] | None) -> None:
        if up_to_date(current, desired):
            return  # the stored object says it already (its digest included)
        outcome = write_desired(
            self.client, resource, desired, current, current=up_to_date, update_body=for_update
        )
        if outcome is not None:
            self.writes += 1
            log.info("%s %s %s", outcome, resource.kind, desired["metadata"]["name"])

    # -- deleting what is no longer wanted ---------------------------------------------------------------
    def _delete_policies(
        self, plan: VapPlan, stored: Mapping[str, Mapping[str, Any]], failed: list[str]
    ) -> None:
        planned = {t.name: t for t in plan.templates}
        present = {name_of(t) for t in self.manager.objects(TEMPLATES)}
        for _, obj in sorted(stored.items()):
            ref = _owned_by(obj, names.TEMPLATES_GROUP)
            if ref is None:
                continue
            template = str(ref.get("name"))
            found = planned.get(template)
            if found is not None:
                if found.generate:
                    continue  # wanted (or kept while it cannot be made)
            elif template in present or self._exists(TEMPLATES, template):
                continue  # a template this snapshot could not read: keep what it has
            self._delete(VAPS, obj, failed)

    def _delete_bindings(
        self, plan: VapPlan, stored: Mapping[str, Mapping[str, Any]], failed: list[str]
    ) -> None:
        planned = {(c.kind, c.name): c for c in plan.constraints}
        for _, obj in sorted(stored.items()):
            ref = _owned_by(obj, names.CONSTRAINTS_GROUP)
            if ref is None:
                continue
            key = (str(ref.get("kind")), str(ref.get("name")))
            found = planned.get(key)
            if found is not None:
                if found.binding is not None or found.errors:
                    continue  # wanted, or kept while it cannot be made
            elif self._exists(constraints(key[0]), key[1]):
                continue  # a constraint this snapshot could not read (or its template): keep its binding
            self._delete(VAP_BINDINGS, obj, failed)

    def _exists(self, resource: Resource, name: str) -> bool:
        try:
            self.client.get(resource, name)
        except ApiError as err:
            if err.not_found:
                return False
            raise
        return True

    def _delete(self, resource: Resource, obj: Mapping[str, Any], failed: list[str]) -> None:
        try:
            if delete_if_present(self.client, resource, name_of(obj), uid_of(obj)):
                self.writes += 1
                log.info("deleted %s %s: no longer generated", resource.kind, name_of(obj))
        except ApiError as err:
            failed.append(f"cannot delete {resource.kind} {name_of(obj)}: {err}")
