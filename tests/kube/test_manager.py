"""The watch manager's routing, against a fake of the adapter's Client (tests.kube.fakes) and reflectors
driven by hand: union of intents, routing to those who asked, replay, intents changed from a handler,
relists turned into exactly the events that explain them."""

from __future__ import annotations

from typing import Any

import pytest

from celkeeper.kube import SYNCED, Event, Resource, WatchManager
from tests.kube.fakes import FakeClient, obj

R1 = Resource("example.io", "v1", "ones", "One")
R2 = Resource("example.io", "v1", "twos", "Two")
R3 = Resource("example.io", "v1", "threes", "Three")


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
