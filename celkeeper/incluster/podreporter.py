"""This pod's own status objects: what its workers really enforce, written once they enforce it.

    reporter = PodStatusReporter(client, manager, pod, WorkerBoard(state.workers))
    reporter.published(generation, synced, observations)   # the informer published a snapshot
    reporter.reconcile()                                     # the controller loop, often while pending

A published snapshot is only *pending* until every live worker has loaded it (WorkerBoard): the
status then says what this pod enforces, not what it is about to. When several snapshots are pending,
the newest one the workers have loaded wins and older ones are dropped. Each status object is written
only when what it says changes (compared with the stored object this pod's watch holds), so writes
grow with pods x objects changed, never with requests or with unrelated snapshots. Status objects
of objects that no longer exist (in a loaded, complete snapshot) are deleted.

celkeeper's controller (celkeeper.incluster): the writing part of per-pod status (the pure part is
celkeeper.incluster.podstatus).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from celkeeper.crds import names
from celkeeper.errors import CelkeeperError
from celkeeper.incluster.podstatus import (
    Observation,
    ObservationKey,
    ObservationTracker,
    Pod,
    pod_status,
    pod_status_current,
)
from celkeeper.incluster.resources import (
    admission_policy_pod_statuses,
    constraint_pod_statuses,
    mutator_pod_statuses,
    template_pod_statuses,
)
from celkeeper.kube import (
    SYNCED,
    ApiError,
    Client,
    Event,
    WatchManager,
    delete_if_present,
    pods,
    with_resource_version,
    write_desired,
)
from celkeeper.kube.resources import Resource, labels_of, name_of, uid_of
from celkeeper.snapshot import WorkerBoard

log = logging.getLogger("celkeeper.incluster")

REGISTRAR = "pod-status"


class PodStatusReporter:
    def __init__(
        self,
        client: Client,
        manager: WatchManager,
        pod: Pod,
        board: WorkerBoard,
        on_change: Callable[[], None] | None = None,
        *,
        vap_status: Callable[[Observation], Mapping[str, Any] | None] | None = None,
    ) -> None:
        self.client = client
        self.vap_status = vap_status  # the state of the object's generated policy or binding, if any
        self.on_change = on_change
        self.manager = manager
        self.pod = pod
        self.board = board
        self.resources = (template_pod_statuses(pod.namespace), constraint_pod_statuses(pod.namespace))
        # written when their CRDs are installed (an install from before them still gets the others)
        self.mutator_statuses = mutator_pod_statuses(pod.namespace)
        self.admission_statuses = admission_policy_pod_statuses(pod.namespace)
        self.tracker = ObservationTracker()
        self.effective_synced = False
        self.dirty = True
        self.writes = 0
        self._lock = threading.Lock()
        self._pending: list[tuple[int, bool, dict[ObservationKey, Observation]]] = []
        self._owner_checked = False
        self._warned: set[str] = set()

    def register(self) -> None:
        self.manager.register(
            REGISTRAR, self.handle, {*self.resources, self.mutator_statuses, self.admission_statuses}
        )

    def handle(self, event: Event) -> None:
        if event.type == SYNCED or labels_of(event.object).get(names.POD_LABEL) == self.pod.name:
            self.dirty = True  # one of ours changed (e.g. deleted by hand): look again
            if self.on_change is not None:
                self.on_change()

    # -- from the informer ------------------------------------------------------------------------
    def published(
        self, generation: int, synced: bool, observations: dict[ObservationKey, Observation]
    ) -> None:
        with self._lock:
            self._pending.append((generation, synced, observations))
        self.dirty = True

    def busy(self) -> bool:
        """Waiting for the workers to load a snapshot (the controller loop then looks often)."""
        with self._lock:
            return bool(self._pending)

    def _take_loaded(self) -> bool:
        loaded = self.board.loaded_generation()
        if loaded is None:
            return False
        with self._lock:
            ready = [p for p in self._pending if p[0] <= loaded]
            if not ready:
                return False
            generation, synced, observations = ready[-1]
            self._pending = [p for p in self._pending if p[0] > loaded]
        self.tracker.advance(generation, observations)
        self.effective_synced = synced
        log.debug(
            "workers have loaded snapshot generation %d: reporting %d object(s)",
            generation,
            len(observations),
        )
        return True

    # -- writing ----------------------------------------------------------------------------------
    def _check_owner(self) -> None:
        """Status objects are owned by this pod's Pod object, when there is one (then they go with it)."""
        if self._owner_checked:
            return
        try:
            found = self.client.get(pods(self.pod.namespace), self.pod.name)
        except ApiError as err:
            if err.status == 0:
                raise  # cannot tell yet: try again next round
            self._owner_checked = True
            log.info(
                "pod %s/%s not readable (%s): status objects get no owner",
                self.pod.namespace,
                self.pod.name,
                err.reason or err.status,
            )
            return
        self._owner_checked = True
        if uid_of(found):
            owner = {"apiVersion": "v1", "kind": "Pod", "name": self.pod.name, "uid": uid_of(found)}
            self.pod = Pod(self.pod.name, self.pod.namespace, owner, self.pod.expected_pods)

    def reconcile(self) -> None:
        changed = self._take_loaded()
        if self.tracker.generation == 0:
            return
        if not all(self.manager.synced(r) for r in self.resources):
            return
        missing = [r for r in self.resources if self.manager.missing(r)]
        if missing:
            self._warn_once(
                "crds",
                "the status CRDs (%s) are not installed: no per-pod status is written",
                ", ".join(str(r) for r in missing),
            )
            return
        self._check_owner()
        writable = set(self.resources)
        optional: tuple[tuple[Resource, Callable[[Observation], bool], str], ...] = (
            (self.mutator_statuses, lambda o: o.mutator, "mutators"),
            (self.admission_statuses, lambda o: o.admission, "admission policies"),
        )
        for resource, of, what in optional:
            if self.manager.synced(resource) and not self.manager.missing(resource):
                writable.add(resource)
            elif any(of(o) for o, _ in self.tracker.current.values()):
                self._warn_once(
                    f"crd:{resource}",
                    "the %s CRD (%s) is not installed: %s get no per-pod status",
                    resource.kind,
                    resource,
                    what,
                )
        desired: dict[tuple[Resource, str], dict[str, Any]] = {}
        for observation, snapshot_generation in self.tracker.current.values():
            if (observation.mutator and self.mutator_statuses not in writable) or (
                observation.admission and self.admission_statuses not in writable
            ):
                continue
            try:
                vap = self.vap_status(observation) if self.vap_status is not None else None
                resource, obj = pod_status(self.pod, observation, snapshot_generation, vap)
            except CelkeeperError as err:
                self._warn_once(
                    f"name:{observation.key}",
                    "no status for %s %s: %s",
                    observation.kind,
                    observation.name,
                    err,
                )
                continue
            desired[(resource, obj["metadata"]["name"])] = obj
        stored: dict[tuple[Resource, str], Mapping[str, Any]] = {}
        for resource in writable:
            for found in self.manager.objects(resource):
                if labels_of(found).get(names.POD_LABEL) == self.pod.name:
                    stored[(resource, name_of(found))] = found
        failed: list[str] = []
        for (resource, name), wanted in desired.items():
            if not pod_status_current(stored.get((resource, name)), wanted):
                try:
                    self._write(resource, wanted, stored.get((resource, name)))
                except ApiError as err:
                    failed.append(f"{resource.kind} {name}: {err}")
        if self.effective_synced:
            for (resource, name), old in stored.items():
                if (resource, name) not in desired:
                    try:
                        self._delete(resource, name, uid_of(old))
                    except ApiError as err:
                        failed.append(f"{resource.kind} {name}: {err}")
        if changed:
            log.info(
                "pod status: snapshot generation %d is enforced by every worker (%d object(s))",
                self.tracker.generation,
                len(desired),
            )
        if failed:
            raise ApiError(0, "Partial", "cannot write pod status: " + "; ".join(failed[:5]))

    def _write(self, resource: Resource, desired: dict[str, Any], stored: Mapping[str, Any] | None) -> None:
        if write_desired(
            self.client,
            resource,
            desired,
            stored,
            current=pod_status_current,
            update_body=with_resource_version,
        ):
            self.writes += 1

    def _delete(self, resource: Resource, name: str, uid: str) -> None:
        if delete_if_present(self.client, resource, name, uid):
            self.writes += 1

    def _warn_once(self, key: str, message: str, *args: object) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args)
