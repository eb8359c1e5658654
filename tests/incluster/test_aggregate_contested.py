"""A status another writer keeps undoing (incluster/aggregate.py): after CONTESTED_AFTER writes of the same
status in a row it is written again only after a back-off that doubles, with one warning per contest (a
change on our side restarts the back-off, not the warning); the echo of our own write does not end the
contest, a change on our side or an agreement that lasts does. The client is
a stand-in at celkeeper's own API boundary (kube.client.Client); the real API server's test is
test_aggregate_two_installs.py."""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any, cast

import pytest

from celkeeper.incluster.aggregate import (
    CONTESTED_AFTER,
    CONTESTED_FIRST,
    CONTESTED_MAX,
    QUIET,
    StatusAggregator,
)
from celkeeper.kube.manager import WatchManager
from celkeeper.kube.resources import Resource

THINGS = Resource("example.io", "v1", "things", "Thing")


class OneObject:
    """Holds one object; `replace` stores the body (a new resourceVersion), as the status subresource does."""

    def __init__(self, status: dict[str, Any]) -> None:
        self.stored: dict[str, Any] = {"kind": "Thing", "metadata": {"name": "t", "resourceVersion": "1"}}
        self.stored["status"] = status
        self.writes = 0

    def get(self, resource: Resource, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.stored)

    def replace(
        self, resource: Resource, name: str, body: Mapping[str, Any], subresource: str | None = None
    ) -> dict[str, Any]:
        self.writes += 1
        self.stored = copy.deepcopy(dict(body))
        self.stored["metadata"]["resourceVersion"] = str(int(self.stored["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(self.stored)

    def undo(self, status: dict[str, Any]) -> dict[str, Any]:
        """The other writer's write: its status stored; what our watch then shows."""
        self.stored["status"] = copy.deepcopy(status)
        return copy.deepcopy(self.stored)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


OURS = {"byPod": [{"id": "pod-one"}]}
THEIRS = {"byPod": [{"id": "pod-two"}]}


def _aggregator(client: OneObject, clock: Clock) -> StatusAggregator:
    manager = cast(WatchManager, None)  # _apply reads no watch
    return StatusAggregator(cast(Any, client), manager, "ns", 1, clock=clock)


def _apply(agg: StatusAggregator, obj: Mapping[str, Any], ours: dict[str, Any] = OURS) -> None:
    failed: list[str] = []
    agg._apply(THINGS, obj, lambda _: copy.deepcopy(ours), failed)
    assert failed == []


def test_a_status_undone_each_time_is_written_again_only_after_a_doubling_back_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client, clock = OneObject(THEIRS), Clock()
    agg = _aggregator(client, clock)
    caplog.set_level(logging.WARNING, logger="celkeeper.incluster")
    for n in range(1, CONTESTED_AFTER + 1):  # each write undone at once
        _apply(agg, client.undo(THEIRS))
        assert client.writes == n
        _apply(agg, client.get(THINGS, "t"))  # ... after the echo of ours, which changes nothing
    assert client.writes == CONTESTED_AFTER
    assert agg.wake_in() == pytest.approx(CONTESTED_FIRST)
    _apply(agg, client.undo(THEIRS))  # undone again: not written during the back-off
    assert client.writes == CONTESTED_AFTER
    clock.now += CONTESTED_FIRST
    _apply(agg, client.undo(THEIRS))
    assert client.writes == CONTESTED_AFTER + 1
    assert agg.wake_in() == pytest.approx(2 * CONTESTED_FIRST)  # doubled
    clock.now += CONTESTED_FIRST
    _apply(agg, client.undo(THEIRS))
    assert client.writes == CONTESTED_AFTER + 1
    warnings = [r for r in caplog.records if "rewritten by another writer" in r.getMessage()]
    assert len(warnings) == 1 and "Thing t" in warnings[0].getMessage()


def test_a_change_on_our_side_or_a_lasting_agreement_ends_the_contest() -> None:
    client, clock = OneObject(THEIRS), Clock()
    agg = _aggregator(client, clock)
    for _ in range(CONTESTED_AFTER):
        _apply(agg, client.undo(THEIRS))
    assert agg.wake_in() is not None
    # ours changes (a pod's status did): written at once
    _apply(agg, client.undo(THEIRS), {"byPod": [{"id": "pod-one"}, {"id": "pod-three"}]})
    assert client.writes == CONTESTED_AFTER + 1
    assert agg.wake_in() is None
    # a contest again, then the other writer gone: ours stays stored past QUIET, and the contest ends
    for _ in range(CONTESTED_AFTER):
        _apply(agg, client.undo(THEIRS))
    written = client.writes
    clock.now += CONTESTED_FIRST
    _apply(agg, client.undo(THEIRS))
    assert client.writes == written + 1
    clock.now += QUIET
    _apply(agg, client.get(THINGS, "t"))  # ours, stored for QUIET seconds
    assert agg.wake_in() is None
    _apply(agg, client.undo(THEIRS))  # a later change by someone else is answered at once
    assert client.writes == written + 2


def test_a_contest_is_logged_once_until_an_agreement_lasts(caplog: pytest.LogCaptureFixture) -> None:
    client, clock = OneObject(THEIRS), Clock()
    agg = _aggregator(client, clock)
    caplog.set_level(logging.WARNING, logger="celkeeper.incluster")

    def warnings() -> int:
        return sum(1 for r in caplog.records if "rewritten by another writer" in r.getMessage())

    for _ in range(CONTESTED_AFTER):
        _apply(agg, client.undo(THEIRS))
    assert warnings() == 1
    # ours changes while the other writer goes on undoing it: a new count, the same contest
    changed = {"byPod": [{"id": "pod-one"}, {"id": "pod-three"}]}
    for _ in range(CONTESTED_AFTER):
        _apply(agg, client.undo(THEIRS), changed)
    assert agg.wake_in() is not None
    assert warnings() == 1
    # the other writer stops; ours stays stored past QUIET: the contest is over
    clock.now += CONTESTED_FIRST
    _apply(agg, client.undo(THEIRS), changed)
    clock.now += QUIET
    _apply(agg, client.get(THINGS, "t"), changed)
    assert agg.wake_in() is None
    # a new contest later is logged again
    for _ in range(CONTESTED_AFTER):
        _apply(agg, client.undo(THEIRS), changed)
    assert warnings() == 2


def test_a_contest_of_days_waits_the_longest_back_off_between_writes() -> None:
    client, clock = OneObject(THEIRS), Clock()
    agg = _aggregator(client, clock)
    for _ in range(2000):  # ~a week of a migration with Gatekeeper beside celkeeper
        _apply(agg, client.undo(THEIRS))
        clock.now += CONTESTED_MAX
    assert client.writes == 2000
    _apply(agg, client.undo(THEIRS))
    assert agg.wake_in() == pytest.approx(CONTESTED_MAX)
