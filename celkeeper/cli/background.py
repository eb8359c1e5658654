"""A call run on a thread of its own while the command goes on: the engine loads (the cel-go library's Go
runtime initialises and builds Kubernetes' CEL environments: native/go/main.go's init) while the files are
read."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

_T = TypeVar("_T")

#: threads compiling `verify`'s templates ahead of its tests (cel-go: without the GIL, each on a compiler of
#: its own), one per core up to two: one keeps ahead of the tests on the examples and library samples; a
#: second shortens the start, where the first tests wait for their templates
COMPILE_THREADS = min(2, len(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else 1


class Background(Generic[_T]):
    """A call running on a thread of its own; `result()` waits for it (raising what it raised)."""

    def __init__(self, call: Callable[..., _T], *args: Any) -> None:
        self._call, self._args = call, args
        self._value: _T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="celkeeper-background", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._call(*self._args)
        except BaseException as err:  # handed to result(), in the caller's thread
            self._error = err

    def join(self) -> None:
        """Wait for the call to end (what it raised stays for `result()`)."""
        self._thread.join()

    def result(self) -> _T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return cast(_T, self._value)


def preload_library(compilers: int = 1) -> None:
    """Start loading the native library on a thread of its own (daemon): its Go runtime initialises
    (~40 ms of CPU, on threads of its own) while the command's modules are imported, rather than after;
    then the library makes and warms `compilers` compilers (Library.compilers: templates compile on that
    many threads at once), as the command's engine would ask once its modules are imported. The library
    is the process's one instance (native.ffi.load): the command's engine takes it as loaded, or waits
    for the load under way. A library that cannot be loaded is said by the command's own load (which
    tries again), as without this."""

    def run() -> None:
        from celkeeper.native.ffi import LibraryUnavailable, load

        with contextlib.suppress(LibraryUnavailable):
            library = load()
            if compilers > 1:
                library.compilers(compilers)

    threading.Thread(target=run, name="celkeeper-preload", daemon=True).start()
