"""A list response is parsed with Python's cycle collector paused (it costs most of a page's CPU
otherwise), and the collector is as it was once the last parse ends."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import orjson
import pytest

from celkeeper.kube.client import _cycles_uncollected, _decode_list

PAGE = orjson.dumps({"items": [{"metadata": {"name": f"p{i}", "labels": {"a": "b"}}} for i in range(3000)]})


@pytest.fixture(autouse=True)
def collector() -> Iterator[None]:
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_the_collector_is_paused_during_a_parse_and_runs_again_after() -> None:
    gc.enable()
    seen: list[bool] = []
    gc.callbacks.append(lambda phase, info: seen.append(True))
    try:
        doc = _decode_list(PAGE)
    finally:
        gc.callbacks.pop()
    assert len(doc["items"]) == 3000 and doc["items"][-1]["metadata"]["name"] == "p2999"
    assert not seen  # 3000 items are ~9000 containers: several collections, were it running
    assert gc.isenabled()


def test_a_collector_paused_by_someone_else_stays_paused() -> None:
    gc.disable()
    _decode_list(PAGE)
    assert not gc.isenabled()


def test_parses_on_several_threads_resume_the_collector_when_the_last_ends() -> None:
    gc.enable()
    inside = threading.Event()
    release = threading.Event()

    def slow_parse() -> None:
        with _cycles_uncollected:
            inside.set()
            release.wait(10)

    other = threading.Thread(target=slow_parse)
    other.start()
    assert inside.wait(10)
    _decode_list(PAGE)  # begins and ends while the other thread parses
    assert not gc.isenabled()
    release.set()
    other.join()
    assert gc.isenabled()


def test_a_document_orjson_refuses_still_parses_and_leaves_the_collector_running() -> None:
    gc.enable()
    deep = b'{"items": [' + b"[" * 2000 + b"]" * 2000 + b"]}"
    assert _decode_list(deep)["items"]  # orjson refuses 2000 levels: the standard parser's result
    assert gc.isenabled()
