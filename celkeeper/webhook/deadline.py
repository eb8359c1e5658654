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
    """One per process: a daemon thread that interrupts an overrunning block (see the module doc).

    Arming costs a few attribute writes (no lock, no wake-up: the thread looks every `tick`
    seconds), so the request path pays next to nothing; the interruption comes up to `tick` late."""

    def __init__(self, repeat: float = 0.1, tick: float = 0.05) -> None:
        self.repeat = repeat
        self.tick = tick
        self._lock = threading.Lock()
        self._target = 0  # thread id of the guarded block (0: none)
        self._due = 0.0
        self._armed = 0  # generation of the guarded block; the watchdog moves it on when it fires
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

    def _arm(self, seconds: float) -> int:
        self._due = time.monotonic() + seconds  # written before the target: seen together
        self._armed += 1
        armed = self._armed
        self._target = threading.get_ident()
        return armed

    def _disarm(self, armed: int, interrupted: bool) -> None:
        with self._lock:  # the watchdog fires under the lock: after this, never
            fired = self._armed != armed
            self._target = 0
        if fired:
            _clear_in(threading.get_ident(), None)  # nothing pending left for later code
            if not interrupted:  # swallowed, or pending when the block ended: say so here
                raise DeadlineExceeded()

    def _run(self) -> None:
        while True:
            time.sleep(self.tick)
            if not self._target or time.monotonic() < self._due:
                continue
            with self._lock:
                target = self._target
                if not target or time.monotonic() < self._due:
                    continue
                _raise_in(target, DeadlineExceeded)
                self.fired += 1
                self._armed += 1  # marks it fired (limit() compares)
                self._due = time.monotonic() + self.repeat  # again, until the block is left


class _Guard:
    """One guarded block (Watchdog.limit): a plain context manager, not a generator one (this is on
    every request's path, and a @contextmanager costs ~2 us to enter and leave)."""

    __slots__ = ("armed", "seconds", "watchdog")

    def __init__(self, watchdog: Watchdog, seconds: float) -> None:
        self.watchdog = watchdog
        self.seconds = seconds
        self.armed = 0

    def __enter__(self) -> None:
        self.armed = self.watchdog._arm(self.seconds)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        interrupted = kind is not None and issubclass(kind, DeadlineExceeded)
        self.watchdog._disarm(self.armed, interrupted)


_UNLIMITED: AbstractContextManager[None] = nullcontext()
