"""The watch manager's routing and the reflector's list/watch loop, against fakes of celkeeper's own API
adapter (tests.incluster.fakes): union of intents, routing to those who asked, replay, intents changed
from a handler, relists turned into exactly the events that explain them; resourceVersion tracking,
bookmarks, 410 Gone, 404 and reconnects."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from celkeeper.kube import SYNCED, ApiError, Event, Reflector, Resource, Timing, WatchEvent, WatchManager
from tests.incluster.fakes import FakeClient, obj

R1 = Resource("example.io", "v1", "ones", "One")
R2 = Resource("example.io", "v1", "twos", "Two")
R3 = Resource("example.io", "v1", "threes", "Three")
FAST = Timing(min_backoff=0.01, max_backoff=0.05, missing_retry=5.0, watch_timeout=(1, 1))


class ManualReflector:
    """Stands in for a Reflector: the test delivers its lists and events by hand."""

    made: list[ManualReflector] = []

    def __init__(self, client: Any, resource: Resource, sink: Any, timing: Any) -> None:
        self.resource, self.sink = resource, sink
        self.started = self._stopped = False
        self.kicks = 0
        ManualReflector.made.append(self)

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self._stopped = True

    @property
    def stopped(self) -> bool:
        return self._stopped

    def kick(self) -> None:
        self.kicks += 1


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def __call__(self, event: Event) -> None:
        name = str((event.object.get("metadata") or {}).get("name", ""))
        self.events.append((event.type, event.resource.plural, name))


@pytest.fixture
def manager() -> WatchManager:
    ManualReflector.made = []
    return WatchManager(FakeClient(), reflector_factory=ManualReflector)  # type: ignore[arg-type]


def reflector(manager: WatchManager, resource: Resource) -> Any:
    found = manager.reflector(resource)
    assert found is not None
    return found


def test_the_union_is_watched_once_and_events_go_to_those_who_asked(manager: WatchManager) -> None:
    a, b = Recorder(), Recorder()
    manager.register("a", a, {R1})
    manager.register("b", b, {R1, R2})
    manager.start()
    assert manager.watched() == {R1, R2}
    assert len(ManualReflector.made) == 2 and all(r.started for r in ManualReflector.made)
    reflector(manager, R1).sink.replaced(reflector(manager, R1), [obj("One", "x", "1")], False)
    reflector(manager, R2).sink.event(reflector(manager, R2), "ADDED", obj("Two", "y", "2"))
    assert a.events == [("ADDED", "ones", "x"), (SYNCED, "ones", "")]
    assert b.events == [("ADDED", "ones", "x"), (SYNCED, "ones", ""), ("ADDED", "twos", "y")]


def test_a_registrar_that_joins_later_is_replayed_the_store_without_a_second_watch(
    manager: WatchManager,
) -> None:
    manager.register("a", Recorder(), {R1})
    manager.start()
    first = reflector(manager, R1)
    first.sink.replaced(first, [obj("One", "x", "1"), obj("One", "y", "1")], False)
    late = Recorder()
    manager.register("late", late, {R1})
    assert sorted(late.events) == [("ADDED", "ones", "x"), ("ADDED", "ones", "y")]
    assert reflector(manager, R1) is first and len(ManualReflector.made) == 1


def test_a_handler_can_start_and_stop_watches_and_stopped_watches_say_nothing(manager: WatchManager) -> None:
    seen = Recorder()

    def templates(event: Event) -> None:  # like the policies registrar: one kind per object of R1
        seen(event)
        wanted = {R1} | ({R3} if manager.objects(R1) else set())
        manager.set_intent("kinds", wanted)

    manager.register("kinds", templates, {R1})
    manager.start()
    r1 = reflector(manager, R1)
    r1.sink.event(r1, "ADDED", obj("One", "t", "1"))
    assert manager.watched() == {R1, R3}
    r3 = reflector(manager, R3)
    r3.sink.replaced(r3, [obj("Three", "c", "5")], False)
    assert manager.objects(R3) and manager.synced(R3)
    r1.sink.event(r1, "DELETED", obj("One", "t", "2"))
    assert manager.watched() == {R1}
    assert r3.stopped and manager.objects(R3) == [] and not manager.synced(R3)
    before = list(seen.events)
    r3.sink.event(r3, "ADDED", obj("Three", "late", "6"))  # in flight when it was stopped
    assert seen.events == before


def test_a_relist_becomes_exactly_the_events_that_explain_it(manager: WatchManager) -> None:
    seen = Recorder()
    manager.register("a", seen, {R1})
    manager.start()
    r1 = reflector(manager, R1)
    r1.sink.replaced(r1, [obj("One", "a", "1"), obj("One", "b", "1"), obj("One", "same", "1")], False)
    seen.events.clear()
    # the watch expired; meanwhile `a` was deleted, `b` changed and `c` created
    r1.sink.replaced(r1, [obj("One", "b", "7"), obj("One", "c", "8"), obj("One", "same", "1")], False)
    assert sorted(seen.events) == sorted(
        [("DELETED", "ones", "a"), ("MODIFIED", "ones", "b"), ("ADDED", "ones", "c"), (SYNCED, "ones", "")]
    )
    assert sorted(str(o["metadata"]["name"]) for o in manager.objects(R1)) == ["b", "c", "same"]
    seen.events.clear()
    r1.sink.event(r1, "MODIFIED", obj("One", "c", "8"))  # seen already (same resourceVersion)
    r1.sink.event(r1, "DELETED", obj("One", "a", "9"))  # unknown: nothing to say
    assert seen.events == []


# --- the reflector ----------------------------------------------------------------------------------------


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


def test_constraint_kinds_follow_template_events() -> None:
    from celkeeper.incluster import constraints
    from celkeeper.incluster.resources import ConstraintKinds
    from tests.incluster.support import required_labels_template

    kinds = ConstraintKinds()
    a, b = required_labels_template("KindA"), required_labels_template("KindB")
    assert kinds.update(SYNCED, {}, lambda: [a])
    assert kinds.resources() == {constraints("KindA")}
    assert kinds.update("ADDED", b, list)
    assert not kinds.update("MODIFIED", b, list)  # same kind: nothing to start or stop
    misnamed = required_labels_template("KindB")
    misnamed["metadata"]["name"] = "not-kindb"
    assert not kinds.update("ADDED", misnamed, list)  # defines no kind
    assert kinds.update("DELETED", a, list)
    assert kinds.resources() == {constraints("KindB")}
