"""The second set of dynamic watches: cluster objects cached for templates that read synced data.

    sync = DataSync(client, manager, store, pod_namespace, on_change=wake)
    sync.register()          # watches the sync configuration (Config, SyncSets)
    sync.reconcile()         # the controller loop: resolves kinds, sets the watch intent
    sync.start() / stop()    # the writer thread
    sync.synced_kinds()      # kinds whose first list is in the store
    sync.states()            # per kind: synced, objects, resourceVersion, freshness, error

A registrar of the shared WatchManager (`synced-data`), beside the policies': it wants the sync
configuration's resources and, once the configuration is read, the resource of every kind it names
(found by discovery: the API server's plural for the group, version and kind). A kind added to or
removed from a SyncSet starts or stops its watch, without a restart; a kind already watched for
another registrar (e.g. Namespaces) is not watched twice.

Watch handlers only enqueue (they run under the manager's lock); a writer thread writes the queue
to the store (celkeeper.snapshot.datastore, given) in batches, one transaction each. A kind is *synced* once
the objects of its first list are in the store; a relist (410 Gone, a new informer after a restart)
also removes what the list no longer has. Objects in namespaces the Config excludes from sync are
not stored. A kind that leaves the configuration is removed from the store.

celkeeper's controller (celkeeper.incluster): a registrar of the adapter's WatchManager.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from celkeeper.cel.inventory import Change, Delete, Gvk, Put, object_row
from celkeeper.incluster.syncconfig import (
    GATEKEEPER_SYNCSETS,
    SYNCSETS,
    SyncConfig,
    gatekeeper_configs,
    namespace_excluded,
    sync_config,
)
from celkeeper.kube.client import ApiError, Client
from celkeeper.kube.manager import SYNCED, Event, WatchManager
from celkeeper.kube.resources import Resource, meta

log = logging.getLogger("celkeeper.incluster")


class Store(Protocol):
    """Where synced objects go (celkeeper.snapshot.datastore.DataStore)."""

    def apply(self, changes: Iterable[Change]) -> int: ...

    def retain(self, gvk: Gvk, keys: Iterable[tuple[str, str]]) -> int: ...

    def drop(self, gvk: Gvk) -> int: ...

    def counts(self) -> dict[Gvk, int]: ...


REGISTRAR = "synced-data"
BATCH = 500  # changes per transaction at most
FORBIDDEN = 403
RESOLVE_RETRY = 30.0  # a kind the API server does not serve is looked up again after this


@dataclass(frozen=True)
class KindState:
    """What this pod has of one synced kind."""

    gvk: Gvk
    sources: tuple[str, ...]
    resource: Resource | None = None  # None: not served (see error)
    namespaced: bool = True
    synced: bool = False  # the first list is in the store
    objects: int = 0
    resource_version: str = ""
    listed_at: float = 0.0  # Unix time the last complete list was stored
    observed_at: float = 0.0  # Unix time the API server last said anything about it
    error: str = ""


@dataclass(frozen=True)
class _Resolved:
    resource: Resource | None
    namespaced: bool
    error: str
    at: float


class DataSync:
    def __init__(
        self,
        client: Client,
        manager: WatchManager,
        store: Store,
        pod_namespace: str,
        *,
        on_change: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.manager = manager
        self.store = store
        self.on_change = on_change
        self.clock = clock
        self.configs = gatekeeper_configs(pod_namespace)
        self.config_resources = frozenset({self.configs, GATEKEEPER_SYNCSETS, SYNCSETS})
        self.dirty = True
        self.config = SyncConfig()
        self.writes = 0  # transactions written
        self._lock = threading.Lock()  # the states
        self._states: dict[Gvk, KindState] = {}
        self._resolved: dict[Gvk, _Resolved] = {}
        self._by_resource: dict[Resource, Gvk] = {}  # read by handlers under the manager's lock
        self._excluded: tuple[str, ...] = ()
        self._queue: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._configured = False  # the configuration has been read once
        self._initial: frozenset[Gvk] | None = None  # the kinds configured when it was first read
        self._bootstrapped = False
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # -- life cycle -------------------------------------------------------------------------------
    def register(self) -> None:
        self.manager.register(REGISTRAR, self._handle, self.config_resources)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._write_loop, name="synced-data", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._queue.put(("stop",))
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- what others read ---------------------------------------------------------------------------
    def states(self) -> list[KindState]:
        """Every configured kind, with its freshness as of now."""
        with self._lock:
            states = sorted(self._states.values(), key=lambda s: s.gvk)
        out = []
        for state in states:
            reflector = self.manager.reflector(state.resource) if state.resource is not None else None
            if reflector is None:
                out.append(state)
                continue
            out.append(
                replace(
                    state,
                    resource_version=reflector.resource_version,
                    observed_at=reflector.last_contact,
                    error=state.error or reflector.last_error,
                )
            )
        return out

    def synced_kinds(self) -> frozenset[Gvk]:
        with self._lock:
            return frozenset(g for g, s in self._states.items() if s.synced)

    def bootstrapped(self) -> bool:
        """The configuration has been read and every kind it named then has been listed into the
        store (or cannot be: not served). Stays true."""
        if self._bootstrapped:
            return True
        if self._initial is None:
            return False
        with self._lock:
            states = [self._states.get(g) for g in self._initial]
        done = all(s is None or s.synced or s.resource is None or self._forbidden(s.resource) for s in states)
        self._bootstrapped = done
        return done

    # -- watch events (watch threads, under the manager's lock: enqueue only) ------------------------
    def _handle(self, event: Event) -> None:
        if event.resource in self.config_resources:
            self.dirty = True
            self._changed()
            return
        gvk = self._by_resource.get(event.resource)
        if gvk is None:
            return
        if event.type == SYNCED:
            self._queue.put(("synced", gvk, event.resource, self._keys(event.resource)))
            return
        if event.type == "DELETED" or self._excludes(event.object):
            self._queue.put(("change", Delete(event.object)))
        else:
            self._queue.put(("change", Put(event.object)))

    def _excludes(self, obj: Mapping[str, Any]) -> bool:
        """Gatekeeper's process excluder for `sync`: an object in an excluded namespace, or a Namespace
        whose own name is excluded."""
        if not self._excluded:
            return False
        if obj.get("kind") == "Namespace" and obj.get("apiVersion") == "v1":
            namespace = str(meta(obj).get("name") or "")
        else:
            namespace = str(meta(obj).get("namespace") or "")
        return bool(namespace) and namespace_excluded(self._excluded, namespace)

    def _keys(self, resource: Resource) -> set[tuple[str, str]]:
        keys = set()
        for obj in self.manager.objects(resource):
            row = object_row(obj)
            if row is not None and not self._excludes(obj):
                keys.add((row[1], row[2]))
        return keys

    # -- the configuration (the controller thread) ---------------------------------------------------
    def _forbidden(self, resource: Resource) -> bool:
        """The API server refuses this pod the list (RBAC): reported, and not waited for - a pod that
        may not read a SyncSet or a synced kind must not stay unready for it."""
        reflector = self.manager.reflector(resource)
        return reflector is not None and reflector.last_status == FORBIDDEN

    def reconcile(self) -> None:
        self.dirty = False
        settled = [self.manager.synced(r) or self._forbidden(r) for r in self.config_resources]
        if not all(settled):
            return
        problems = [
            f"cannot list {r}: {reflector.last_error}"
            for r in sorted(self.config_resources, key=str)
            if self._forbidden(r) and (reflector := self.manager.reflector(r)) is not None
        ]
        syncsets = [(r.group, o) for r in (GATEKEEPER_SYNCSETS, SYNCSETS) for o in self.manager.objects(r)]
        config = sync_config(self.manager.objects(self.configs), syncsets)
        config = replace(config, problems=(*problems, *config.problems))
        if config.problems != self.config.problems:
            for problem in config.problems:
                log.warning("sync configuration: %s", problem)
        resolved = {gvk: self._resolve(gvk) for gvk in config.kinds}
        with self.manager.lock:
            excluded_changed = config.excluded_namespaces != self._excluded
            self._excluded = config.excluded_namespaces
            wanted: dict[Resource, Gvk] = {}
            with self._lock:
                for gvk, sources in config.kinds.items():
                    found = resolved[gvk]
                    old = self._states.get(gvk)
                    if old is None or old.resource != found.resource:
                        state = KindState(gvk, sources, found.resource, found.namespaced, error=found.error)
                    else:
                        state = replace(old, sources=sources, error=found.error)
                    self._states[gvk] = state
                    if found.resource is not None and found.resource not in wanted:
                        wanted[found.resource] = gvk
                for gvk in [g for g in self._states if g not in config.kinds]:
                    del self._states[gvk]
                    self._queue.put(("drop", gvk))
                    log.info("no longer syncing %s", gvk)
            added = [r for r in wanted if r not in self._by_resource]
            self._by_resource = dict(wanted)
            self.manager.set_intent(REGISTRAR, self.config_resources | set(wanted))
            # already watched for someone else: replayed as ADDED without a SYNCED - the list is there
            for resource in added:
                if self.manager.synced(resource):
                    self._queue.put(("synced", wanted[resource], resource, self._keys(resource)))
            if excluded_changed:
                for resource, gvk in wanted.items():
                    if resource not in added and self.manager.synced(resource):
                        self._queue.put(("reload", gvk, resource))
        self.config = config
        if self._initial is None:
            self._initial = frozenset(config.kinds)
            log.info(
                "sync configuration read: %d kind(s)%s",
                len(config.kinds),
                "".join(f"\n  {g} ({', '.join(s)})" for g, s in config.kinds.items()),
            )
        self._configured = True
        self._changed()

    def _resolve(self, gvk: Gvk) -> _Resolved:
        """The resource serving a kind (discovery of its group version), remembered; a kind not
        served is looked up again after RESOLVE_RETRY seconds."""
        found = self._resolved.get(gvk)
        now = self.clock()
        if found is not None and (found.resource is not None or now - found.at < RESOLVE_RETRY):
            return found
        path = f"/apis/{gvk.group}/{gvk.version}" if gvk.group else f"/api/{gvk.version}"
        try:
            doc = self.client.get_path(path)
        except ApiError as err:
            error = (
                f"not served: the API server serves no {gvk.api_version}"
                if err.not_found
                else f"cannot look {gvk.api_version} up: {err}"
            )
            found = _Resolved(None, True, error, now)
        else:
            found = _Resolved(None, True, f"not served: {gvk.api_version} has no kind {gvk.kind}", now)
            for entry in doc.get("resources") or ():
                if (
                    isinstance(entry, Mapping)
                    and entry.get("kind") == gvk.kind
                    and isinstance(entry.get("name"), str)
                    and "/" not in entry["name"]
                ):
                    namespaced = bool(entry.get("namespaced"))
                    resource = Resource(gvk.group, gvk.version, entry["name"], gvk.kind)
                    found = _Resolved(resource, namespaced, "", now)
                    break
        if found.error:
            log.warning("cannot sync %s: %s", gvk, found.error)
        self._resolved[gvk] = found
        return found

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    # -- the writer thread ---------------------------------------------------------------------------
    def _write_loop(self) -> None:
        while not self._stop.is_set():
            try:
                item = self._queue.get(timeout=1.0)
            except queue.Empty:
                continue
            batch = [item]
            while len(batch) < BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self._write(batch)
            except Exception:  # a full disk, a bug: log it, and relist to converge again
                log.exception("cannot write synced data; the kinds will be listed again")
                self._relist_all()

    def _relist_all(self) -> None:
        with self._lock:
            resources = [s.resource for s in self._states.values() if s.resource is not None]
        for resource in resources:
            reflector = self.manager.reflector(resource)
            if reflector is not None:
                reflector.resource_version = ""  # the next round lists again (a SYNCED follows)
                reflector.kick()

    def _write(self, batch: list[tuple[Any, ...]]) -> None:
        changes: list[Put | Delete] = []
        newly_synced = False
        for item in batch:
            op = item[0]
            if op == "stop":
                return
            if op == "change":
                changes.append(item[1])
                continue
            if changes:  # keep the order: what came before this item is written first
                self.store.apply(changes)
                self.writes += 1
                changes = []
            if op == "synced":
                _, gvk, resource, keys = item
                removed = self.store.retain(gvk, keys)
                if removed:
                    log.info("%s: %d object(s) no longer listed were removed", gvk, removed)
                newly_synced |= self._mark_synced(gvk, resource, len(keys))
            elif op == "drop":
                self.store.drop(item[1])
            elif op == "reload":
                _, gvk, resource = item
                objects = self.manager.objects(resource)
                keys = self._keys(resource)
                self.store.apply(Put(o) for o in objects if (r := object_row(o)) and (r[1], r[2]) in keys)
                self.store.retain(gvk, keys)
        if changes:
            self.store.apply(changes)
            self.writes += 1
        if newly_synced:
            self._changed()

    def _mark_synced(self, gvk: Gvk, resource: Resource, objects: int) -> bool:
        with self._lock:
            state = self._states.get(gvk)
            if state is None or state.resource != resource:
                return False  # no longer wanted (or watched otherwise): nothing to report
            self._states[gvk] = replace(state, synced=True, objects=objects, listed_at=self.clock())
            first = not state.synced
        if first:
            log.info("synced %s: %d object(s)", gvk, objects)
        return first

    def counts(self) -> dict[Gvk, int]:
        return self.store.counts()
