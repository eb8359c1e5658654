"""One list-then-watch loop for one Resource, in its own thread, that survives the real world.

    reflector = Reflector(client, resource, sink); reflector.start(); ...; reflector.stop()

- It lists (in pages), hands the complete content to `sink.replaced(...)`, then watches from the
  list's resourceVersion with bookmarks allowed; every event and bookmark moves the resourceVersion on.
- A watch that ends (the server's timeout, a dropped connection) is resumed from the last
  resourceVersion: nothing is missed and nothing is seen twice.
- 410 Gone (the resourceVersion was compacted away, e.g. after an API server restart) relists: the sink
  gets the complete new content and works out what changed while the watch was down.
- 404 (the collection does not exist: a constraint CRD not created yet, or deleted) is an empty,
  complete listing; the reflector lists again soon, then every `missing_retry` seconds (or at once
  when kicked, e.g. when the CRD becomes established).
- Any other failure is retried with exponential back-off (with jitter), resuming where it was.

Adapter (celkeeper.kube): client-go's Reflector, for any Resource.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from celkeeper.kube.backoff import doubling
from celkeeper.kube.client import ApiError, Client, WatchStream, error_from_status
from celkeeper.kube.resources import Resource

log = logging.getLogger("celkeeper.kube")


@dataclass(frozen=True)
class Timing:
    min_backoff: float = 0.2
    max_backoff: float = 30.0
    missing_retry: float = 5.0  # a collection that does not exist is looked at again after at most this
    watch_timeout: tuple[int, int] = (300, 600)  # the server ends each watch after a random time in this


class ReflectorSink(Protocol):
    def replaced(self, reflector: Reflector, items: list[dict[str, Any]], missing: bool) -> None:
        """The complete content of the collection (after a list); `missing`: it does not exist."""

    def event(self, reflector: Reflector, type_: str, obj: dict[str, Any]) -> None:
        """One ADDED, MODIFIED or DELETED event."""


class Reflector:
    def __init__(
        self,
        client: Client,
        resource: Resource,
        sink: ReflectorSink,
        timing: Timing | None = None,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.client = client
        self.resource = resource
        self.sink = sink
        self.timing = timing or Timing()
        self._rng = rng
        self._stop = threading.Event()
        self._kick = threading.Event()
        self._lock = threading.Lock()
        self._stream: WatchStream | None = None
        self._thread: threading.Thread | None = None
        self.resource_version = ""
        # when the API server last told this watch anything (a list, an event, a bookmark: the
        # server sends one about every minute), Unix time; 0 before the first list
        self.last_contact = 0.0
        self.last_error = ""  # why the last attempt failed ("" once it succeeds again)
        self.last_status = 0  # its HTTP status (403: forbidden; 0: none, or not an HTTP failure)
        self.lists = 0  # how many times it listed (1 + relists), for logs and tests
        self.relists_after_gone = 0
        self.reconnects = 0

    # -- control ------------------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"watch {self.resource}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop soon: no event is delivered after this returns (the sink may still see one in flight,
        which it tells apart by asking whether this reflector is still current)."""
        self._stop.set()
        self._kick.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.close()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def kick(self) -> None:
        """Cut a back-off short (e.g. a constraint CRD just became established)."""
        self._kick.set()

    def _sleep(self, seconds: float) -> None:
        self._kick.wait(seconds)
        self._kick.clear()

    def _backoff(self, attempt: int) -> float:
        base = doubling(self.timing.min_backoff, self.timing.max_backoff, attempt)
        return base * (0.5 + self._rng() / 2)

    # -- the loop -----------------------------------------------------------------------------------------
    def _run(self) -> None:
        failures = 0
        missing = 0
        while not self._stop.is_set():
            try:
                if not self.resource_version:
                    self._list()
                    if self._stop.is_set():
                        return
                    if not self.resource_version:  # missing: look again soon, then less often
                        self._sleep(min(self.timing.missing_retry, self._backoff(missing)))
                        missing += 1
                        continue
                    missing = 0
                delivered = self._watch()
                failures = 0 if delivered else failures
                if delivered:
                    self.last_error, self.last_status = "", 0
                if not delivered:
                    self._sleep(self._backoff(0))  # an empty watch that ended at once: do not spin
            except ApiError as err:
                if self._stop.is_set():
                    return
                if err.gone:
                    log.info("watch of %s expired (410 Gone: %s); relisting", self.resource, err.message)
                    self.resource_version = ""
                    self.relists_after_gone += 1
                    continue
                if err.not_found:
                    self.resource_version = ""  # the collection went away: list again (empty) and wait
                    continue
                failures += 1
                self.last_error, self.last_status = str(err), err.status
                delay = self._backoff(failures)
                level = logging.INFO if failures == 1 else logging.WARNING
                log.log(level, "watch of %s failed (%s); retrying in %.1fs", self.resource, err, delay)
                self._sleep(delay)
                self.reconnects += 1
            except Exception:  # a bug in a sink must not end the watch for good
                failures += 1
                log.exception("watch of %s: unexpected failure", self.resource)
                self._sleep(self._backoff(failures))

    def _list(self) -> None:
        try:
            listed = self.client.list(self.resource)
        except ApiError as err:
            if not err.not_found:
                raise
            self.lists += 1
            self.sink.replaced(self, [], True)
            return
        self.lists += 1
        if self._stop.is_set():
            return
        self.last_contact = time.time()
        self.last_error, self.last_status = "", 0
        self.sink.replaced(self, listed.items, False)
        self.resource_version = listed.resource_version
        log.debug(
            "listed %s: %d object(s) at resourceVersion %s",
            self.resource,
            len(listed.items),
            listed.resource_version,
        )

    def _watch(self) -> bool:
        """Watch from the current resourceVersion until the stream ends. True when anything arrived."""
        low, high = self.timing.watch_timeout
        timeout = int(low + (high - low) * self._rng())
        stream = self.client.watch(self.resource, self.resource_version, timeout)
        with self._lock:
            if self._stop.is_set():
                stream.close()
                return False
            self._stream = stream
        delivered = False
        try:
            for event in stream:
                if self._stop.is_set():
                    return delivered
                delivered = True
                self.last_contact = time.time()
                if event.type == "ERROR":
                    raise error_from_status(event.object)
                version = str((event.object.get("metadata") or {}).get("resourceVersion") or "")
                if event.type == "BOOKMARK":
                    if version:
                        self.resource_version = version
                    continue
                if event.type not in ("ADDED", "MODIFIED", "DELETED"):
                    continue
                self.sink.event(self, event.type, event.object)
                if version:
                    self.resource_version = version
        finally:
            with self._lock:
                self._stream = None
            stream.close()
        return delivered
