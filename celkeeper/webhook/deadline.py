"""The webhook's backstop for the per-request evaluation deadline.

The deadline itself (`--eval-deadline`, Settings.eval_deadline) is the engine's to honour: it is
passed to `decide`, and constraints not evaluated in time fail under their own failurePolicy. This
is what makes the webhook's answer and the worker safe when evaluation does not stop anyway (an
engine without a budget, a bug): `with watchdog.limit(seconds):` interrupts the code running in
that block in this thread once `seconds` have passed, by raising `DeadlineExceeded` in it
(PyThreadState_SetAsyncExc), again every `repeat` seconds until the block is left. The request is
then answered by the failure mode, well-formed, and the worker goes on serving, where Gunicorn's
--timeout would kill the worker and every connection it holds.

Python code is interrupted at its next bytecode; code running inside a C extension is interrupted
when it returns to Python (an engine in C must honour the deadline itself; Gunicorn's --timeout
stays the last resort). DeadlineExceeded derives from BaseException, so that an engine's
`except Exception` cannot swallow it.
"""

from __future__ import annotations

import ctypes
import threading
import time
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType


class DeadlineExceeded(BaseException):
    """The evaluation of one request overran its deadline (raised into it by the watchdog)."""


_SetAsyncExc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)
_ClearAsyncExc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)
_raise_in = _SetAsyncExc(("PyThreadState_SetAsyncExc", ctypes.pythonapi))
_clear_in = _ClearAsyncExc(("PyThreadState_SetAsyncExc", ctypes.pythonapi))  # NULL: forget what is pending


class Watchdog:
    """One per process: a daemon thread that interrupts an overrunning block (see the module doc), in
    whichever thread it runs: the worker's event loops each guard their own evaluations.

    Arming costs a dictionary entry (no lock, no wake-up: the thread looks every `tick` seconds), so the
    request path pays next to nothing; the interruption comes up to `tick` late."""

    def __init__(self, repeat: float = 0.1, tick: float = 0.05) -> None:
        self.repeat = repeat
        self.tick = tick
        self._lock = threading.Lock()
        # thread id -> its guarded block (the innermost: an enclosing one is kept by _Guard)
        self._blocks: dict[int, _Guard] = {}
        self.fired = 0  # how many times it interrupted (for logs and tests)
        self._thread: threading.Thread | None = None

    def limit(self, seconds: float) -> AbstractContextManager[None]:
        """Interrupt the block with DeadlineExceeded if it runs longer than `seconds` (0: no limit)."""
        if seconds <= 0:
            return _UNLIMITED
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="eval-watchdog", daemon=True)
            self._thread.start()
        return _Guard(self, seconds)

    def _disarm(self, guard: _Guard, interrupted: bool) -> None:
        with self._lock:  # the watchdog fires under the lock: after this, never
            if guard.outer is not None:
                self._blocks[guard.thread] = guard.outer
            else:
                self._blocks.pop(guard.thread, None)
            fired = guard.fired
        if fired:
            _clear_in(guard.thread, None)  # nothing pending left for later code
            if not interrupted:  # swallowed, or pending when the block ended: say so here
                raise DeadlineExceeded()

    def _run(self) -> None:
        while True:
            time.sleep(self.tick)
            if not self._blocks:
                continue
            now = time.monotonic()
            if all(now < guard.due for guard in list(self._blocks.values())):
                continue
            with self._lock:
                for thread, guard in list(self._blocks.items()):
                    if time.monotonic() < guard.due:
                        continue
                    _raise_in(thread, DeadlineExceeded)
                    self.fired += 1
                    guard.fired += 1  # limit()'s exit compares
                    guard.due = time.monotonic() + self.repeat  # again, until the block is left


class _Guard:
    """One guarded block (Watchdog.limit): a plain context manager, not a generator one (this is on
    every request's path, and a @contextmanager costs ~2 us to enter and leave)."""

    __slots__ = ("due", "fired", "outer", "seconds", "thread", "watchdog")

    def __init__(self, watchdog: Watchdog, seconds: float) -> None:
        self.watchdog = watchdog
        self.seconds = seconds
        self.due = 0.0
        self.fired = 0
        self.thread = 0
        self.outer: _Guard | None = None

    def __enter__(self) -> None:
        self.due = time.monotonic() + self.seconds  # set before the block is seen by the watchdog
        self.thread = threading.get_ident()
        blocks = self.watchdog._blocks
        self.outer = blocks.get(self.thread)
        blocks[self.thread] = self  # one store: the watchdog sees this block whole, or not yet

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        interrupted = kind is not None and issubclass(kind, DeadlineExceeded)
        self.watchdog._disarm(self, interrupted)


_UNLIMITED: AbstractContextManager[None] = nullcontext()
