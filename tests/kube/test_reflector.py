"""The reflector's list/watch loop, against a fake of the adapter's Client (tests.kube.fakes):
resourceVersion tracking, bookmarks, 410 Gone, 404 and reconnects."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from celkeeper.kube import ApiError, Reflector, Resource, Timing, WatchEvent
from tests.kube.fakes import FakeClient, obj

R1 = Resource("example.io", "v1", "ones", "One")
FAST = Timing(min_backoff=0.01, max_backoff=0.05, missing_retry=5.0, watch_timeout=(1, 1))


class Sink:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.cond = threading.Condition()

    def replaced(self, reflector: Reflector, items: list[dict[str, Any]], missing: bool) -> None:
        with self.cond:
            self.calls.append(("replaced", (sorted(i["metadata"]["name"] for i in items), missing)))
            self.cond.notify_all()

    def event(self, reflector: Reflector, type_: str, o: dict[str, Any]) -> None:
        with self.cond:
            self.calls.append((type_, o["metadata"]["name"]))
            self.cond.notify_all()

    def wait(self, predicate: Callable[[list[tuple[str, Any]]], bool], timeout: float = 5.0) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: predicate(self.calls), timeout), self.calls


@pytest.fixture
def client() -> FakeClient:
    return FakeClient()


def start(client: FakeClient, sink: Sink, timing: Timing = FAST) -> Reflector:
    found = Reflector(client, R1, sink, timing)  # type: ignore[arg-type]
    found.start()
    return found


def test_it_lists_then_watches_from_the_list_and_follows_events_and_bookmarks(client: FakeClient) -> None:
    client.put(R1, obj("One", "a", "3"), version="10")
    sink = Sink()
    r = start(client, sink)
    try:
        stream = client.stream(R1)
        assert stream.resource_version == "10"
        stream.push(WatchEvent("ADDED", obj("One", "b", "11")))
        stream.push(WatchEvent("BOOKMARK", {"kind": "One", "metadata": {"resourceVersion": "15"}}))
        stream.end()  # the server's timeout: resume from the bookmark, no relist
        resumed = client.stream(R1, after=stream)
        assert resumed.resource_version == "15"
        assert sink.calls == [("replaced", (["a"], False)), ("ADDED", "b")]
        assert client.lists == [R1]
    finally:
        r.stop()


def test_410_gone_relists_and_a_broken_connection_resumes(client: FakeClient) -> None:
    client.put(R1, obj("One", "a", "3"), version="10")
    sink = Sink()
    r = start(client, sink)
    try:
        stream = client.stream(R1)
        stream.push(WatchEvent("MODIFIED", obj("One", "a", "12")))
        stream.fail(ApiError(0, "Unavailable", "connection reset"))
        resumed = client.stream(R1, after=stream)
        assert resumed.resource_version == "12" and client.lists == [R1]  # resumed, not relisted
        client.put(R1, obj("One", "c", "20"), version="21")
        resumed.push(
            WatchEvent(
                "ERROR",
                {
                    "kind": "Status",
                    "code": 410,
                    "reason": "Expired",
                    "message": "too old resource version: 12 (20)",
                },
            )
        )
        sink.wait(lambda calls: len(calls) >= 3)
        relisted = client.stream(R1, after=resumed)
        assert relisted.resource_version == "21"
        assert client.lists == [R1, R1]
        assert sink.calls[-1] == ("replaced", (["a", "c"], False))
        assert r.relists_after_gone == 1
    finally:
        r.stop()


def test_a_missing_collection_is_empty_and_listed_again_soon(client: FakeClient) -> None:
    sink = Sink()
    r = start(client, sink)
    try:
        sink.wait(lambda calls: calls[:1] == [("replaced", ([], True))])
        client.put(R1, obj("One", "late", "2"), version="3")
        sink.wait(lambda calls: calls[-1] == ("replaced", (["late"], False)))
        assert client.stream(R1).resource_version == "3"
    finally:
        r.stop()


def test_a_missing_collection_is_listed_again_at_once_when_kicked(client: FakeClient) -> None:
    sink = Sink()
    r = start(client, sink, Timing(min_backoff=30.0, max_backoff=60.0, missing_retry=60.0))
    try:
        sink.wait(lambda calls: calls == [("replaced", ([], True))])
        client.put(R1, obj("One", "late", "2"), version="3")
        time.sleep(0.1)
        assert client.lists == [R1]  # waits rather than polling
        r.kick()
        sink.wait(lambda calls: calls[-1] == ("replaced", (["late"], False)))
        assert client.stream(R1).resource_version == "3"
    finally:
        r.stop()


def test_stop_ends_a_blocked_watch(client: FakeClient) -> None:
    client.put(R1, version="1")
    r = start(client, Sink())
    stream = client.stream(R1)
    r.stop()
    r.join(2.0)
    assert stream.closed.is_set()
    assert r._thread is not None and not r._thread.is_alive()
