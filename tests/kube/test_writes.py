"""Leaderless writes (celkeeper.kube.writes) against a fake API that answers races as the real one does:
409 for a name already taken, a stale resourceVersion or a uid precondition that no longer holds."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from celkeeper.kube import (
    ApiError,
    Resource,
    delete_if_present,
    up_to_date,
    with_resource_version,
    write_desired,
)
from tests.kube.fakes import FakeClient

THINGS = Resource("example.io", "v1", "things", "Thing")


class RacingClient(FakeClient):
    """Optimistic concurrency as the API server does it; `before_write` runs just before each write
    (another pod writing first)."""

    def __init__(self) -> None:
        super().__init__()
        self.version = 10
        self.before_write: Callable[[], None] = lambda: None

    def store(self, body: Mapping[str, Any]) -> None:
        self.version += 1
        stored = copy.deepcopy(dict(body))
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.collections.setdefault(THINGS, {})[stored["metadata"]["name"]] = stored

    def create(self, resource: Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        self.before_write()
        if body["metadata"]["name"] in self.collections.get(resource, {}):
            raise ApiError(409, "AlreadyExists", "already exists")
        self.store(body)
        return super().create(resource, self.get(resource, body["metadata"]["name"]))

    def replace(
        self, resource: Resource, name: str, body: Mapping[str, Any], subresource: str = ""
    ) -> dict[str, Any]:
        self.before_write()
        current = self.get(resource, name)
        if current["metadata"]["resourceVersion"] != body["metadata"].get("resourceVersion"):
            raise ApiError(409, "Conflict", "the object has been modified")
        self.store(body)
        return super().replace(resource, name, self.get(resource, name), subresource)

    def delete(self, resource: Resource, name: str, uid: str | None = None) -> None:
        current = self.collections.get(resource, {}).get(name)
        if current is not None and uid is not None and current["metadata"]["uid"] != uid:
            raise ApiError(409, "Conflict", "Precondition failed: UID in precondition")
        super().delete(resource, name, uid)


def thing(value: str) -> dict[str, Any]:
    return {
        "apiVersion": "example.io/v1",
        "kind": "Thing",
        "metadata": {"name": "a", "uid": "u-1"},
        "spec": {"value": value},
    }


def write(client: RacingClient, desired: dict[str, Any], stored: Mapping[str, Any] | None) -> str | None:
    return write_desired(
        client, THINGS, desired, stored, current=up_to_date, update_body=with_resource_version
    )


def test_creates_and_updates_and_says_which() -> None:
    client = RacingClient()
    assert write(client, thing("x"), None) == "created"
    assert write(client, thing("y"), client.get(THINGS, "a")) == "updated"
    assert client.get(THINGS, "a")["spec"] == {"value": "y"}
    assert [w[0] for w in client.writes] == ["create", "replace"]


def test_a_create_that_finds_the_same_object_written_by_another_pod_stops() -> None:
    client = RacingClient()
    client.before_write = lambda: client.store(thing("x"))
    assert write(client, thing("x"), None) is None
    assert client.writes == []


def test_a_stale_copy_is_read_again_and_written_over_when_it_still_differs() -> None:
    client = RacingClient()
    client.store(thing("old"))
    stale = client.get(THINGS, "a")
    client.store(thing("other"))  # another pod's write: `stale` has an old resourceVersion now
    assert write(client, thing("new"), stale) == "updated"
    assert client.get(THINGS, "a")["spec"] == {"value": "new"}
    assert [w[0] for w in client.writes] == ["replace"]


def test_an_object_that_keeps_changing_is_a_conflict_after_a_few_attempts() -> None:
    client = RacingClient()
    client.store(thing("old"))
    stored = client.get(THINGS, "a")
    client.before_write = lambda: client.store(thing("someone else's"))
    with pytest.raises(ApiError) as raised:
        write(client, thing("new"), stored)
    assert raised.value.status == 409 and "Thing a kept changing" in str(raised.value)
    assert client.writes == []


def test_delete_if_present_tolerates_gone_and_replaced_objects() -> None:
    client = RacingClient()
    assert delete_if_present(client, THINGS, "a", "u-1") is False  # not there
    client.store(thing("x"))
    assert delete_if_present(client, THINGS, "a", "u-other") is False  # a new incarnation
    assert client.get(THINGS, "a")["spec"] == {"value": "x"}
    assert delete_if_present(client, THINGS, "a", "u-1") is True
    with pytest.raises(ApiError):
        client.get(THINGS, "a")
