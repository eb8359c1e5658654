"""Paged lists (celkeeper.kube.paging) on a fake of our own Client: chunks in key order, a list that restarts
after an expired continue token without delivering an object twice, and errors that are not retried."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from celkeeper.kube import ApiError, Page, Resource, pages
from tests.kube.fakes import FakeClient

PODS = Resource("", "v1", "pods", "Pod")


GONE = ApiError(410, "Expired", "The provided continue parameter is too old")


def pod(namespace: str, name: str, version: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": namespace, "name": name, "resourceVersion": version},
    }


def names(found: list[Any]) -> list[str]:
    return [f"{o['metadata']['namespace']}/{o['metadata']['name']}" for page in found for o in page.items]


def test_pages_are_chunks_in_key_order() -> None:
    fake = FakeClient()
    fake.put(PODS, *[pod("a", f"p{i}") for i in range(7)])
    found = list(pages(fake, PODS, 3))
    assert [len(p.items) for p in found] == [3, 3, 1]
    assert names(found) == [f"a/p{i}" for i in range(7)]


def test_an_expired_continue_token_restarts_without_delivering_an_object_twice() -> None:
    fake = FakeClient()
    fake.put(PODS, *[pod("a", f"p{i}") for i in range(6)])
    fake.expire[PODS] = [GONE]
    restarts: list[ApiError] = []
    found = []
    for page in pages(fake, PODS, 2, on_restart=restarts.append):
        found.append(page)
        if len(found) == 1:  # meanwhile: one object before the point reached goes, one after comes
            del fake.collections[PODS]["a/p0"]
            fake.put(PODS, pod("a", "p9"))
    assert restarts == [GONE]
    assert names(found) == ["a/p0", "a/p1", "a/p2", "a/p3", "a/p4", "a/p5", "a/p9"]
    assert [token for _, token in fake.pages] == ["", "a/p1", "", "a/p2", "a/p4"]


def test_a_list_that_keeps_expiring_gives_up_with_the_error() -> None:
    fake = FakeClient()
    fake.put(PODS, *[pod("a", f"p{i}") for i in range(6)])
    fake.expire[PODS] = [GONE] * 10
    with pytest.raises(ApiError) as raised:
        list(pages(fake, PODS, 2, max_restarts=2))
    assert raised.value.gone


def test_other_errors_are_not_retried() -> None:
    with pytest.raises(ApiError) as raised:
        list(pages(FakeClient(), PODS, 2))
    assert raised.value.not_found


class _Items(list[Any]):
    """A page's items that a weak reference can follow."""


class _Watched(FakeClient):
    """Records, as each page is asked for, which pages given before are still alive."""

    def __init__(self) -> None:
        super().__init__()
        self.given: list[weakref.ref[_Items]] = []
        self.alive_when_asked: list[list[bool]] = []

    def list_page(self, resource: Resource, limit: int, continue_token: str = "") -> Page:
        gc.collect()
        self.alive_when_asked.append([ref() is not None for ref in self.given])
        page = super().list_page(resource, limit, continue_token)
        items = _Items(page.items)
        self.given.append(weakref.ref(items))
        return Page(items, page.continue_token, page.resource_version)


def test_no_page_is_held_while_the_next_is_read_by_a_consumer_that_drops_it() -> None:
    fake = _Watched()
    fake.put(PODS, *[pod("a", f"p{i}") for i in range(5)])
    seen = 0
    for page in pages(fake, PODS, 2):
        seen += len(page.items)
        del page
    assert seen == 5
    assert fake.alive_when_asked == [[], [False], [False, False]]
