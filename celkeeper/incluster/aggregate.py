"""Aggregated status: `status.byPod` of templates and constraints, and whether a constraint is enforced.

Every pod writes its own ConstraintTemplatePodStatus / ConstraintPodStatus objects
(celkeeper.incluster.podstatus). Here they are gathered, Gatekeeper's way, into the status of the
object they describe:

    template.status   = {created: <its constraint CRD exists>, byPod: [{id, observedGeneration, ...}]}
    constraint.status = {byPod: [{id, enforced, observedGeneration, ...}], enforced: <bool>}
    mutator.status    = {byPod: [{id, mutatorUID, operations, enforced, errors, observedGeneration}]}

A mutator's byPod entries are Gatekeeper's MutatorPodStatusStatus, exactly the fields its CRD's schema
keeps (its status has no `enforced` of its own: "enforced by all N pods" is read from the entries, as
`celkeeper` and `kubectl get mutatorpodstatuses` show them).

Only pod statuses of the object's current uid count (a template deleted and made again starts afresh).
A constraint is enforced when at least N pods report that they enforce its current generation, N
being the largest `expectedPods` its pods report (each pod reports its `--expected-pods`; the
aggregating pod's own setting only when none does): pods configured differently, as during a
rollout that changes the replicas, still compute the same status and do not overwrite each other's.
Leaderless, like the CRD writer: every pod computes the same status from the same pod
statuses and writes only when the stored status differs; a conflict (another pod wrote first) re-reads
the object and, finding the status already right, stops.

A writer that computes a different status for the same object (a second celkeeper installed in another
namespace, whose pods report elsewhere; Gatekeeper's own status controller, which writes a mutator's
byPod from Gatekeeper's pods) would otherwise undo each of our writes as we undo its: each write is a
watch event that makes the other write again, without end, loading the API server. So a status this
aggregator has written `CONTESTED_AFTER` times in a row, unchanged on our side, is contested: it is
written again only after a back-off that doubles up to `CONTESTED_MAX` seconds, and a warning names the
object once. A change on our side (the status we compute) ends the contest, and so does agreement seen
`QUIET` seconds or more after our last write (sooner, it is the echo of that write).

celkeeper's controller (celkeeper.incluster): Gatekeeper's status aggregation over celkeeper's CRDs.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from celkeeper.crds import names
from celkeeper.incluster.resources import (
    CONSTRAINT_CRDS,
    MUTATORS,
    TEMPLATES,
    ConstraintKinds,
    constraint_kinds,
    constraint_pod_statuses,
    constraints,
    mutator_pod_statuses,
    template_pod_statuses,
)
from celkeeper.kube.backoff import doubling
from celkeeper.kube.client import ApiError, Client
from celkeeper.kube.manager import Event, WatchManager
from celkeeper.kube.resources import Resource, generation_of, labels_of, name_of, uid_of
from celkeeper.kube.writes import update_status

log = logging.getLogger("celkeeper.incluster")

REGISTRAR = "status-aggregation"
Compute = Callable[[Mapping[str, Any]], dict[str, Any]]
_COMMON = ("id", "observedGeneration", "snapshotGeneration", "operations", "errors")
#: writes of one unchanged status in a row after which it is contested; first and longest back-off (s)
CONTESTED_AFTER = 3
CONTESTED_FIRST = 2.0
CONTESTED_MAX = 300.0
QUIET = 10.0


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    found = obj.get("status")
    return found if isinstance(found, Mapping) else {}


def _entry(pod_status: Mapping[str, Any], extra: tuple[str, ...]) -> dict[str, Any]:
    status = _status(pod_status)
    return {k: copy.deepcopy(status[k]) for k in (*_COMMON, *extra) if k in status}


def _by_id(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(entries, key=lambda e: str(e.get("id", "")))


def template_status(
    template: Mapping[str, Any], pod_statuses: Iterable[Mapping[str, Any]], created: bool
) -> dict[str, Any]:
    """The fields of a template's status that aggregation owns."""
    name, uid = name_of(template), uid_of(template)
    entries = [
        _entry(ps, ("templateUID", "vapGenerationStatus"))
        for ps in pod_statuses
        if labels_of(ps).get(names.TEMPLATE_NAME_LABEL) == name and _status(ps).get("templateUID") == uid
    ]
    return {"created": created, "byPod": _by_id(entries)}


def constraint_status(
    constraint: Mapping[str, Any], pod_statuses: Iterable[Mapping[str, Any]], expected_pods: int
) -> dict[str, Any]:
    """The fields of a constraint's status that aggregation owns (byPod, enforced)."""
    kind, name, uid = str(constraint.get("kind")), name_of(constraint), uid_of(constraint)
    generation = generation_of(constraint)
    entries = []
    for ps in pod_statuses:
        labels = labels_of(ps)
        if labels.get(names.CONSTRAINT_KIND_LABEL) != kind or labels.get(names.CONSTRAINT_NAME_LABEL) != name:
            continue
        if _status(ps).get("constraintUID") != uid:
            continue
        entries.append(_entry(ps, ("constraintUID", "enforced", "expectedPods", "enforcementPointsStatus")))
    current = sum(
        1 for e in entries if e.get("enforced") is True and e.get("observedGeneration") == generation
    )
    reported = [e["expectedPods"] for e in entries if type(e.get("expectedPods")) is int]
    needed = max(reported) if reported else expected_pods
    return {"byPod": _by_id(entries), "enforced": current >= max(1, needed)}


def mutator_status(mutator: Mapping[str, Any], pod_statuses: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The byPod of a mutator's status: Gatekeeper's MutatorPodStatusStatus of every pod reporting its current
    uid (`enforced` and `errors` left out when false or empty, as Gatekeeper's omitempty does)."""
    kind, name, uid = str(mutator.get("kind")), name_of(mutator), uid_of(mutator)
    entries = []
    for ps in pod_statuses:
        labels = labels_of(ps)
        if labels.get(names.MUTATOR_KIND_LABEL) != kind or labels.get(names.MUTATOR_NAME_LABEL) != name:
            continue
        status = _status(ps)
        if status.get("mutatorUID") != uid:
            continue
        entry = {
            k: copy.deepcopy(status[k])
            for k in ("id", "mutatorUID", "operations", "observedGeneration")
            if k in status
        }
        if status.get("enforced") is True:
            entry["enforced"] = True
        if status.get("errors"):
            entry["errors"] = copy.deepcopy(status["errors"])
        entries.append(entry)
    return {"byPod": _by_id(entries)}


def needs_write(obj: Mapping[str, Any], ours: Mapping[str, Any]) -> bool:
    stored = _status(obj)
    return any(stored.get(k) != v for k, v in ours.items())


def with_status(obj: Mapping[str, Any], ours: Mapping[str, Any]) -> dict[str, Any]:
    """The body of a status update: the object as stored, its status with our fields replaced."""
    body = copy.deepcopy(dict(obj))
    status = dict(_status(obj))
    status.update(copy.deepcopy(dict(ours)))
    body["status"] = status
    return body


@dataclass
class _Written:
    """The status last written to one object, how many times in a row, when it may be written again, and
    whether its contest was logged (once per contest: the record lives as long as the contest does)."""

    status: dict[str, Any]
    at: float
    times: int = 1
    not_before: float = 0.0
    warned: bool = False


class StatusAggregator:
    def __init__(
        self,
        client: Client,
        manager: WatchManager,
        namespace: str,
        expected_pods: int,
        on_change: Callable[[], None] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.on_change = on_change
        self.manager = manager
        self.namespace = namespace
        self.expected_pods = max(1, expected_pods)
        self.template_statuses = template_pod_statuses(namespace)
        self.constraint_statuses = constraint_pod_statuses(namespace)
        self.mutator_statuses = mutator_pod_statuses(namespace)
        self.dirty = True
        self.writes = 0
        self.clock = clock
        self._kinds = ConstraintKinds()
        #: per (resource, name) the last reconcile saw: the status this aggregator wrote last, how often
        self._written: dict[tuple[Resource, str], _Written] = {}
        self._seen: set[tuple[Resource, str]] = set()  # the objects this reconcile looked at

    def _base(self) -> set[Resource]:
        return {TEMPLATES, CONSTRAINT_CRDS, self.template_statuses, self.constraint_statuses}

    def _mutation(self) -> set[Resource]:
        """What mutators' status needs (written only where their CRDs and the MutatorPodStatus CRD are)."""
        return {self.mutator_statuses, *MUTATORS}

    def register(self) -> None:
        self.manager.register(REGISTRAR, self.handle, self._base() | self._mutation())

    def handle(self, event: Event) -> None:
        self.dirty = True
        if event.resource == TEMPLATES and self._kinds.update(
            event.type, event.object, lambda: self.manager.objects(TEMPLATES)
        ):
            self.manager.set_intent(REGISTRAR, self._base() | self._mutation() | self._kinds.resources())
        if self.on_change is not None:
            self.on_change()

    def reconcile(self) -> None:
        if not all(self.manager.synced(r) for r in self._base()):
            return
        template_ps = self.manager.objects(self.template_statuses)
        constraint_ps = self.manager.objects(self.constraint_statuses)
        crds = {name_of(c) for c in self.manager.objects(CONSTRAINT_CRDS)}
        failed: list[str] = []
        templates = self.manager.objects(TEMPLATES)
        kinds = constraint_kinds(templates)
        for template in templates:
            kind = kinds.get(name_of(template))
            created = kind is not None and names.constraint_crd_name(kind) in crds
            self._apply(TEMPLATES, template, self._template_status(template_ps, created), failed)
        for kind in sorted(set(kinds.values())):
            resource = constraints(kind)
            if not self.manager.synced(resource) or self.manager.missing(resource):
                continue
            for constraint in self.manager.objects(resource):
                self._apply(resource, constraint, self._constraint_status(constraint_ps), failed)
        if self._usable(self.mutator_statuses):
            mutator_ps = self.manager.objects(self.mutator_statuses)
            for resource in MUTATORS:
                if self._usable(resource):
                    for mutator in self.manager.objects(resource):
                        self._apply(resource, mutator, lambda m: mutator_status(m, mutator_ps), failed)
        self._written = {k: w for k, w in self._written.items() if k in self._seen}
        self._seen = set()
        if failed:
            raise ApiError(0, "Partial", "; ".join(failed[:5]))

    def _usable(self, resource: Resource) -> bool:
        return self.manager.synced(resource) and not self.manager.missing(resource)

    @staticmethod
    def _template_status(pod_statuses: list[Mapping[str, Any]], created: bool) -> Compute:
        return lambda t: template_status(t, pod_statuses, created)

    def _constraint_status(self, pod_statuses: list[Mapping[str, Any]]) -> Compute:
        return lambda c: constraint_status(c, pod_statuses, self.expected_pods)

    def wake_in(self) -> float | None:
        """Seconds until the soonest contested status may be written again (None: none is waiting)."""
        now = self.clock()
        waiting = [w.not_before - now for w in self._written.values() if w.not_before > now]
        return max(0.0, min(waiting)) if waiting else None

    def _apply(self, resource: Resource, obj: Mapping[str, Any], compute: Compute, failed: list[str]) -> None:
        name = name_of(obj)
        key = (resource, name)
        self._seen.add(key)
        ours = compute(obj)
        last = self._written.get(key)
        if not needs_write(obj, ours):
            if last is not None and self.clock() - last.at >= QUIET:
                del self._written[key]  # agreement that lasted: whoever wrote it
            return
        if last is not None and last.status == ours and self.clock() < last.not_before:
            return  # contested: written again once the back-off ends (wake_in)
        written: dict[str, Any] = {}

        def change(current: Mapping[str, Any]) -> dict[str, Any] | None:
            written.clear()
            written.update(compute(current))
            return with_status(current, written) if needs_write(current, written) else None

        try:
            if update_status(self.client, resource, name, change, stored=obj):
                self.writes += 1
                log.debug("wrote the status of %s %s", resource.kind, name)
                self._wrote(key, written)
        except ApiError as err:
            failed.append(f"status of {resource.kind} {name}: {err}")

    def _wrote(self, key: tuple[Resource, str], status: dict[str, Any]) -> None:
        """Count a write; the CONTESTED_AFTER-th of one status in a row starts (or doubles) its back-off."""
        last = self._written.get(key)
        now = self.clock()
        if last is None or last.status != status:  # a change on our side restarts the count, not the warning
            self._written[key] = _Written(copy.deepcopy(status), now, warned=last is not None and last.warned)
            return
        last.at = now
        last.times += 1
        if last.times < CONTESTED_AFTER:
            return
        delay = doubling(CONTESTED_FIRST, CONTESTED_MAX, last.times - CONTESTED_AFTER)
        last.not_before = now + delay
        if not last.warned:
            last.warned = True
            resource, name = key
            log.warning(
                "the status of %s %s is rewritten by another writer each time this pod writes it (a second "
                "celkeeper installed in another namespace, or Gatekeeper's status controller): writing it "
                "again only after a back-off of up to %.0f s",
                resource.kind,
                name,
                CONTESTED_MAX,
            )
