"""This pod's SyncPodStatus: what it has synced for templates that read synced data, kind by kind.

    writer = SyncStatusWriter(client, manager, pod, sync, status_file)
    writer.reconcile()       # the controller loop

One object per pod (`<pod>` in the pods' namespace, status.celkeeper.io/v1beta1): for every kind the
sync configuration names, whether its first list completed (templates may rely on it), how many objects
the pod holds, the resourceVersion its watch reached and when the API server last said anything about
it (its freshness), or why it is not synced. Writes stay rare: a change of what is synced, or of an
error, is written at once; the freshness fields (objects, resourceVersion, times) at most every
`interval` seconds. The same, as of every reconcile, goes to a file in the state directory
(`data.json`) that the workers show on /readyz.

celkeeper's controller (celkeeper.incluster): celkeeper's SyncPodStatus, written through the adapter.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from celkeeper.crds import names
from celkeeper.errors import CelkeeperError
from celkeeper.incluster.datasync import DataSync, KindState
from celkeeper.incluster.podstatus import Pod
from celkeeper.incluster.resources import sync_pod_statuses
from celkeeper.kube.client import ApiError, Client
from celkeeper.kube.compare import with_resource_version
from celkeeper.kube.manager import Event, WatchManager
from celkeeper.kube.resources import labels_of, name_of
from celkeeper.kube.writes import write_desired
from celkeeper.localfiles import write_atomic

log = logging.getLogger("celkeeper.incluster")
RETRY_UNLISTED = 1.0  # seconds

REGISTRAR = "sync-status"
VOLATILE = ("objects", "resourceVersion", "listedAt", "observedAt")


def _time(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if t else ""


def kind_status(state: KindState) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "group": state.gvk.group,
        "version": state.gvk.version,
        "kind": state.gvk.kind,
        "resource": state.resource.plural if state.resource is not None else "",
        "synced": state.synced,
        "objects": state.objects,
        "sources": list(state.sources),
    }
    for key, value in (
        ("resourceVersion", state.resource_version),
        ("listedAt", _time(state.listed_at)),
        ("observedAt", _time(state.observed_at)),
        ("error", state.error),
    ):
        if value:
            entry[key] = value
    return entry


def sync_pod_status(
    pod: Pod, states: Sequence[KindState], excluded: Sequence[str], problems: Sequence[str]
) -> dict[str, Any]:
    """The SyncPodStatus object. Raises CelkeeperError when the pod's name cannot name it."""
    status: dict[str, Any] = {"id": pod.name, "kinds": [kind_status(s) for s in states]}
    if excluded:
        status["excludedNamespaces"] = list(excluded)
    if problems:
        status["errors"] = [{"code": "invalid_sync_config", "message": p} for p in problems]
    metadata: dict[str, Any] = {
        "name": names.sync_pod_status_name(pod.name),
        "namespace": pod.namespace,
        "labels": {names.POD_LABEL: pod.name},
    }
    if pod.owner:
        metadata["ownerReferences"] = [dict(pod.owner)]
    return {
        "apiVersion": names.STATUS_API_VERSION,
        "kind": names.SYNC_POD_STATUS_KIND,
        "metadata": metadata,
        "status": status,
    }


def _stable(status: Mapping[str, Any]) -> Any:
    """The status without the freshness fields."""
    out = dict(status)
    out["kinds"] = [{k: v for k, v in e.items() if k not in VOLATILE} for e in status.get("kinds") or ()]
    return out


class SyncStatusWriter:
    def __init__(
        self,
        client: Client,
        manager: WatchManager,
        pod: Callable[[], Pod],
        sync: DataSync,
        status_file: Path,
        *,
        interval: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.manager = manager
        self.pod = pod  # the pod as the per-pod status reporter knows it (with its owner, once read)
        self.sync = sync
        self.status_file = status_file
        self.interval = interval
        self.clock = clock
        self.resource = sync_pod_statuses(pod().namespace)
        self.dirty = True
        self.writes = 0
        self._written_at = -interval
        self._unwritten = False  # the last reconcile found the stored statuses not listed yet
        self._warned = False

    def register(self) -> None:
        self.manager.register(REGISTRAR, self.handle, {self.resource})

    def handle(self, event: Event) -> None:
        self.dirty = True  # e.g. ours was deleted by hand: write it again

    def wake_in(self) -> float | None:
        """Seconds until the next reconcile when the last one could not compare with what is stored."""
        return RETRY_UNLISTED if self._unwritten else None

    def busy(self) -> bool:
        """While a kind is still being listed, look often (its `synced` is reported at once)."""
        return any(not s.synced and s.resource is not None and not s.error for s in self.sync.states())

    def reconcile(self) -> None:
        self.dirty = False
        states = self.sync.states()
        config = self.sync.config
        pod = self.pod()
        try:
            desired = sync_pod_status(pod, states, config.excluded_namespaces, config.problems)
        except CelkeeperError as err:
            if not self._warned:
                self._warned = True
                log.warning("no SyncPodStatus: %s", err)
            return
        self._publish(desired["status"])
        # the stored statuses are being listed (at start, after a watch expired): look again soon, not at
        # the next resync, or a kind synced meanwhile stays unreported for a whole resync period
        self._unwritten = not self.manager.synced(self.resource)
        if self._unwritten or self.manager.missing(self.resource):
            return
        name = desired["metadata"]["name"]
        stored = next(
            (
                o
                for o in self.manager.objects(self.resource)
                if name_of(o) == name and labels_of(o).get(names.POD_LABEL) == pod.name
            ),
            None,
        )
        now = self.clock()
        if stored is not None:
            same = _stable(stored.get("status") or {}) == _stable(desired["status"])
            fresh_enough = now - self._written_at < self.interval
            if same and (fresh_enough or stored.get("status") == desired["status"]):
                return
        try:
            if write_desired(
                self.client,
                self.resource,
                desired,
                stored,
                current=lambda s, d: bool(s and s.get("status") == d.get("status")),
                update_body=with_resource_version,
            ):
                self.writes += 1
                self._written_at = now
        except ApiError as err:
            raise ApiError(0, "Partial", f"cannot write the SyncPodStatus: {err}") from err

    def _publish(self, status: Mapping[str, Any]) -> None:
        try:
            write_atomic(self.status_file, json.dumps(status).encode())
        except OSError as err:
            log.warning("cannot write %s: %s", self.status_file, err)
