"""The informer's native library, in a child process of its own for each round that compiles.

    library = LibraryProcess(gc_percent=50)
    ffi.install(library)      # what ffi.load() returns in this process: engines compile through it
    ...                       # the first call starts the child (python -m celkeeper.native.child)
    library.trim()            # the round is done: the child ends, and its Go runtime with it

The informer compiles the policies only to check them (fail-static), when they change; the workers
compile their own. Loading the library in the informer kept a Go runtime there for the process's life:
its heap, its runtime's structures and the library's relocated data (~30 MiB of the pod,
docs/performance.md, "Where a webhook pod's memory goes"), though the informer evaluates nothing between
rounds. Here each call of `ffi.Library` is forwarded to a child process that holds the library, started
at the round's first call and ended when the round is over (`trim`, as the informer's round ends:
informer/loop.py). The handles the child returns are told apart from those of an earlier child (the
child's number in the high bits): a handle of a child that has ended is refused, never taken for
another's; releasing it does nothing (the child's end released everything).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import celkeeper
from celkeeper.native.child import CALLS, receive, send
from celkeeper.native.ffi import Library, LibraryUnavailable, pack_handle
from celkeeper.native.locate import FULL, GATEKEEPER, Variant, find_library

#: the parameters of ffi.Library's methods that name a handle of the library
_HANDLE_PARAMETERS = frozenset({"handle", "template", "system", "mutation", "store"})
#: the methods that return (handle, reply)
_RETURNS_HANDLE = frozenset(
    {
        "template",
        "store_open",
        "constraint",
        "expression",
        "mutation_system",
        "admission_policy_set",
        "admission_policy_mutate",
    }
)
_CHILD_BITS = 32  # a child's handles are below 2**32; its number is above
_STOP_SECONDS = 10.0


class LibraryProcessEnded(RuntimeError):
    """The library's process ended during a call, or a handle of a process that has ended was used."""


class LibraryProcess(Library):
    """`ffi.Library`, each call answered by a child process holding the library (see the module)."""

    def __init__(self, gc_percent: int | None = None, variant: Variant = FULL) -> None:
        # no library is loaded in this process; the children load `variant` (celkeeper/native/locate.py)
        path, why = find_library(variant)
        if path is None:
            raise LibraryUnavailable(why)
        self.path = path
        self.pid = os.getpid()
        self.variant = variant
        # whether its children's library has the admissionpolicy capability (ffi.Library's attribute)
        self.admission_policies = path.name not in (GATEKEEPER.name, GATEKEEPER.packaged.name)
        self.gc_percent = gc_percent  # the children's GOGC (None: the library's own, or GOGC's)
        self.started = 0  # children started so far; the current one's number while it runs
        self._child: subprocess.Popen[bytes] | None = None
        self._lock = threading.RLock()

    @property
    def running(self) -> bool:
        """Whether a child holds the library now."""
        return self._child is not None

    @property
    def child_pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    def _start(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        package_root = str(Path(celkeeper.__file__).resolve().parents[1])  # this celkeeper, as installed
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        child = subprocess.Popen(
            [sys.executable, "-m", "celkeeper.native.child", self.variant.name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self._child = child
        self.started += 1
        if self.gc_percent is not None:
            self._ask("set_gc_percent", {"percent": self.gc_percent})
        return child

    def _ask(self, name: str, arguments: dict[str, Any]) -> Any:
        child = self._child
        assert child is not None and child.stdin is not None and child.stdout is not None
        try:
            send(child.stdin, (name, arguments))
            status, value = receive(child.stdout)
        except (EOFError, OSError) as err:
            self._child = None
            for stream in (child.stdin, child.stdout):
                with contextlib.suppress(OSError):
                    stream.close()
            code = child.wait()
            raise LibraryProcessEnded(
                f"celkeeper's native library's process {child.pid} ended (exit code {code}) during {name}"
            ) from err
        if status == "unavailable":
            raise LibraryUnavailable(str(value))
        if status != "ok":
            raise RuntimeError(f"celkeeper's native library's process: {value}")
        return value

    def _local(self, handle: int) -> int:
        """The child's own number for a handle this object returned (0 and negative ones as they are)."""
        if handle <= 0:
            return handle
        if handle >> _CHILD_BITS != self.started or self._child is None:
            raise LibraryProcessEnded(f"handle {handle} belongs to a library process that has ended")
        return handle & ((1 << _CHILD_BITS) - 1)

    def _call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.check()
        arguments = _signature(name).bind(self, *args, **kwargs).arguments
        del arguments["self"]
        with self._lock:
            for key, value in arguments.items():  # a handle of an ended child is refused before any start
                if key in _HANDLE_PARAMETERS:
                    arguments[key] = self._local(int(value))
                elif key == "constraints":  # validate's packed handles
                    arguments[key] = b"".join(
                        pack_handle(self._local(int.from_bytes(value[i : i + 8], sys.byteorder, signed=True)))
                        for i in range(0, len(value), 8)
                    )
            if self._child is None:
                self._start()
            value = self._ask(name, arguments)
            if name in _RETURNS_HANDLE and value[0] > 0:
                value = (value[0] | self.started << _CHILD_BITS, value[1])
            return value

    # -- what differs from a library loaded in this process -------------------------------------------
    def release(self, handle: int) -> None:
        """Free a handle; nothing when its process has ended (everything it held went with it)."""
        with self._lock:
            if handle > 0 and handle >> _CHILD_BITS == self.started and self._child is not None:
                self._call("release", (handle,), {})

    def store_close(self, handle: int) -> None:
        with self._lock:
            if handle > 0 and handle >> _CHILD_BITS == self.started and self._child is not None:
                self._call("store_close", (handle,), {})

    def trim(self) -> None:
        """End the child, and with it its Go runtime and all it holds: the next call starts another."""
        with self._lock:
            child, self._child = self._child, None
        if child is None:
            return
        assert child.stdin is not None and child.stdout is not None
        child.stdin.close()  # the end of its input: it returns
        try:
            child.wait(_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        child.stdout.close()

    def release_file_pages(self) -> int:
        return 0  # nothing of the library is mapped in this process


@functools.cache
def _signature(name: str) -> inspect.Signature:
    return inspect.signature(getattr(Library, name))


def _forwarded(name: str) -> Any:
    def call(self: LibraryProcess, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, args, kwargs)

    call.__name__ = name
    call.__qualname__ = f"LibraryProcess.{name}"
    call.__doc__ = getattr(Library, name).__doc__
    return call


for _name in sorted(CALLS - {"release", "store_close"}):
    setattr(LibraryProcess, _name, _forwarded(_name))
