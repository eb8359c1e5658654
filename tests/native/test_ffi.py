"""The library's own figures (native_info): the handles it holds are counted until released, beside its
Go runtime's memory."""

from __future__ import annotations

from celkeeper.native.ffi import load
from tests.support.native import require_celgo

EXPRESSION = b'{"source": "object.metadata.name == \\"x\\"", "variables": []}'


def test_info_counts_the_handles_the_library_holds_until_released() -> None:
    require_celgo()
    library = load()
    before = library.info()["handles"]
    handle, answer = library.expression(EXPRESSION)
    assert handle > 0, answer
    assert library.info()["handles"] == before + 1
    library.release(handle)
    assert library.info()["handles"] == before


def test_info_reports_the_go_runtime_memory() -> None:
    require_celgo()
    info = load().info()
    assert info["runtimeMemory"] >= info["heapObjects"] > 0
