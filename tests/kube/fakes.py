"""A fake of celkeeper's own API adapter (celkeeper.kube.Client) for the pure parts' tests: collections
held in memory, lists that can be held back, watches fed by the test, writes recorded."""

from __future__ import annotations

import copy
import queue
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from celkeeper.kube import ApiError, Listed, Page, Resource, WatchEvent
from celkeeper.kube.resources import object_key

_CLOSE = object()


class FakeStream:
    """A watch stream the test feeds with `push()`; iteration blocks until an event or `close()`."""

    def __init__(self, resource: Resource, resource_version: str) -> None:
        self.resource = resource
        self.resource_version = resource_version
        self._queue: queue.Queue[object] = queue.Queue()
        self.closed = threading.Event()

    def push(self, event: WatchEvent) -> None:
        self._queue.put(event)

    def end(self) -> None:
        """The server ends the watch (a timeout): iteration stops without an error."""
        self._queue.put(_CLOSE)

    def fail(self, err: ApiError) -> None:
        self._queue.put(err)

    def close(self) -> None:
        self.closed.set()
        self._queue.put(_CLOSE)

    def __enter__(self) -> FakeStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[WatchEvent]:
        while True:
            item = self._queue.get()
            if item is _CLOSE:
                return
            if isinstance(item, ApiError):
                raise item
            assert isinstance(item, WatchEvent)
            yield item


def obj(kind: str, name: str, version: str, api_version: str = "v1", **more: Any) -> dict[str, Any]:
    meta = {"name": name, "resourceVersion": version, "uid": f"uid-{name}"}
    meta.update(more.pop("metadata", {}))
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **more}


class FakeClient:
    server = "https://fake.invalid"

    def __init__(self) -> None:
        self.collections: dict[Resource, dict[str, dict[str, Any]]] = {}
        self.versions: dict[Resource, str] = {}
        self.held: dict[Resource, threading.Event] = {}  # lists of these wait until the event is set
        self.watches: list[FakeStream] = []
        self.lists: list[Resource] = []
        self.writes: list[tuple[str, Resource, str]] = []
        self.pages: list[tuple[Resource, str]] = []  # (resource, continue token) of each page asked
        self.expire: dict[Resource, list[ApiError]] = {}  # raised, in turn, by pages asked with a token
        self.paths: dict[str, dict[str, Any]] = {}  # get_path documents (discovery)
        self.conflicts: dict[tuple[Resource, str], int] = {}  # replaces refused with 409, per object
        self.broken: dict[Resource, ApiError] = {}  # list_page of these raises this
        self.lock = threading.Lock()
        self.watch_started = threading.Condition(self.lock)

    # -- set-up by tests ---------------------------------------------------------------------------------
    def put(self, resource: Resource, *objects: Mapping[str, Any], version: str = "1") -> None:
        with self.lock:
            store = self.collections.setdefault(resource, {})
            for o in objects:
                store[object_key(o)] = copy.deepcopy(dict(o))
            self.versions[resource] = version

    def hold(self, resource: Resource) -> threading.Event:
        gate = threading.Event()
        self.held[resource] = gate
        return gate

    def stream(self, resource: Resource, after: FakeStream | None = None, timeout: float = 5.0) -> FakeStream:
        """The newest open watch of `resource` (waiting for it), started after `after` when given."""

        def candidates() -> list[FakeStream]:
            start = self.watches.index(after) + 1 if after is not None else 0
            return [w for w in self.watches[start:] if w.resource == resource and not w.closed.is_set()]

        with self.watch_started:
            assert self.watch_started.wait_for(lambda: bool(candidates()), timeout), f"no watch of {resource}"
            return candidates()[-1]

    # -- the Client protocol -----------------------------------------------------------------------------
    def list(self, resource: Resource) -> Listed:
        gate = self.held.get(resource)
        if gate is not None:
            gate.wait(10)
        with self.lock:
            self.lists.append(resource)
            if resource not in self.collections:
                raise ApiError(404, "NotFound", f"no {resource}")
            items = [copy.deepcopy(o) for o in self.collections[resource].values()]
            return Listed(items, self.versions.get(resource, "1"))

    def list_page(self, resource: Resource, limit: int, continue_token: str = "") -> Page:
        """Objects in key order, `continue_token` = the last key given (as the API server pages)."""
        with self.lock:
            self.pages.append((resource, continue_token))
            if resource in self.broken:
                raise self.broken[resource]
            failures = self.expire.get(resource)
            if continue_token and failures:
                raise failures.pop(0)
            if resource not in self.collections:
                raise ApiError(404, "NotFound", f"no {resource}")
            keys = sorted(k for k in self.collections[resource] if k > continue_token)
            chunk = keys[:limit] if limit > 0 else keys
            token = chunk[-1] if len(keys) > len(chunk) else ""
            items = [copy.deepcopy(self.collections[resource][k]) for k in chunk]
            return Page(items, token, self.versions.get(resource, "1"))

    def get_path(self, path: str) -> dict[str, Any]:
        with self.lock:
            if path not in self.paths:
                raise ApiError(404, "NotFound", f"{path} not found")
            return copy.deepcopy(self.paths[path])

    def watch(self, resource: Resource, resource_version: str, timeout_seconds: int) -> FakeStream:
        del timeout_seconds
        with self.watch_started:
            stream = FakeStream(resource, resource_version)
            self.watches.append(stream)
            self.watch_started.notify_all()
            return stream

    def get(self, resource: Resource, name: str) -> dict[str, Any]:
        with self.lock:
            found = self.collections.get(resource, {}).get(name)
            if found is None:
                raise ApiError(404, "NotFound", f"{resource} {name} not found")
            return copy.deepcopy(found)

    def create(self, resource: Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.writes.append(("create", resource, str(body["metadata"]["name"])))
            self.collections.setdefault(resource, {})[object_key(body)] = copy.deepcopy(dict(body))
            return copy.deepcopy(dict(body))

    def replace(
        self, resource: Resource, name: str, body: Mapping[str, Any], subresource: str = ""
    ) -> dict[str, Any]:
        with self.lock:
            if self.conflicts.get((resource, name)):
                self.conflicts[(resource, name)] -= 1
                raise ApiError(409, "Conflict", f"{resource} {name} was modified")
            self.writes.append(("replace" + (f"/{subresource}" if subresource else ""), resource, name))
            self.collections.setdefault(resource, {})[name] = copy.deepcopy(dict(body))
            return copy.deepcopy(dict(body))

    def delete(self, resource: Resource, name: str, uid: str | None = None) -> None:
        with self.lock:
            self.writes.append(("delete", resource, name))
            if self.collections.get(resource, {}).pop(name, None) is None:
                raise ApiError(404, "NotFound", f"{resource} {name} not found")
