"""The Kubernetes API as celkeeper uses it: JSON objects in, JSON objects out (the adapter boundary).

    client = KubeClient.connect(kubeconfig=None)      # in-cluster config when no kubeconfig is given
    client.list(resource) -> Listed(items, resource_version)
    client.list_page(resource, limit, continue_token) -> Page(items, continue_token, resource_version)
    client.get_path("/apis") -> the JSON object at an API path (discovery documents)
    with client.watch(resource, resource_version, timeout_seconds) as events: for event in events: ...
    client.get / create / replace (optionally the status subresource) / delete

Everything else in celkeeper talks to the API through the `Client` protocol (tests use fakes of it);
this module is the only one that uses the `kubernetes` package, for its configuration (kubeconfig,
in-cluster service account with token refresh) and its HTTP pool, imported without its API classes
and models (celkeeper.kube.k8smodules). Requests are plain
REST calls with JSON bodies: no generated models, no discovery. Every failure is an `ApiError` with
the HTTP status (0 when the server could not be reached) and the server's one-line message.

Adapter (celkeeper.kube): the one place that speaks HTTP to the API server.
"""

from __future__ import annotations

import gc
import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlencode

from celkeeper.errors import CelkeeperError
from celkeeper.kube.jsondeep import loads_deep
from celkeeper.kube.k8smodules import client_parts, incluster_config, kube_config
from celkeeper.kube.resources import Resource

log = logging.getLogger("celkeeper.kube")

LIST_PAGE = 500
CONNECT_TIMEOUT = 10.0
REQUEST_TIMEOUT = 30.0
POOL_SIZE = 128  # one connection per watch (one per constraint kind) plus requests
USER_AGENT = "celkeeper"
# a list of each object's metadata only (the server falls back to whole objects if it cannot)
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


class ApiError(CelkeeperError):
    """A request failed: `status` is the HTTP status, 0 when the server could not be reached."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}" if status else message)
        self.status = status
        self.reason = reason

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        """409: a stale resourceVersion (Conflict) or a name already taken (AlreadyExists)."""
        return self.status == 409

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def gone(self) -> bool:
        """410: the resourceVersion asked for is too old (compacted); relist."""
        return self.status == 410


def error_from_status(status: Mapping[str, Any], http_status: int = 0) -> ApiError:
    """An ApiError from a metav1.Status (a response body or a watch ERROR event)."""
    code = status.get("code")
    return ApiError(
        int(code) if isinstance(code, int) else http_status,
        str(status.get("reason") or "Failure"),
        str(status.get("message") or "(no message)"),
    )


@dataclass(frozen=True)
class Listed:
    items: list[dict[str, Any]]
    resource_version: str


@dataclass(frozen=True)
class Page:
    """One chunk of a paged list: `continue_token` is empty on the last one."""

    items: list[dict[str, Any]]
    continue_token: str
    resource_version: str


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: dict[str, Any] = field(default_factory=dict)


class WatchStream(Protocol):
    def __iter__(self) -> Iterator[WatchEvent]: ...

    def close(self) -> None:
        """Stop the stream; may be called from another thread (unblocks a pending read)."""

    def __enter__(self) -> WatchStream: ...

    def __exit__(self, *exc: object) -> None: ...


class Client(Protocol):
    """What celkeeper needs of the API. KubeClient is the real one."""

    @property
    def server(self) -> str: ...

    def list(self, resource: Resource) -> Listed: ...

    def list_page(self, resource: Resource, limit: int, continue_token: str = "") -> Page:
        """One chunk of at most `limit` objects (0: no limit), from `continue_token` (a 410 Gone when it
        has expired: ApiError.gone)."""

    def get_path(self, path: str) -> dict[str, Any]: ...

    def watch(self, resource: Resource, resource_version: str, timeout_seconds: int) -> WatchStream: ...

    def get(self, resource: Resource, name: str) -> dict[str, Any]: ...

    def create(self, resource: Resource, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def replace(
        self, resource: Resource, name: str, body: Mapping[str, Any], subresource: str = ""
    ) -> dict[str, Any]: ...

    def delete(self, resource: Resource, name: str, uid: str | None = None) -> None: ...


class _HttpWatch:
    """A watch response, read as newline-delimited JSON events."""

    def __init__(self, response: Any, what: str) -> None:
        self._response = response
        self._what = what
        self._closed = threading.Event()
        self._ended = False

    def __enter__(self) -> _HttpWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        # a stream still being read is shut down (that unblocks the reading thread); one that ended
        # has already given its connection back to the pool
        methods = ("release_conn",) if self._ended else ("shutdown", "release_conn")
        for method in methods:
            try:
                getattr(self._response, method)()
            except Exception as err:  # closing must not fail; the socket may be gone already
                log.debug("closing the watch of %s: %s: %s", self._what, method, err)

    def __iter__(self) -> Iterator[WatchEvent]:
        try:
            yield from self._events()
        finally:
            self._ended = True

    def _events(self) -> Iterator[WatchEvent]:
        import urllib3

        buffer = b""
        try:
            for chunk in self._response.stream(64 * 1024, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield _event(line, self._what)
            if buffer.strip() and not self._closed.is_set():
                yield _event(buffer, self._what)
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as err:
            if self._closed.is_set():
                return
            raise ApiError(0, "Unavailable", f"watch of {self._what} broken: {err}") from err


def _event(line: bytes, what: str) -> WatchEvent:
    try:
        doc = json.loads(line)
    except ValueError as err:
        raise ApiError(0, "BadResponse", f"watch of {what}: not a JSON event") from err
    if not isinstance(doc, dict) or not isinstance(doc.get("object"), dict):
        raise ApiError(0, "BadResponse", f"watch of {what}: malformed event")
    return WatchEvent(str(doc.get("type", "")), doc["object"])


class _CyclesUncollected:
    """Python's cycle collector paused while a list response is parsed (threads share one pause).

    A page of 500 Pods parses into some 10^5 dicts and lists; each 700 allocations start a
    collection, and the older generations, holding the page as it grows, are traversed again and
    again: two thirds of the CPU a page cost (py-spy, bench/audit.py's Pods). Parsed JSON holds no
    cycles, so nothing the collector could free is made meanwhile; the collector runs again as soon
    as the last parse ends (when it was running before the first began)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parsing = 0
        self._resume = False

    def __enter__(self) -> None:
        with self._lock:
            if self._parsing == 0:
                self._resume = gc.isenabled()
                gc.disable()
            self._parsing += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._parsing -= 1
            if self._parsing == 0 and self._resume:
                gc.enable()


_cycles_uncollected = _CyclesUncollected()


def _decode_list(data: bytes) -> Any:
    """orjson (fast) for list responses, with the cycle collector paused (_CyclesUncollected); the
    standard parser, allowed to go as deep as the API server does, for the rare response orjson
    refuses (nested deeper than 1024 levels)."""
    import orjson

    try:
        with _cycles_uncollected:
            return orjson.loads(data)
    except orjson.JSONDecodeError:
        return loads_deep(data)


class KubeClient:
    """The real API, through the `kubernetes` package's configuration and HTTP pool."""

    def __init__(self, configuration: Any, rest_client: Any, open_api_exception: type[Exception]) -> None:
        self._configuration = configuration
        self._rest = rest_client
        self._open_api_exception = open_api_exception

    @classmethod
    def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> KubeClient:
        """From a kubeconfig file, or from the pod's service account (in-cluster) when none is given.

        Raises ApiError(0, "Config", ...) with one line when the configuration cannot be used."""
        configuration_class, rest_client_class, open_api_exception, config_exception = client_parts()
        configuration = configuration_class()
        try:
            if kubeconfig:
                kube_config().load_kube_config(
                    config_file=kubeconfig, context=context, client_configuration=configuration
                )
            else:
                incluster_config().load_incluster_config(client_configuration=configuration)
        except (config_exception, OSError, ValueError, TypeError) as err:
            where = kubeconfig or "in-cluster service account"
            raise ApiError(0, "Config", f"cannot use the Kubernetes configuration ({where}): {err}") from err
        configuration.connection_pool_maxsize = POOL_SIZE
        configuration.retries = False
        return cls(configuration, rest_client_class(configuration), open_api_exception)

    @property
    def server(self) -> str:
        return str(self._configuration.host)

    def close(self) -> None:
        self._rest.close()

    # -- HTTP -------------------------------------------------------------------------------------------
    def _headers(self, accept: str) -> dict[str, str]:
        """The request's headers: the client's, and its credentials as the configuration gives them now
        (a bearer token, refreshed by the configuration's hook: the in-cluster service account's)."""
        headers = {"Accept": accept, "Content-Type": "application/json", "User-Agent": USER_AGENT}
        bearer = self._configuration.auth_settings().get("BearerToken")
        if bearer and bearer.get("value"):
            headers[str(bearer["key"])] = str(bearer["value"])
        return headers

    def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
        timeout: Any = REQUEST_TIMEOUT,
        *,
        accept: str = "application/json",
    ) -> Any:
        """The raw urllib3 response (body not read yet); ApiError(0) when the server is unreachable."""
        import urllib3

        try:
            url = str(self._configuration.host) + path
            if query:
                url += "?" + urlencode(query)
            return self._rest.request(
                method,
                url,
                headers=self._headers(accept),
                body=dict(body) if body is not None else None,
                _request_timeout=timeout,
            ).response
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise ApiError(0, "Unavailable", f"{method} {path}: {err}") from err
        except self._open_api_exception as err:  # TLS failures and credential trouble, as reported
            text = " ".join(str(err).split())
            raise ApiError(0, "Unavailable", f"{method} {path}: {text}") from err

    def _json(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
        decode: Callable[[bytes], Any] = json.loads,
        *,
        accept: str = "application/json",
    ) -> dict[str, Any]:
        import urllib3

        response = self._send(method, path, query, body, accept=accept)
        try:
            data = response.data
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise ApiError(0, "Unavailable", f"{method} {path}: {err}") from err
        finally:
            response.release_conn()
        try:
            doc = decode(data) if data else {}
        except ValueError:
            doc = None
        if not 200 <= response.status < 300:
            if isinstance(doc, dict) and doc.get("kind") == "Status":
                raise error_from_status(doc, response.status)
            text = data[:200].decode("utf-8", "replace").strip() if data else ""
            raise ApiError(response.status, str(response.reason or ""), f"{method} {path}: {text}")
        if not isinstance(doc, dict):
            raise ApiError(0, "BadResponse", f"{method} {path}: the answer is not a JSON object")
        return doc

    # -- the operations -----------------------------------------------------------------------------------
    def list(self, resource: Resource) -> Listed:
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            page = self.list_page(resource, LIST_PAGE, token)
            items.extend(page.items)
            if not page.continue_token:
                return Listed(items, page.resource_version)
            token = page.continue_token

    def list_page(self, resource: Resource, limit: int, continue_token: str = "") -> Page:
        query: dict[str, str] = {}
        if limit > 0:
            query["limit"] = str(limit)
        if continue_token:
            query["continue"] = continue_token
        if resource.label_selector:
            query["labelSelector"] = resource.label_selector
        if resource.field_selector:
            query["fieldSelector"] = resource.field_selector
        accept = METADATA_ONLY if resource.metadata_only else "application/json"
        doc = self._json("GET", resource.collection_path(), query, decode=_decode_list, accept=accept)
        items: list[dict[str, Any]] = []
        for item in doc.get("items") or ():
            if isinstance(item, dict):
                # list items carry no apiVersion/kind; put them back so items look like watched objects
                item.setdefault("apiVersion", resource.api_version)
                item.setdefault("kind", resource.kind)
                items.append(item)
        metadata = doc.get("metadata") or {}
        return Page(
            items,
            str(metadata.get("continue") or ""),
            str(metadata.get("resourceVersion") or ""),
        )

    def get_path(self, path: str) -> dict[str, Any]:
        return self._json("GET", path)

    def watch(self, resource: Resource, resource_version: str, timeout_seconds: int) -> WatchStream:
        query = {
            "watch": "1",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        if resource_version:
            query["resourceVersion"] = resource_version
        if resource.label_selector:
            query["labelSelector"] = resource.label_selector
        if resource.field_selector:
            query["fieldSelector"] = resource.field_selector
        import urllib3

        timeout = urllib3.Timeout(connect=CONNECT_TIMEOUT, read=timeout_seconds + 30)
        response = self._send("GET", resource.collection_path(), query, timeout=timeout)
        if not 200 <= response.status < 300:
            try:
                data = response.data
            finally:
                response.release_conn()
            try:
                doc = json.loads(data)
            except ValueError:
                doc = None
            if isinstance(doc, dict) and doc.get("kind") == "Status":
                raise error_from_status(doc, response.status)
            raise ApiError(response.status, str(response.reason or ""), f"watch of {resource} refused")
        return _HttpWatch(response, str(resource))

    def get(self, resource: Resource, name: str) -> dict[str, Any]:
        return self._json("GET", resource.object_path(name))

    def create(self, resource: Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._json("POST", resource.collection_path(), body=body)

    def replace(
        self, resource: Resource, name: str, body: Mapping[str, Any], subresource: str = ""
    ) -> dict[str, Any]:
        return self._json("PUT", resource.object_path(name, subresource), body=body)

    def delete(self, resource: Resource, name: str, uid: str | None = None) -> None:
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
        }
        if uid:
            body["preconditions"] = {"uid": uid}
        self._json("DELETE", resource.object_path(name), body=body)
