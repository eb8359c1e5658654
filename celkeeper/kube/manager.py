"""The dynamic watch manager: registrars say which resources they want; the manager watches the union.

    manager = WatchManager(client)
    manager.register("policies", handler, {TEMPLATES, NAMESPACES})
    manager.set_intent("policies", {TEMPLATES, NAMESPACES, constraints("K8sRequiredLabels")})
    manager.start()
    manager.objects(TEMPLATES), manager.synced(resource), manager.missing(resource)

One watch (a Reflector) and one store per resource, however many registrars want it. Every event is
routed to exactly the registrars whose intent includes its resource, in the order they happen. A
registrar that starts wanting a resource already watched is replayed the current content as ADDED
events (no second watch, no second cache). A resource nobody wants any more stops being watched and
its store is dropped. Intents may change from inside a handler (e.g. a new template adds its
constraint kind): no restart, no finalizers.

A relist (after 410 Gone) is turned into the events that explain the difference between the store and
the new listing, so registrars see each change once: objects deleted while the watch was down as
DELETED, changed ones as MODIFIED, new ones as ADDED, unchanged ones not at all. Every list ends with
a SYNCED event (no object): the store is complete (it may have been empty, with no other event).

Handlers run on the watch threads while the manager's lock is held: they must be quick (update their
own state, set a flag, wake a thread) and must not block on I/O. They may call the manager.

Adapter (celkeeper.kube): generic, like client-go's shared informers; the registrars are celkeeper's
controllers (celkeeper.incluster).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from celkeeper.kube.client import Client
from celkeeper.kube.reflector import Reflector, Timing
from celkeeper.kube.resources import Resource, object_key

log = logging.getLogger("celkeeper.kube")


SYNCED = "SYNCED"


@dataclass(frozen=True)
class Event:
    type: str  # ADDED, MODIFIED, DELETED, or SYNCED (a list completed: the store is complete; no object)
    resource: Resource
    object: Mapping[str, Any]  # for DELETED: the last state known
    old: Mapping[str, Any] | None = None  # the previous state (MODIFIED, DELETED)


Handler = Callable[[Event], None]
ReflectorFactory = Callable[[Client, Resource, Any, Timing | None], Reflector]


class _Watched:
    def __init__(self, reflector: Reflector) -> None:
        self.reflector = reflector
        self.objects: dict[str, dict[str, Any]] = {}
        self.synced = False
        self.missing = False


class _Registration:
    def __init__(self, name: str, handler: Handler) -> None:
        self.name = name
        self.handler = handler
        self.resources: frozenset[Resource] = frozenset()


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class WatchManager:
    def __init__(
        self,
        client: Client,
        timing: Timing | None = None,
        reflector_factory: ReflectorFactory = Reflector,
    ) -> None:
        self.client = client
        self.timing = timing
        self._factory = reflector_factory
        self.lock = threading.RLock()
        self._registrations: dict[str, _Registration] = {}
        self._watched: dict[Resource, _Watched] = {}
        self._started = False
        self._stopped = False

    # -- registrars -------------------------------------------------------------------------------
    def register(self, name: str, handler: Handler, resources: Iterable[Resource] = ()) -> None:
        with self.lock:
            if name in self._registrations:
                raise ValueError(f"registrar {name!r} is already registered")
            self._registrations[name] = _Registration(name, handler)
            self.set_intent(name, resources)

    def unregister(self, name: str) -> None:
        with self.lock:
            if name in self._registrations:
                self.set_intent(name, ())
                del self._registrations[name]

    def set_intent(self, name: str, resources: Iterable[Resource]) -> None:
        """What registrar `name` wants watched from now on (replaces its earlier intent)."""
        wanted = frozenset(resources)
        with self.lock:
            registration = self._registrations[name]
            added = wanted - registration.resources
            registration.resources = wanted
            if self._started and not self._stopped:
                for resource in sorted(added, key=str):
                    watched = self._watched.get(resource)
                    if watched is not None:  # already watched for someone else: replay its content
                        for obj in list(watched.objects.values()):
                            self._call(registration, Event("ADDED", resource, obj))
            self._reconcile_watches()

    def intent(self, name: str) -> frozenset[Resource]:
        with self.lock:
            registration = self._registrations.get(name)
            return registration.resources if registration else frozenset()

    def wanted(self) -> frozenset[Resource]:
        with self.lock:
            return frozenset(r for reg in self._registrations.values() for r in reg.resources)

    def watched(self) -> frozenset[Resource]:
        with self.lock:
            return frozenset(self._watched)

    # -- life cycle -------------------------------------------------------------------------------
    def start(self) -> None:
        with self.lock:
            self._started = True
            self._reconcile_watches()

    def stop(self) -> None:
        with self.lock:
            self._stopped = True
            watched = list(self._watched.values())
            self._watched.clear()
        for entry in watched:
            entry.reflector.stop()

    def _reconcile_watches(self) -> None:
        if not self._started or self._stopped:
            return
        wanted = self.wanted()
        for resource in [r for r in self._watched if r not in wanted]:
            entry = self._watched.pop(resource)
            entry.reflector.stop()
            log.info("stopped watching %s", resource)
        for resource in sorted(wanted - set(self._watched), key=str):
            reflector = self._factory(self.client, resource, self, self.timing)
            self._watched[resource] = _Watched(reflector)
            reflector.start()
            log.info("watching %s", resource)

    # -- reading the stores -----------------------------------------------------------------------
    def objects(self, resource: Resource) -> list[Mapping[str, Any]]:
        """The current objects of a watched resource (shared: callers must not change them)."""
        with self.lock:
            entry = self._watched.get(resource)
            return list(entry.objects.values()) if entry else []

    def get(self, resource: Resource, key: str) -> Mapping[str, Any] | None:
        with self.lock:
            entry = self._watched.get(resource)
            return entry.objects.get(key) if entry else None

    def synced(self, resource: Resource) -> bool:
        """Listed at least once since it was first wanted (a missing collection counts as listed)."""
        with self.lock:
            entry = self._watched.get(resource)
            return bool(entry and entry.synced)

    def missing(self, resource: Resource) -> bool:
        """The last list found no such collection (e.g. its CRD does not exist)."""
        with self.lock:
            entry = self._watched.get(resource)
            return bool(entry and entry.missing)

    def kick(self, resource: Resource) -> None:
        with self.lock:
            entry = self._watched.get(resource)
            if entry is not None:
                entry.reflector.kick()

    def reflector(self, resource: Resource) -> Reflector | None:
        with self.lock:
            entry = self._watched.get(resource)
            return entry.reflector if entry else None

    # -- what the reflectors deliver (the ReflectorSink protocol) ---------------------------------
    def _current(self, reflector: Reflector) -> _Watched | None:
        entry = self._watched.get(reflector.resource)
        if entry is None or entry.reflector is not reflector or reflector.stopped:
            return None  # a watch that was stopped: what it still delivers is dropped
        return entry

    def replaced(self, reflector: Reflector, items: list[dict[str, Any]], missing: bool) -> None:
        with self.lock:
            entry = self._current(reflector)
            if entry is None:
                return
            resource = reflector.resource
            new = {object_key(obj): obj for obj in items}
            old = entry.objects
            events: list[Event] = []
            for key, obj in old.items():
                if key not in new:
                    events.append(Event("DELETED", resource, obj, obj))
            for key, obj in new.items():
                before = old.get(key)
                if before is None:
                    events.append(Event("ADDED", resource, obj))
                elif _version(before) != _version(obj) or not _version(obj):
                    events.append(Event("MODIFIED", resource, obj, before))
            entry.objects = new
            entry.missing = missing
            first = not entry.synced
            entry.synced = True
            if first:
                log.debug(
                    "%s synced: %d object(s)%s", resource, len(new), " (no such resource)" if missing else ""
                )
            events.append(Event(SYNCED, resource, {}))
            self._route(resource, events)

    def event(self, reflector: Reflector, type_: str, obj: dict[str, Any]) -> None:
        with self.lock:
            entry = self._current(reflector)
            if entry is None:
                return
            resource = reflector.resource
            key = object_key(obj)
            before = entry.objects.get(key)
            if type_ == "DELETED":
                if before is None:
                    return
                del entry.objects[key]
                self._route(resource, [Event("DELETED", resource, obj, before)])
                return
            if before is not None and _version(before) == _version(obj) and _version(obj):
                return  # seen already (e.g. delivered by the list this watch started from)
            entry.objects[key] = obj
            entry.missing = False
            type_ = "MODIFIED" if before is not None else "ADDED"
            self._route(resource, [Event(type_, resource, obj, before)])

    def _route(self, resource: Resource, events: list[Event]) -> None:
        if not events:
            return
        for registration in list(self._registrations.values()):
            if resource not in registration.resources:
                continue
            for event in events:
                if resource not in registration.resources:
                    break  # the registrar gave it up while handling an earlier event
                self._call(registration, event)

    @staticmethod
    def _call(registration: _Registration, event: Event) -> None:
        try:
            registration.handler(event)
        except Exception:
            log.exception("registrar %s failed on %s %s", registration.name, event.type, event.resource)
